"""vLLM's logits processor for ``--answer constrained``: a request whose ``SamplingParams.extra_args`` name
``acurank_permutation: n`` may only write a valid permutation of 1..n in the answer format, then its end
token (:class:`~.answers.PermutationGrammar` over the model tokenizer's tokens, as ``hf:``'s processor).

vLLM's structured outputs (regex, grammars) cannot say "each identifier once" without a pattern that grows
with n!, so the same grammar as ``hf:`` runs here, as one of the engine's logits processors (vLLM V1's batch
interface: the engine reports the requests entering and leaving its batch and hands over a live view of each
one's output tokens). This module imports vLLM and torch: the engine loads it by name
(``acurank_cli.rerankers.backends.vllm_permutations:PermutationLogits``), in its own process where it has one.
"""

from __future__ import annotations

import math

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from ..listwise.answers import GrammarState, PermutationGrammar, TokenGrammar

#: The ``extra_args`` key that asks for a permutation of that many identifiers.
KEY = "acurank_permutation"
#: How the engine finds the processor.
QUALNAME = f"{__name__}:PermutationLogits"


class PermutationLogits(LogitsProcessor):
    """Masks each constrained request's logits to the tokens that keep its answer a valid permutation."""

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        n = (sampling_params.extra_args or {}).get(KEY)
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise ValueError(f"{KEY} must be a positive integer, got {n!r}")

    def __init__(self, vllm_config, device, is_pin_memory: bool) -> None:
        self._tokenizer = vllm_config.model_config.tokenizer
        self._tokens: TokenGrammar | None = None
        #: batch index -> [grammar, output token ids (the engine's live list), state, tokens seen]
        self._rows: dict[int, list] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it decides what greedy decoding may pick

    def tokens(self) -> TokenGrammar:
        if self._tokens is None:
            from transformers import AutoTokenizer

            self._tokens = TokenGrammar.of(AutoTokenizer.from_pretrained(self._tokenizer))
        return self._tokens

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self._rows.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            n = (getattr(params, "extra_args", None) or {}).get(KEY)
            if n:
                grammar = PermutationGrammar(int(n))
                self._rows[index] = [grammar, output, grammar.start(), 0]
            else:
                self._rows.pop(index, None)
        for a, b, direction in batch_update.moved:
            row_a, row_b = self._rows.pop(a, None), self._rows.pop(b, None)
            if row_a is not None:
                self._rows[b] = row_a
            if direction is MoveDirectionality.SWAP and row_b is not None:
                self._rows[a] = row_b

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        tokens = self.tokens()
        for index, row in self._rows.items():
            grammar, output, state, seen = row
            for tid in output[seen:]:  # the tokens written since the last step
                state = None if state is None or state.complete else tokens.advance(grammar, state, tid)
            row[2], row[3] = state, len(output)
            if state is None:
                continue  # finished (its end token written): left alone
            keep = torch.tensor(tokens.allowed(grammar, state), dtype=torch.long, device=logits.device)
            masked = torch.full_like(logits[index], -math.inf)
            masked[keep] = logits[index, keep]
            logits[index] = masked
        return logits


__all__ = ["KEY", "QUALNAME", "GrammarState", "PermutationLogits"]
