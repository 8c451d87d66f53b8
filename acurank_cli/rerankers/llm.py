"""``hf:<model dir or hub id>``: a causal LM through transformers, as a listwise reranker.

Greedy decoding by default (``temperature`` 0), left-padded batched generation of the requests
(``batch_size`` at a time, similar lengths together), token accounting per call. torch and
transformers are imported only when a backend is built, so importing this module is cheap.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..records import RerankRequest, RerankResult
from .base import register
from .parsing import parse_ranking
from .prompts import (
    HFTokenCounter,
    Prompt,
    PromptBuilder,
    answer_tokens_for,
    default_format,
    get_format,
)

_DTYPES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "float16": "float16", "half": "float16",
    "fp32": "float32", "float32": "float32", "float": "float32",
}


def _opt(options: dict[str, Any], key: str, default: Any) -> Any:
    """``options[key]`` unless missing or None."""
    value = options.get(key)
    return default if value is None else value


def _dtype_kwarg(dtype: Any) -> dict[str, Any]:
    """``dtype=`` for transformers >= 4.56 (5.x), ``torch_dtype=`` before (pyproject allows >= 4.44)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class quiet_loading:
    """Silence transformers' weight-loading progress bar (stderr noise in a CLI), then restore it."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self._logging = hf_logging
        self._was = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        if self._was:
            self._logging.enable_progress_bar()
        return False


class _LRU(OrderedDict):
    """A small bounded mapping (least recently used entries go first)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get_or(self, key, make):
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = make()
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)
        return value


class HFReranker:
    """A transformers causal LM that reads a RankLLM prompt and writes ``[i] > [j] > ...``."""

    needs_texts = True

    def __init__(self, model: str, options: dict[str, Any] | None = None):
        options = dict(options or {})
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - transformers is a dependency
            raise InputError(f"hf: backend needs torch and transformers ({_one_line(exc)})") from exc
        self._torch = torch
        local = Path(model).expanduser()
        self.model_id = str(local.resolve()) if local.exists() else model
        self.name = f"hf:{model}"

        device = options.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(device)
        dtype_name = options.get("dtype")
        if dtype_name in (None, "", "auto"):
            on_gpu = self.device.type == "cuda"
            dtype_name = "bfloat16" if on_gpu and torch.cuda.is_bf16_supported() else ("float16" if on_gpu else "float32")
        dtype_name = _DTYPES.get(str(dtype_name).lower())
        if dtype_name is None:
            raise InputError(f"unknown dtype {options.get('dtype')!r}; known: {', '.join(sorted(_DTYPES))}")
        self.dtype_name = dtype_name
        if options.get("prompt_format"):
            get_format(options["prompt_format"])  # fail before loading weights

        try:
            with quiet_loading():
                self.tokenizer = AutoTokenizer.from_pretrained(self.model_id)
                self.model = AutoModelForCausalLM.from_pretrained(self.model_id, **_dtype_kwarg(getattr(torch, dtype_name)))
        except (OSError, ValueError) as exc:
            raise InputError(f"hf: cannot load model {model!r}: {_one_line(exc)}") from exc
        self.model.to(self.device)
        self.model.eval()

        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
        self.pad_id = tok.pad_token_id
        eos: set[int] = set()
        for source in (getattr(self.model.generation_config, "eos_token_id", None), tok.eos_token_id):
            if isinstance(source, int):
                eos.add(source)
            elif source:
                eos.update(int(x) for x in source)
        self.eos_ids = sorted(eos)

        fmt_name = options.get("prompt_format") or default_format(tok)
        self.format = get_format(fmt_name)
        if self.format.needs_chat_template and not getattr(tok, "chat_template", None):
            raise InputError(f"hf: {model!r} has no chat template; use --prompt rankvicuna or rankzephyr")

        self.m = int(_opt(options, "m", 20))
        self.counter = HFTokenCounter(tok)
        self.max_new_tokens = int(_opt(options, "max_new_tokens", 0)) or answer_tokens_for(self.m, self.counter)
        context = int(_opt(options, "context_size", 4096))
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.context_size = min(context, int(limit)) if isinstance(limit, int) and limit > 0 else context
        self.temperature = float(_opt(options, "temperature", 0.0))
        self.batch_size = max(1, int(_opt(options, "batch_size", 8)))
        self.builder = PromptBuilder(
            lambda msgs: self.format.render(msgs, tok), self.counter, self.context_size, self.max_new_tokens
        )
        self._prompts = _LRU(4096)

    # -- the call cache's hooks ---------------------------------------------------------------

    def cache_identity(self) -> dict[str, Any]:
        """What, besides the prompt, decides the answer: model, dtype, decoding, format, sizes."""
        revision = getattr(self.model.config, "_commit_hash", None)
        return {
            "backend": "hf",
            "model": self.model_id,
            "revision": revision,
            "dtype": self.dtype_name,
            "decoding": "greedy" if self.temperature == 0 else f"sample(t={self.temperature})",
            "max_new_tokens": self.max_new_tokens,
            "prompt_format": self.format.name,
            "context_size": self.context_size,
        }

    def prompt_key(self, request: RerankRequest) -> str:
        """The exact text the model reads for ``request``."""
        return self.prompt(request).text

    # -- prompting and generation -------------------------------------------------------------

    def prompt(self, request: RerankRequest) -> Prompt:
        """The (memoised) prompt for a request."""
        if len(request.texts) != len(request.docids):
            raise InputError(f"hf: request for query {request.qid!r} has {len(request.texts)} texts for {len(request.docids)} docids")
        return self._prompts.get_or((request.query, request.texts), lambda: self.builder.build(request.query, request.texts))

    def generate(self, texts: Sequence[str]) -> list[tuple[str, int, int, float]]:
        """Generate for every prompt text: ``(answer, input_tokens, output_tokens, latency)``.

        Prompts are sorted by length and run ``batch_size`` at a time, left-padded; each result's
        latency is the wall time of the generate call that produced it.
        """
        torch = self._torch
        lengths = [self.counter.count(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: (lengths[i], i))
        results: list[tuple[str, int, int, float] | None] = [None] * len(texts)
        sampling = self.temperature > 0
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": sampling,
            "pad_token_id": self.pad_id,
            "eos_token_id": self.eos_ids or None,
        }
        if sampling:
            gen_kwargs["temperature"] = self.temperature
        else:  # silence sampling knobs a model's generation_config may carry
            gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            enc = self.tokenizer(
                [texts[i] for i in chunk], add_special_tokens=False, padding=True, return_tensors="pt"
            ).to(self.device)
            t0 = time.perf_counter()
            with torch.inference_mode():
                out = self.model.generate(**enc, **gen_kwargs)
            latency = time.perf_counter() - t0
            generated = out[:, enc["input_ids"].shape[1] :].tolist()
            prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
            for row, i in enumerate(chunk):
                ids = generated[row]
                cut = len(ids)
                for k, tid in enumerate(ids):
                    if tid in self.eos_ids:
                        cut = k + 1
                        break
                answer = self.tokenizer.decode(ids[:cut], skip_special_tokens=True)
                results[i] = (answer, int(prompt_lens[row]), cut, latency)
        return results  # type: ignore[return-value]

    def rerank(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        """Prompt, generate (batched) and parse every request."""
        prompts = [self.prompt(r) for r in requests]
        outputs = self.generate([p.text for p in prompts])
        results = []
        for req, (answer, n_in, n_out, latency) in zip(requests, outputs):
            parsed = parse_ranking(answer, len(req.docids))
            results.append(
                RerankResult(parsed.order, n_in, n_out, latency, parsed.status, False, answer, self.name)
            )
        return results


@register("hf", takes_arg=True, help="causal LM through transformers: hf:MODEL_DIR or hf:HUB_ID (greedy, batched)")
def _factory(arg: str, options: dict[str, Any]) -> HFReranker:
    return HFReranker(arg, options)


__all__ = ["HFReranker"]
