"""``openai:<model>``: any OpenAI-compatible ``/v1/chat/completions`` endpoint as a listwise reranker.

OpenAI itself (``OPENAI_API_KEY`` required) or a local vLLM / SGLang / llama.cpp server given by
``base_url`` (a key is then optional: sent when ``OPENAI_API_KEY`` is set, omitted otherwise).

A batch of windows runs asynchronously with at most ``concurrency`` requests in flight. Each request
has a ``timeout`` and up to ``retries`` retries on 408/409/425/429/5xx, timeouts, connection errors
and malformed replies, with exponential backoff and jitter, waiting at least what ``Retry-After``
(or ``retry-after-ms``) asks. Other 4xx replies fail at once. When a request fails for good, no new
request starts, and :class:`BackendError` (an :class:`InputError`: one line, exit 2) is raised with
``results`` holding every result that did finish. The API key is never logged, stored in results,
shown in ``repr`` or part of :meth:`OpenAIReranker.cache_identity`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import InputError
from ..records import RerankRequest, RerankResult
from .base import register
from .parsing import parse_ranking
from .prompts import (
    ApproxTokenCounter,
    Prompt,
    PromptBuilder,
    answer_tokens_for,
    flat_chat_text,
)

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
#: Status codes worth another try (plus every 5xx).
RETRY_STATUS = frozenset({408, 409, 425, 429})
#: Tokens a chat endpoint adds around the messages that the flat text does not show.
CHAT_OVERHEAD_TOKENS = 12
#: Longest wait a Retry-After header can impose (seconds).
MAX_RETRY_AFTER = 300.0


class BackendError(InputError):
    """A backend request failed for good; ``results`` keeps what finished (``None`` elsewhere)."""

    def __init__(self, message: str, results: list[RerankResult | None] | None = None):
        super().__init__(message)
        self.results = results or []


class _Retryable(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def _opt(options: dict[str, Any], key: str, default: Any) -> Any:
    value = options.get(key)
    return default if value is None else value


def normalize_base_url(base_url: str | None) -> str:
    """``base_url`` without a trailing slash; a bare ``http://host:port`` gets ``/v1``."""
    url = (base_url or DEFAULT_BASE_URL).strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"--base-url must be an http(s) URL like http://127.0.0.1:8000/v1, got {base_url!r}")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    elif parts.path in ("", "/"):
        url = urlunsplit((parts.scheme, parts.netloc, "/v1", "", ""))
    return url


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


@dataclass(frozen=True)
class _Reply:
    content: str
    input_tokens: int
    output_tokens: int
    latency: float
    attempts: int


class OpenAIReranker:
    """Listwise reranking through an OpenAI-compatible chat completions endpoint."""

    needs_texts = True

    def __init__(self, model: str, options: dict[str, Any] | None = None):
        options = dict(options or {})
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = normalize_base_url(options.get("base_url"))
        self.endpoint = f"{self.base_url}/chat/completions"
        self.shown_endpoint = _without_userinfo(self.endpoint)  # for messages
        self.is_openai = urlsplit(self.base_url).hostname == urlsplit(DEFAULT_BASE_URL).hostname
        key = os.environ.get(API_KEY_ENV) or None
        if self.is_openai and not key:
            raise InputError(f"--reranker openai:{model} talks to {self.base_url}: set {API_KEY_ENV} (or give --base-url of a local server)")
        self.__key = key  # name-mangled; never printed, logged or hashed

        fmt = options.get("prompt_format")
        if fmt not in (None, "", "chat"):
            raise InputError(f"openai: sends chat messages (the server applies its template); --prompt {fmt} is for hf: models")
        self.m = int(_opt(options, "m", 20))
        self.counter = ApproxTokenCounter()
        self.max_tokens = int(_opt(options, "max_new_tokens", 0)) or answer_tokens_for(self.m, self.counter)
        self.context_size = int(_opt(options, "context_size", 4096))
        self.temperature = float(_opt(options, "temperature", 0.0))
        self.concurrency = max(1, int(_opt(options, "concurrency", 8)))
        self.timeout = float(_opt(options, "timeout", 120.0))
        self.retries = max(0, int(_opt(options, "retries", 6)))
        self.retry_base = float(_opt(options, "retry_base", 0.5))
        self.retry_cap = float(_opt(options, "retry_cap", 30.0))
        self.builder = PromptBuilder(flat_chat_text, self.counter, self.context_size, self.max_tokens, CHAT_OVERHEAD_TOKENS)
        self._prompts: OrderedDict = OrderedDict()
        self.stats: Counter = Counter()  # requests, attempts, retries, failures

    def __repr__(self) -> str:
        return f"OpenAIReranker(model={self.model!r}, base_url={_without_userinfo(self.base_url)!r}, concurrency={self.concurrency})"

    # -- the call cache's hooks ---------------------------------------------------------------

    def cache_identity(self) -> dict[str, Any]:
        """Model, endpoint and generation settings (never the API key)."""
        return {
            "backend": "openai",
            "model": self.model,
            "base_url": _without_userinfo(self.base_url),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "prompt_format": "chat",
            "context_size": self.context_size,
            "token_counter": self.counter.name,
        }

    def prompt_key(self, request: RerankRequest) -> str:
        """The chat messages sent for ``request``, as canonical JSON."""
        return json.dumps(self.prompt(request).messages, ensure_ascii=False, separators=(",", ":"))

    def prompt(self, request: RerankRequest) -> Prompt:
        """The (memoised) prompt for a request, sized to ``context_size``."""
        if len(request.texts) != len(request.docids):
            raise InputError(f"openai: request for query {request.qid!r} has {len(request.texts)} texts for {len(request.docids)} docids")
        key = (request.query, request.texts)
        if key in self._prompts:
            self._prompts.move_to_end(key)
            return self._prompts[key]
        prompt = self.builder.build(request.query, request.texts)
        self._prompts[key] = prompt
        if len(self._prompts) > 4096:
            self._prompts.popitem(last=False)
        return prompt

    def payload(self, prompt: Prompt) -> dict[str, Any]:
        """The JSON body of one chat completion request."""
        limit_key = "max_completion_tokens" if self.is_openai else "max_tokens"
        return {
            "model": self.model,
            "messages": [dict(m) for m in prompt.messages],
            "temperature": self.temperature,
            limit_key: self.max_tokens,
            "n": 1,
            "stream": False,
        }

    # -- execution ----------------------------------------------------------------------------

    def rerank(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        """Send every request (``concurrency`` in flight) and parse the answers."""
        if not requests:
            return []
        prompts = [self.prompt(r) for r in requests]
        replies, error = self._run(prompts)
        results: list[RerankResult | None] = []
        for req, reply in zip(requests, replies):
            if reply is None:
                results.append(None)
                continue
            parsed = parse_ranking(reply.content, len(req.docids))
            results.append(
                RerankResult(
                    parsed.order, reply.input_tokens, reply.output_tokens, reply.latency,
                    parsed.status, False, reply.content, self.name,
                )
            )
        if error is not None:
            done = sum(r is not None for r in results)
            raise BackendError(f"{error} ({done} of {len(requests)} windows of this batch finished)", results)
        return results  # type: ignore[return-value]

    def _run(self, prompts: list[Prompt]) -> tuple[list[_Reply | None], str | None]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._gather(prompts))
        with ThreadPoolExecutor(1) as pool:  # called from inside an event loop: run on a thread
            return pool.submit(asyncio.run, self._gather(prompts)).result()

    async def _gather(self, prompts: list[Prompt]) -> tuple[list[_Reply | None], str | None]:
        import httpx

        replies: list[_Reply | None] = [None] * len(prompts)
        failures: list[str] = []
        stop = asyncio.Event()
        gate = asyncio.Semaphore(self.concurrency)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), limits=limits, headers=headers) as client:

            async def one(i: int) -> None:
                async with gate:
                    if stop.is_set():
                        return
                    try:
                        replies[i] = await self._call(client, prompts[i], stop)
                    except BackendError as exc:
                        failures.append(exc.message)
                        stop.set()

            await asyncio.gather(*(one(i) for i in range(len(prompts))))
        return replies, (failures[0] if failures else None)

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Wait before retry ``attempt`` (0-based): ``base * 2^attempt`` capped, with jitter, >= Retry-After."""
        ceiling = min(self.retry_cap, self.retry_base * (2**attempt))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
        return delay

    async def _call(self, client: Any, prompt: Prompt, stop: asyncio.Event) -> _Reply:
        import httpx

        body = self.payload(prompt)
        started = time.perf_counter()
        self.stats["requests"] += 1
        for attempt in range(self.retries + 1):
            self.stats["attempts"] += 1
            try:
                try:
                    resp = await client.post(self.endpoint, json=body)
                except httpx.TimeoutException:
                    raise _Retryable(f"timed out after {self.timeout:g} s") from None
                except httpx.TransportError as exc:
                    raise _Retryable(f"connection error ({type(exc).__name__})") from None
                code = resp.status_code
                if code == 200:
                    return self._reply(resp, prompt, started, attempt + 1)
                if code in RETRY_STATUS or code >= 500:
                    raise _Retryable(f"HTTP {code}", parse_retry_after(resp.headers))
                self.stats["failures"] += 1
                raise BackendError(f"openai: {self.shown_endpoint} answered HTTP {code}: {_error_detail(resp)}")
            except _Retryable as why:
                if attempt == self.retries:
                    self.stats["failures"] += 1
                    raise BackendError(
                        f"openai: {self.shown_endpoint} failed after {attempt + 1} attempts (last: {why.reason})"
                    ) from None
                delay = self.backoff(attempt, why.retry_after)
                self.stats["retries"] += 1
                log.debug("openai: %s; retry %d in %.2f s", why.reason, attempt + 1, delay)
                try:  # sleep, but stop early if another request has failed for good
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except TimeoutError:
                    continue
                raise BackendError("openai: abandoned after another request failed") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _reply(self, resp: Any, prompt: Prompt, started: float, attempts: int) -> _Reply:
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
        return _Reply(
            content,
            int(n_in) if isinstance(n_in, int) else prompt.tokens,
            int(n_out) if isinstance(n_out, int) else self.counter.count(content),
            time.perf_counter() - started,
            attempts,
        )


@register("openai", takes_arg=True, help="OpenAI-compatible chat endpoint: openai:MODEL (--base-url for vLLM/SGLang)")
def _factory(arg: str, options: dict[str, Any]) -> OpenAIReranker:
    return OpenAIReranker(arg, options)


__all__ = ["DEFAULT_BASE_URL", "BackendError", "OpenAIReranker", "normalize_base_url", "parse_retry_after"]
