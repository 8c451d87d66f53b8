"""How a listwise LLM answers (``--answer``), shared by the hf:, vllm: and openai: backends.

* ``text`` (the published way): the model writes ``[i] > [j] > ...`` freely, parsed by the published rule.
* ``constrained``: decoding can only write a valid permutation in that format. :class:`PermutationGrammar`
  is the answer language (``[a] > [b] > ... > [z]``, every identifier 1..n exactly once, then the end) as a
  state machine over characters; :class:`TokenGrammar` lifts it to a tokenizer's tokens (each token's text
  as it reads after another token), so a decoder can ask, at every step, which tokens keep the answer a
  prefix of a valid one, and whether it is complete (then only the end token may follow).
* ``logits`` (FIRST, Reddy et al., EMNLP 2024): the passages carry letters ``[A]``, ``[B]``, ...
  (:data:`LETTERS`: single tokens for every common tokenizer), the model is asked to answer with the letters
  only, so the first thing it writes is an identifier; one forward pass, and the window is ordered by the
  first token's logit for each identifier (:func:`rank_by_scores`). A letter may be one of several tokens
  (``B``, ``ĠB``, ``▁B``: with or without a leading space): its score is the log-sum-exp of their logits
  (:func:`letter_variants`), the log-probability of writing that letter first, however spaced.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import OptionError
from ..records import ParseStatus


class AnswerMode(str, enum.Enum):
    """``--answer``: how the model answers (see the module doc)."""

    text = "text"
    constrained = "constrained"
    logits = "logits"


#: The identifiers of ``--answer logits``: a window of up to 26 passages.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# -- logits ---------------------------------------------------------------------------------------


def rank_by_scores(scores: Sequence[float | None]) -> tuple[tuple[int, ...], ParseStatus]:
    """A window's order from per-position scores: highest first, ties by presented position; positions
    without a score (None: not among what an endpoint returned) follow in presented order and make the
    outcome ``incomplete``."""
    scored = [i for i, s in enumerate(scores) if s is not None]
    order = sorted(scored, key=lambda i: (-scores[i], i)) + [i for i, s in enumerate(scores) if s is None]
    return tuple(order), (ParseStatus.ok if len(scored) == len(scores) else ParseStatus.incomplete)


def logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def letter_variants(tokenizer: Any, n: int) -> list[list[int]]:
    """For each of the first ``n`` letters, the ids of the vocabulary's single tokens that write it: the
    letter alone and with a leading space (``ĠA`` byte-level BPE, ``▁A`` SentencePiece, `` A``); at least
    one each, or ValueError naming the letter."""
    vocab = tokenizer.get_vocab()
    out = []
    for letter in LETTERS[:n]:
        ids = sorted({vocab[t] for t in (letter, "Ġ" + letter, "▁" + letter, " " + letter) if t in vocab})
        if not ids:
            raise ValueError(f"the tokenizer has no single token for the identifier {letter!r}")
        out.append(ids)
    return out


def letter_scores(logits: Sequence[float], variants: list[list[int]]) -> tuple[float, ...]:
    """Each letter's score from one position's logits: log-sum-exp over its token variants."""
    return tuple(logsumexp([float(logits[t]) for t in ids]) for ids in variants)


# -- constrained ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrammarState:
    """Where an answer stands: identifiers used, the digits of the one being written (``None``: not inside
    brackets), how much of the separator " > " is written, and whether the answer is complete."""

    used: frozenset[int] = frozenset()
    digits: str | None = None
    separator: int = 0
    complete: bool = False


class PermutationGrammar:
    """The answers ``[a] > [b] > ... > [z]`` with {a, ..., z} = {1, ..., n}: advance character by character;
    None is a dead end (no valid answer starts so)."""

    SEPARATOR = " > "

    def __init__(self, n: int):
        self.n = n
        self._prefixes = {str(i)[:j] for i in range(1, n + 1) for j in range(1, len(str(i)) + 1)}

    def start(self) -> GrammarState:
        return GrammarState()

    def _open(self, digits: str, used: frozenset[int]) -> bool:
        """Some unused identifier begins with ``digits``."""
        return digits in self._prefixes and any(str(i).startswith(digits) for i in range(1, self.n + 1) if i not in used)

    def advance(self, state: GrammarState | None, text: str) -> GrammarState | None:
        for ch in text:
            if state is None or state.complete:
                return None
            if state.digits is not None:  # inside [ ... ]
                if ch.isdigit():
                    digits = state.digits + ch
                    state = GrammarState(state.used, digits) if self._open(digits, state.used) else None
                elif ch == "]" and state.digits and int(state.digits) not in state.used and state.digits in self._prefixes:
                    used = state.used | {int(state.digits)}
                    state = GrammarState(used, None, 0, len(used) == self.n)
                else:
                    return None
            elif not state.used or state.separator == len(self.SEPARATOR):  # expecting "["
                state = GrammarState(state.used, "") if ch == "[" else None
            elif ch == self.SEPARATOR[state.separator]:
                state = GrammarState(state.used, None, state.separator + 1)
            else:
                return None
        return state


@dataclass
class TokenGrammar:
    """:class:`PermutationGrammar` over a tokenizer's tokens: ``pieces`` maps every token whose text is made
    only of the answer's characters to that text (as it reads after another token); every other token, and
    the end token while the answer is incomplete, is refused."""

    pieces: dict[int, str]
    eos: int | None
    _memo: dict = field(default_factory=dict, repr=False)

    CHARS = frozenset("[]0123456789> ")

    @classmethod
    def of(cls, tokenizer: Any) -> "TokenGrammar":
        """Every token's text after a neutral first token (the one for ``]``), so that SentencePiece's and
        byte-level BPE's leading-space markers read as the space they write."""
        anchor = tokenizer.encode("]", add_special_tokens=False)[-1:]
        base = tokenizer.decode(anchor)
        pieces = {}
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for tid in range(len(tokenizer)):
            if tid in special:
                continue
            text = tokenizer.decode(anchor + [tid])
            if text.startswith(base):
                piece = text[len(base):]
                if piece and set(piece) <= cls.CHARS:
                    pieces[tid] = piece
        return cls(pieces, getattr(tokenizer, "eos_token_id", None))

    def advance(self, grammar: PermutationGrammar, state: GrammarState, token: int) -> GrammarState | None:
        """The state after ``token`` (None: not a token of the answer)."""
        piece = self.pieces.get(token)
        return None if piece is None else grammar.advance(state, piece)

    def allowed(self, grammar: PermutationGrammar, state: GrammarState) -> list[int]:
        """The tokens that keep an answer in ``state`` valid (the end token alone once it is complete)."""
        if state.complete:
            return [] if self.eos is None else [self.eos]
        key = (grammar.n, state)
        found = self._memo.get(key)
        if found is None:
            found = [t for t, piece in self.pieces.items() if grammar.advance(state, piece) is not None]
            self._memo[key] = found
        return found


def permutation_regex(n: int) -> str:
    """The answer format ``[a] > [b] > ...`` with exactly ``n`` identifiers from 1..n, as a regular expression
    (what an OpenAI-compatible server's structured outputs take). A regular language cannot say "each once"
    without growing as n!: repeats stay possible, and the parser repairs them (counted as ``repaired``)."""
    ident = r"\[(?:" + "|".join(str(i) for i in range(n, 0, -1)) + r")\]"
    return ident + (r"(?: > " + ident + r"){" + str(n - 1) + "}" if n > 1 else "")


def scores_from_top_logprobs(top: Sequence[tuple[str, float]], n: int) -> tuple[float | None, ...]:
    """A window's letter scores from the alternatives an endpoint returned for the first answer token
    (``(token text, log-probability)`` pairs): each letter's log-sum-exp over the tokens that read as it
    (``A``, `` A``), None for a letter not among them (then ranked after the returned ones)."""
    found: dict[str, list[float]] = {}
    for text, logprob in top:
        letter = text.strip()
        if len(letter) == 1 and letter in LETTERS[:n]:
            found.setdefault(letter, []).append(float(logprob))
    return tuple(logsumexp(found[c]) if c in found else None for c in LETTERS[:n])


class AnswerDecoding:
    """What a local model's decoder needs for an answer mode, built from its tokenizer once (lazily): the
    letters' token variants (logits) and the token grammar (constrained)."""

    def __init__(self, tokenizer: Any, mode: AnswerMode, backend: str):
        self.tokenizer = tokenizer
        self.mode = AnswerMode(mode)
        self.backend = backend
        self.eos = getattr(tokenizer, "eos_token_id", None)
        self._variants: list[list[int]] | None = None
        self._grammar: TokenGrammar | None = None
        if self.mode is AnswerMode.constrained and self.eos is None:
            raise OptionError(f"{backend}: {{answer}} needs a tokenizer with an end-of-sequence token",
                              answer=("--answer", "constrained"))

    def variants(self, n: int) -> list[list[int]]:
        if self._variants is None:
            self._variants = letter_variants(self.tokenizer, len(LETTERS))
        return self._variants[:n]

    def scores(self, logits: Sequence[float], n: int) -> tuple[float, ...]:
        """The window's letters scored from the first position's logits."""
        return letter_scores(logits, self.variants(n))

    def columns(self) -> list[int]:
        """The vocabulary ids any letter's score reads: a model's logits can be cut to these on its device, so a
        batch's answer crosses to the host as a few dozen numbers a row, not the whole vocabulary."""
        return sorted({t for ids in self.variants(len(LETTERS)) for t in ids})

    def scores_of_columns(self, values: Sequence[float], n: int) -> tuple[float, ...]:
        """:meth:`scores` from one row of logits cut to :meth:`columns` (the same numbers, so the same scores)."""
        return letter_scores(dict(zip(self.columns(), values)), self.variants(n))  # type: ignore[arg-type]

    @staticmethod
    def shown(scores: Sequence[float | None]) -> str:
        """The answer the scores stand for, as letters (for the prompt log and the cache's raw answer)."""
        order, _ = rank_by_scores(scores)
        return " > ".join(LETTERS[i] for i in order)

    @property
    def grammar(self) -> TokenGrammar:
        if self._grammar is None:
            self._grammar = TokenGrammar.of(self.tokenizer)
        return self._grammar

    def until_end(self, generated: list[int]) -> list[int]:
        """A constrained answer's tokens up to and including its end token (later ones are padding)."""
        return generated[: generated.index(self.eos) + 1] if self.eos in generated else generated

    def processor(self, torch: Any, nums: Sequence[int], prompt_width: int) -> Any:
        """A transformers logits processor for a batch of windows of ``nums`` passages (prompts left-padded to
        ``prompt_width``): each row may only continue its answer within the permutation grammar."""
        from transformers import LogitsProcessor, LogitsProcessorList

        tokens = self.grammar
        grammars = [PermutationGrammar(n) for n in nums]
        states: list[GrammarState | None] = [g.start() for g in grammars]
        seen = [0]  # tokens generated so far (every row of a batch gets one a step)

        class Permutations(LogitsProcessor):
            """Per step: the batch's new tokens read back in one transfer, each row's grammar advanced on the host,
            and the allowed tokens of every row unmasked in one indexed write (not a transfer and a write a row)."""

            def __call__(self, input_ids, scores):
                fresh = input_ids[:, prompt_width + seen[0]:].tolist()  # every row's tokens since the last step
                seen[0] = input_ids.shape[1] - prompt_width
                rows: list[int] = []
                cols: list[int] = []
                free: list[int] = []
                for row, new in enumerate(fresh):
                    state = states[row]
                    for tid in new:
                        state = None if state is None or state.complete else tokens.advance(grammars[row], state, tid)
                    states[row] = state
                    if state is None:  # finished (its end token written) or padding: leave the row alone
                        free.append(row)
                    else:
                        allowed = tokens.allowed(grammars[row], state)
                        rows.extend([row] * len(allowed))
                        cols.extend(allowed)
                mask = torch.full_like(scores, -math.inf)
                if rows:
                    mask[torch.tensor(rows, device=scores.device), torch.tensor(cols, device=scores.device)] = 0.0
                if free:
                    mask[torch.tensor(free, device=scores.device)] = 0.0
                return scores + mask

        return LogitsProcessorList([Permutations()])


__all__ = ["AnswerDecoding", "AnswerMode", "GrammarState", "LETTERS", "PermutationGrammar", "TokenGrammar", "letter_scores",
           "letter_variants", "logsumexp", "permutation_regex", "rank_by_scores", "scores_from_top_logprobs"]
