"""``hf:<model dir or hub id>``: a causal LM through transformers, as a listwise reranker.

Prompts as the published AcuRank code built them (:mod:`.prompts`), counted with the model's own
tokenizer; greedy decoding of exactly ``out(num)`` new tokens (``max_new_tokens = min_new_tokens``,
as published), decoded without special tokens. Windows are generated ``batch_size`` at a time,
left-padded, grouped by window size; every finished batch is delivered at once (to the call
cache). torch and transformers are imported only when a backend is built.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ...errors import InputError
from ...params import Option, at_least
from ..backend import register
from ..option_groups import PromptOptions, TorchOptions, WeightsOptions
from .checkpoints import dtype_kwarg, dtype_name, one_line, quiet_loading, resolve_model
from ..listwise.prompt_builder import Prompt, prompt_builder
from ..listwise.answers import AnswerDecoding, AnswerMode
from ..listwise.reranker import Deliver, ListwiseLLM, Reply
from ..listwise.prompts import HFTokenCounter, get_format
from ..listwise.templates import template_of
from ..listwise.thinking import Effort, ThinkingOptions, check_thinking
from ..listwise.thoughts import CLOSE_TAG, LocalThought, ended_thought

class HFReranker(ListwiseLLM):
    """A transformers causal LM that reads the published RankLLM prompt and writes ``[i] > [j] > ...``."""

    def __init__(self, model: str, options: "HFOptions | None" = None):
        options = options or HFOptions()
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - transformers is a dependency
            raise InputError(f"hf: backend needs torch and transformers ({one_line(exc)})") from exc
        self._torch = torch
        self.source = resolve_model(model, "hf")
        self.source.check_weights("hf")
        self.model_id = self.source.location

        self.device = options.torch_device()
        on_gpu = self.device.type == "cuda"
        self.dtype_name = dtype_name(options.dtype, on_gpu, on_gpu and torch.cuda.is_bf16_supported())
        prompt_format, template = template_of(options, "hf")  # a template file read and checked before weights
        if prompt_format:
            get_format(prompt_format)
        check_thinking(options, "hf", Effort.variable)
        self.temperature = float(options.temperature)
        self.batch_size = max(1, int(options.batch_size))
        #: padded tokens a batch may hold (rows x its longest prompt): on a GPU by default, so a batch is as many
        #: windows as fill the chip (BENCHMARKS.md 17), and --batch-size applies only with --batch-tokens 0; on a CPU
        #: none by default (--batch-size windows, as always)
        chosen = options.batch_tokens if options.batch_tokens is not None else (CUDA_BATCH_TOKENS if on_gpu else 0)
        self.batch_tokens = int(chosen)
        if on_gpu:
            self.batch_queries = CUDA_QUERIES_IN_FLIGHT  # enough windows waiting to make such batches
        self.double_bos = bool(options.double_bos)

        try:
            with quiet_loading():
                tok = AutoTokenizer.from_pretrained(self.model_id, **self.source.load_kwargs())
                self.model = AutoModelForCausalLM.from_pretrained(
                    self.model_id, **self.source.load_kwargs(), **dtype_kwarg(getattr(torch, self.dtype_name)))
        except (OSError, ValueError) as exc:
            raise self.source.not_loaded("hf", exc) from exc
        self.tokenizer = tok
        self.model.to(self.device)
        self.model.eval()
        import inspect

        #: ``logits_to_keep=1`` where the model's forward takes it: the LM head (vocabulary x hidden) runs on the
        #: last position only, not on every prompt position (a fifth of SmolLM2-135M's FLOPs at 1,850 tokens)
        takes = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._last_only = {"logits_to_keep": 1} if takes else {}
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (
            tok.eos_token_id if tok.eos_token_id is not None else 0)
        builder = local_builder(self.source, tok, self.model.config, options, "hf", (prompt_format, template))
        self.answer = builder.answer
        self.decoding = AnswerDecoding(tok, self.answer, "hf")
        super().__init__(f"hf:{model}", builder, options.log_prompts, ThinkingOptions.of(options))

    @property
    def format(self):
        return self.builder.format

    @property
    def context_size(self) -> int:
        return self.builder.context_size

    # -- the call cache's hooks ---------------------------------------------------------------

    def parameters(self) -> int | None:
        """The loaded model's parameter count (tied weights once), for the FLOPs estimate."""
        return int(self.model.num_parameters())

    def cache_identity(self) -> dict[str, Any]:
        """What, besides the prompt, decides the answer: model, dtype, decoding, format, sizes."""
        revision = getattr(self.model.config, "_commit_hash", None)
        return {
            "backend": "hf",
            **self.source.identity(),
            "revision": revision,
            "dtype": self.dtype_name,
            "decoding": "greedy" if self.temperature == 0 else f"sample(t={self.temperature})",
            "answer_tokens": self.builder.counter.answer_identity(),
            "bos": "double" if self.double_bos else "single",
            **self.prompt_identity(),
        }

    # -- generation -----------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Prompt], deliver: Deliver) -> None:
        """Per prompt, by the answer mode: greedy generation of exactly ``out(num)`` tokens (text), generation
        under the permutation grammar until it is complete (constrained), or one forward pass whose last
        position's logits score the letters (logits); ``batch_size`` prompts at a time.

        Prompts are grouped by window size and sorted by length, left-padded; every row of a batch is
        delivered when that batch's call returns; its latency is that call's wall time.
        """
        torch = self._torch
        counter: HFTokenCounter = self.builder.counter  # type: ignore[assignment]
        ids = [counter.ids(p.text) for p in prompts]
        thoughts = self._think(prompts, ids) if any(p.think for p in prompts) else {}
        prompt_tokens = [len(x) for x in ids]
        for i, thought in thoughts.items():  # the answer follows the thought (ended by the model, or forced)
            ids[i] = ids[i] + thought.ids
        batches = self._batches(prompts, ids)
        sampling = self.temperature > 0

        def tensors(chunk: list[int]):
            width = max(len(ids[i]) for i in chunk)
            input_ids = torch.tensor([[self.pad_id] * (width - len(ids[i])) + ids[i] for i in chunk], device=self.device)
            mask = torch.tensor([[0] * (width - len(ids[i])) + [1] * len(ids[i]) for i in chunk], device=self.device)
            return width, input_ids, mask

        if self.answer is AnswerMode.logits:
            self._logits(prompts, ids, batches, tensors, deliver)
            return
        for chunk in batches:
            width, input_ids, mask = tensors(chunk)
            t0 = time.perf_counter()
            out_tokens = prompts[chunk[0]].answer_tokens
            gen_kwargs: dict[str, Any] = {"max_new_tokens": out_tokens, "do_sample": sampling, "pad_token_id": self.pad_id}
            if self.answer is AnswerMode.constrained:  # until the permutation is complete (then its end token)
                gen_kwargs["logits_processor"] = self.decoding.processor(torch, [prompts[i].num for i in chunk], width)
                gen_kwargs["eos_token_id"] = self.decoding.eos
            else:  # exactly out(num) tokens, as published
                gen_kwargs["min_new_tokens"] = out_tokens
            if sampling:
                gen_kwargs["temperature"] = self.temperature
            else:  # silence sampling knobs a model's generation_config may carry
                gen_kwargs.update(temperature=None, top_p=None, top_k=None)
            with torch.inference_mode():
                out = self.model.generate(input_ids=input_ids, attention_mask=mask, **gen_kwargs)
            latency = time.perf_counter() - t0
            for row, i in enumerate(chunk):
                generated = out[row, width:].tolist()
                if self.answer is AnswerMode.constrained:  # up to its end token (a shorter row is padded after it)
                    generated = self.decoding.until_end(generated)
                answer = self.tokenizer.decode(generated, skip_special_tokens=True)
                thought = thoughts.get(i)
                if thought is None:
                    deliver(i, Reply(answer=answer, input_tokens=len(ids[i]), output_tokens=len(generated),
                                     latency=latency))
                    continue
                deliver(i, Reply(answer=thought.text + answer, input_tokens=prompt_tokens[i],
                                 output_tokens=len(generated), latency=latency + thought.seconds,
                                 reasoning_tokens=thought.tokens, thinking=True))

    def _think(self, prompts: Sequence[Prompt], ids: list[list[int]]) -> dict[int, LocalThought]:
        """The thought of every prompt that thinks (its prompt opens it): generated until the model writes
        ``</think>`` or its end, or for ``thought_budget`` tokens; a thought that did not end is ended there
        (``\n</think>\n\n`` written for it: budget forcing), so that an answer always follows."""
        torch = self._torch
        thinking = [i for i, p in enumerate(prompts) if p.think]
        out: dict[int, LocalThought] = {}
        sampling = self.temperature > 0
        for chunk in self._batches([prompts[i] for i in thinking], [ids[i] for i in thinking]):
            rows = [thinking[j] for j in chunk]
            width = max(len(ids[i]) for i in rows)
            input_ids = torch.tensor([[self.pad_id] * (width - len(ids[i])) + ids[i] for i in rows], device=self.device)
            mask = torch.tensor([[0] * (width - len(ids[i])) + [1] * len(ids[i]) for i in rows], device=self.device)
            budget = prompts[rows[0]].thought_budget
            kw: dict[str, Any] = {"max_new_tokens": budget, "do_sample": sampling, "pad_token_id": self.pad_id,
                                  "stop_strings": [CLOSE_TAG], "tokenizer": self.tokenizer}
            if sampling:
                kw["temperature"] = self.temperature
            else:
                kw.update(temperature=None, top_p=None, top_k=None)
            t0 = time.perf_counter()
            with torch.inference_mode():
                generated = self.model.generate(input_ids=input_ids, attention_mask=mask, **kw)
            seconds = time.perf_counter() - t0
            for row, i in enumerate(rows):
                out[i] = ended_thought(self.tokenizer, self._written(generated[row, width:].tolist()), seconds)
        return out

    def _written(self, tokens: list[int]) -> list[int]:
        """A thought's row of ``generate`` without what the batch added after the row stopped: up to the model's
        end token, or, where it wrote ``</think>`` (a stop string), without the padding after the tag. The pad
        id is a token like any other: a row that ran its whole budget keeps it (a random or small model writes it;
        vLLM's thought, which has no padding, keeps it too)."""
        eos = self.tokenizer.eos_token_id
        if eos is not None and eos in tokens:
            return tokens[: tokens.index(eos)]
        end = len(tokens)
        while end and tokens[end - 1] == self.pad_id:
            end -= 1
        if end < len(tokens) and CLOSE_TAG in self.tokenizer.decode(tokens[:end], skip_special_tokens=True):
            return tokens[:end]
        return tokens

    def _batches(self, prompts: Sequence[Prompt], ids: list[list[int]]) -> list[list[int]]:
        """Prompts grouped by answer length, sorted by length (each batch padded to its longest, shortest first),
        cut at ``batch_size`` windows, or with ``batch_tokens`` where the padded batch would exceed it."""
        order = sorted(range(len(prompts)), key=lambda i: (prompts[i].answer_tokens, len(ids[i]), i))
        batches: list[list[int]] = []
        for i in order:
            last = batches[-1] if batches else None
            fits = last is not None and prompts[last[0]].answer_tokens == prompts[i].answer_tokens and (
                (len(last) + 1) * len(ids[i]) <= self.batch_tokens if self.batch_tokens else len(last) < self.batch_size)
            if fits:
                last.append(i)
            else:
                batches.append([i])
        return batches

    def _logits(self, prompts: Sequence[Prompt], ids: list[list[int]], batches: list[list[int]], tensors,
                deliver: Deliver) -> None:
        """One forward pass a batch, the LM head on the last position only, its logits cut to the letters' columns
        on the device. The next batch's tensors are built while the current one runs (a GPU's forward is queued
        asynchronously: the host waits only when it reads the answer back), the answer read back after."""
        torch = self._torch
        columns = torch.tensor(self.decoding.columns(), device=self.device)
        upcoming = tensors(batches[0]) if batches else None
        for b, chunk in enumerate(batches):
            _, input_ids, mask = upcoming
            t0 = time.perf_counter()
            with torch.inference_mode():
                last = self.model(input_ids=input_ids, attention_mask=mask, **self._last_only).logits[:, -1, :]
                cut = last.index_select(1, columns).float()
            upcoming = tensors(batches[b + 1]) if b + 1 < len(batches) else None
            rows = cut.tolist()  # the host waits for this batch here
            latency = time.perf_counter() - t0
            for row, i in enumerate(chunk):
                scores = self.decoding.scores_of_columns(rows[row], prompts[i].num)
                deliver(i, Reply(answer=self.decoding.shown(scores), input_tokens=len(ids[i]), output_tokens=1,
                                 latency=latency, scores=scores))


#: on a GPU, by default: padded tokens a batch may hold, and queries in flight (whose windows make the batches)
CUDA_BATCH_TOKENS = 32768
CUDA_QUERIES_IN_FLIGHT = 16


@dataclass(frozen=True)
class HFOptions(TorchOptions, PromptOptions, WeightsOptions, ThinkingOptions):
    """hf:MODEL (the shared groups, and the batch's size in tokens)."""

    batch_tokens: Optional[int] = Option(help="padded tokens per batch (rows x the longest prompt), instead of "
                                         "--batch-size windows; 0: --batch-size (default: 32768 on a GPU, 0 on a CPU)",
                                         domain=at_least(0))(None)


def local_builder(source: Any, tokenizer: Any, config: Any, options: Any, backend: str, prompt: tuple) -> Any:
    """The prompt builder of a local model (``hf:``, ``vllm:``) from its tokenizer and its config (the context clamped
    to the model's positions); ``prompt``: :func:`~..listwise.templates.template_of`'s (format, template)."""
    prompt_format, template = prompt
    return prompt_builder(source, tokenizer, prompt_format=prompt_format, context_size=options.context_size,
                          max_positions=getattr(config, "max_position_embeddings", None),
                          double_bos=bool(options.double_bos), backend=backend, answer=options.answer,
                          options=options, template=template)


class LocalPrompts(ListwiseLLM):
    """A local model's prompts with no weights loaded (``acurank prompt render`` for ``hf:`` and ``vllm:``): its
    tokenizer and config only, the builder the engine makes (:func:`local_builder`); it generates nothing."""

    def __init__(self, model: str, options: Any, backend: str = "hf"):
        prompt = template_of(options, backend)
        if prompt[0]:
            get_format(prompt[0])
        check_thinking(options, backend, Effort.variable)
        try:
            from transformers import AutoConfig, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - transformers is a dependency
            raise InputError(f"{backend}: prompts need transformers ({one_line(exc)})") from exc
        source = resolve_model(model, backend)
        try:
            with quiet_loading():
                tok = AutoTokenizer.from_pretrained(source.location, **source.load_kwargs())
                config = AutoConfig.from_pretrained(source.location, **source.load_kwargs())
        except (OSError, ValueError) as exc:
            raise source.not_loaded(backend, exc) from None
        super().__init__(f"{backend}:{model}", local_builder(source, tok, config, options, backend, prompt),
                         thinking=ThinkingOptions.of(options))

    def generate(self, prompts: Sequence[Prompt], deliver: Deliver) -> None:
        raise InputError(f"{self.name}: prompts only (no weights were loaded)")


@register("hf", takes_arg=True, help="causal LM through transformers: hf:MODEL_DIR or hf:HUB_ID (greedy, batched)",
          options=HFOptions, prompts=lambda arg, options: LocalPrompts(arg, options, "hf"), keeps=("calls",),
          ready=lambda arg, options: resolve_model(arg, "hf").check_weights("hf"))
def _factory(arg: str, options: HFOptions) -> HFReranker:
    return HFReranker(arg, options)


__all__ = ["HFReranker"]
