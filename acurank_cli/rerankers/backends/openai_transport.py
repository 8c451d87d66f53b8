"""The requests of ``openai:``: one POST per prompt to an OpenAI-compatible endpoint, routed among replicas.

Each request goes to the endpoint with the fewest requests in flight (at most ``concurrency`` each); an
endpoint that fails (connection refused or reset, timeout, 408/409/425/429/5xx, a malformed reply) is set
aside for a while (``set_aside`` seconds, doubling while it keeps failing) and the request is retried at once
on another endpoint. Each request has a ``timeout`` and up to ``retries`` retries, with exponential backoff and
jitter when no other endpoint can take it, waiting at least what ``Retry-After`` (or ``retry-after-ms``) asks.
When every endpoint refuses connections the batch fails at once (no server is listening). Other 4xx replies fail
at once. When a request fails for good no new request starts and :class:`BackendError` is raised; the replies
that finished were already delivered. What a request carries and what a reply means is the backend's
(:mod:`.openai_backend`); the API key is held here, never printed, logged or hashed.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ... import redaction
from ...errors import InputError, OptionError

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Status codes worth another try (plus every 5xx).
RETRY_STATUS = frozenset({408, 409, 425, 429})
#: Longest wait a Retry-After header can impose (seconds).
MAX_RETRY_AFTER = 300.0


class BackendError(InputError):
    """A backend request failed for good (what finished was already delivered)."""


class Retryable(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None, refused: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.refused = refused


def normalize_base_url(base_url: str | None) -> str:
    """``base_url`` without a trailing slash; a bare ``http://host:port`` gets ``/v1``; a query string (a
    gateway's key) is kept and follows the path (:func:`endpoint_url`)."""
    parts = urlsplit((base_url or DEFAULT_BASE_URL).strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OptionError("{base_url}: must be an http(s) URL like http://127.0.0.1:8000/v1",
                          base_url=("--base-url", redaction.url(str(base_url))))
    path = parts.path.rstrip("/")
    if path.endswith("/chat/completions"):
        path = path[: -len("/chat/completions")]
    elif not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def endpoint_url(base_url: str, route: str = "/chat/completions") -> str:
    """The URL of ``route`` under ``base_url``, its query string kept after the path."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path + route, parts.query, ""))


def base_urls(given: str | Sequence[str] | None) -> tuple[str, ...]:
    """The endpoints named by ``base_url`` (one URL, or several: repeated ``--base-url`` / a list),
    normalised, duplicates dropped, in the order given; none: OpenAI's."""
    items = [given] if given is None or isinstance(given, str) else list(given)
    urls = [normalize_base_url(u) for u in items] or [normalize_base_url(None)]
    return tuple(dict.fromkeys(urls))


#: the environment variables httpx reads a proxy from (its ``trust_env``); a proxy may be reached over TLS
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def tls_needed(urls: Sequence[str]) -> bool:
    """Whether a client for ``urls`` may open a TLS connection: an https endpoint, or a proxy from the environment.
    Where none can, the client is made without a certificate store (``verify=False``, which applies to TLS alone):
    loading one costs 40 ms a client on this project's 2-core machine, before the first request of a run against
    a plain-http server (BENCHMARKS.md 21). httpx follows no redirect unless told, so no https URL is reached."""
    if any(urlsplit(u).scheme != "http" for u in urls):
        return True
    return any(os.environ.get(name) or os.environ.get(name.lower()) for name in PROXY_VARIABLES)


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


def error_detail(resp: Any) -> str:
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


#: Parses a 200 reply: (response, index of the prompt, seconds since the request started, endpoint shown) ->
#: what the backend delivers; raises :class:`Retryable` for a malformed reply.
ParseReply = Callable[[Any, int, float, str], Any]

#: Asked about a refused request (HTTP 400 or 422): (the body sent, the reply) -> the body to send instead (a
#: parameter the model does not take left out or renamed), or None: the refusal stands.
Revise = Callable[[dict, Any], "dict | None"]

#: Revised bodies one request may send (each leaves out or renames one more parameter).
MAX_REVISIONS = 4


class Transport:
    """Sends a batch of request bodies asynchronously and delivers each parsed reply as it arrives."""

    def __init__(self, urls: Sequence[str], key: str | None, *, concurrency: int, timeout: float, retries: int,
                 retry_base: float, retry_cap: float, set_aside: float):
        self.base_urls = tuple(urls)
        self.__key = key  # name-mangled; never printed, logged or hashed
        self.concurrency, self.timeout, self.retries = concurrency, timeout, retries
        self.retry_base, self.retry_cap, self.set_aside = retry_base, retry_cap, set_aside
        self.stats: Counter = Counter()  # requests, attempts, retries, failures
        self._pool: EndpointPool | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._revise: Revise | None = None

    def send(self, bodies: Sequence[dict], parse: ParseReply, deliver: Callable[[int, Any], None],
             revise: Revise | None = None) -> None:
        """POST every body (``concurrency`` in flight per endpoint); each parsed reply is delivered as it arrives.
        ``revise``: asked about a 400/422 reply; a revised body is sent again at once (a parameter the model refuses,
        :data:`Revise`)."""
        self._revise = revise
        error = self._run(list(bodies), parse, deliver)
        if error is not None:
            raise BackendError(error)

    def _run(self, bodies: list[dict], parse: ParseReply, deliver) -> str | None:
        """The batch on this transport's own event loop (one thread, one HTTP client and one endpoint pool for
        every caller: the scheduler's lanes send windows from several threads at once, each waiting for its own).
        An interruption of the waiting caller (SIGINT, SIGTERM) cancels its batch there; the loop lives on."""
        future = asyncio.run_coroutine_threadsafe(self._gather(bodies, parse, deliver), self._loop())
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._event_loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._event_loop.run_forever, daemon=True,
                                                name="acurank-http")
                self._thread.start()
            return self._event_loop

    def close(self) -> None:
        """Stop the event loop (its client closed, unfinished batches cancelled); sending again starts a new one."""
        with self._lock:
            thread, loop, self._thread = self._thread, self._event_loop, None
        if thread is None:
            return

        async def shut() -> None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            if self._client is not None:
                client, self._client = self._client, None
                await client.aclose()

        try:
            asyncio.run_coroutine_threadsafe(shut(), loop).result(timeout=10)
        except BaseException:  # noqa: BLE001 - closing: nothing left to save
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()

    def _http(self) -> Any:
        """The one HTTP client (created on the loop, kept across batches: connections are reused)."""
        import httpx

        if self._client is None:
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if self.__key:
                headers["Authorization"] = f"Bearer {self.__key}"
            total = self.concurrency * len(self.base_urls)
            limits = httpx.Limits(max_connections=total, max_keepalive_connections=total)
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), limits=limits, headers=headers,
                                             verify=tls_needed(self.base_urls))
        return self._client

    async def _gather(self, bodies: list[dict], parse: ParseReply, deliver) -> str | None:
        failures: list[str] = []
        finished = 0
        stop = asyncio.Event()
        pool = self.pool()
        client = self._http()

        async def one(i: int) -> None:
            if stop.is_set():
                return
            try:
                reply = await self._call(client, pool, bodies[i], lambda resp, started, shown: parse(resp, i, started, shown), stop)
            except BackendError as exc:
                failures.append(exc.message)
                stop.set()
                pool.wake()
                return
            nonlocal finished
            finished += 1
            deliver(i, reply)

        await asyncio.gather(*(one(i) for i in range(len(bodies))))
        if failures:
            return f"{failures[0]} ({finished} of {len(bodies)} windows of this batch finished)"
        return None

    def _revised(self, body: dict, resp: Any, code: int, revisions: int) -> dict | None:
        if self._revise is None or code not in (400, 422) or revisions >= MAX_REVISIONS:
            return None
        revised = self._revise(body, resp)
        if revised is None or revised == body:
            return None
        self.stats["revised"] += 1
        return revised

    def pool(self) -> "EndpointPool":
        """The endpoints' shared state (in flight, set aside) for one batch; kept across batches."""
        if self._pool is None:
            self._pool = EndpointPool(self.base_urls, self.concurrency, self.set_aside)
        return self._pool

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Wait before retry ``attempt`` (0-based): ``base * 2^attempt`` capped, with jitter, >= Retry-After."""
        ceiling = min(self.retry_cap, self.retry_base * (2**attempt))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
        return delay

    async def _call(self, client: Any, pool: "EndpointPool", body: dict, parse, stop: asyncio.Event) -> Any:
        """One request until it is answered: each attempt on the least busy endpoint; a retryable failure retried
        (:meth:`_retry`), a parameter the model refuses sent again without it, any other reply an error."""
        started = time.perf_counter()
        self.stats["requests"] += 1
        revisions = 0
        attempt = -1
        while attempt < self.retries:
            attempt += 1
            ep = await pool.acquire(stop)
            if ep is None:
                raise BackendError("openai: abandoned after another request failed") from None
            self.stats["attempts"] += 1
            try:
                try:
                    resp = await self._post(client, ep, body)
                    code = resp.status_code
                    if code == 200:
                        reply = parse(resp, started, ep.shown)
                        pool.succeeded(ep)
                        return reply
                    if code in RETRY_STATUS or code >= 500:
                        raise Retryable(f"HTTP {code}", parse_retry_after(resp.headers))
                    revised = self._revised(body, resp, code, revisions)
                    if revised is not None:  # a parameter the model refuses: sent again without it, at once
                        body, revisions = revised, revisions + 1
                        attempt -= 1
                        continue
                    self.stats["failures"] += 1
                    raise BackendError(f"openai: {ep.shown} answered HTTP {code}: {error_detail(resp)}")
                finally:
                    pool.release(ep)
            except Retryable as why:
                await self._retry(pool, ep, why, attempt, stop)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _post(self, client: Any, ep: "Endpoint", body: dict) -> Any:
        """One POST to ``ep``; a timeout or a connection failure raised as :class:`Retryable`."""
        import httpx

        try:
            return await client.post(ep.endpoint, json=body)
        except httpx.TimeoutException:
            raise Retryable(f"timed out after {self.timeout:g} s") from None
        except httpx.ConnectError:
            raise Retryable("connection refused", refused=True) from None
        except httpx.TransportError as exc:
            raise Retryable(f"connection error ({type(exc).__name__})") from None

    async def _retry(self, pool: "EndpointPool", ep: "Endpoint", why: Retryable, attempt: int,
                     stop: asyncio.Event) -> None:
        """After attempt ``attempt`` failed retryably on ``ep``: return when the request may be tried again (at once
        when another endpoint is healthy, else after the backoff); raise when it may not (every endpoint refuses
        connections, the retries are spent, or another request failed for good)."""
        pool.failed(ep, why.refused)
        if why.refused and pool.all_refusing():
            self.stats["failures"] += 1
            raise BackendError(f"openai: cannot connect to {pool.describe()} (connection refused): "
                               "is the server running?") from None
        if attempt == self.retries:
            self.stats["failures"] += 1
            raise BackendError(f"openai: {ep.shown} failed after {attempt + 1} attempts (last: {why.reason})") from None
        self.stats["retries"] += 1
        if pool.healthy_other(besides=ep) and why.retry_after is None:
            log.debug("openai: %s at %s; retrying on another endpoint", why.reason, ep.shown)
            return  # another endpoint is healthy: queue for it now, no backoff
        delay = self.backoff(attempt, why.retry_after)
        log.debug("openai: %s; retry %d in %.2f s", why.reason, attempt + 1, delay)
        try:  # sleep, but stop early if another request has failed for good
            async with asyncio.timeout(delay):
                await stop.wait()
        except TimeoutError:
            return
        raise BackendError("openai: abandoned after another request failed") from None


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
        self.endpoints = [Endpoint(u, endpoint_url(u), redaction.url(u)) for u in urls]
        self.per_endpoint = per_endpoint
        self.set_aside = set_aside
        #: set when a slot is freed or an endpoint fails, then replaced: waiters look again (one per event loop)
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _signal(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed, self._loop = asyncio.Event(), loop
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
        while not stop.is_set():
            now = time.monotonic()
            ready = self._ready(now)
            if ready:
                ep = min(ready, key=lambda e: (e.in_flight, e.served))
                ep.in_flight += 1
                return ep
            # wait for a release, or for the first set-aside endpoint to come back (no await since the look: a
            # wake after it sets the event this waits on)
            changed = self._signal()
            back = [e.aside_until - now for e in self.endpoints if e.aside_until > now]
            try:
                async with asyncio.timeout(min(back) if back else 1.0):
                    await changed.wait()
            except TimeoutError:
                pass
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
        """Let waiting requests look again (a slot was freed, an endpoint failed, the batch stopped): the event they
        wait on is set and a fresh one made, at once, in the loop's own thread (no task is made that a closing loop
        could leave pending)."""
        changed = self._changed
        try:
            if changed is None or asyncio.get_running_loop() is not self._loop:
                return
        except RuntimeError:  # not in the loop's thread: its waiters look again at their timeout
            return
        self._changed = None
        changed.set()


__all__ = ["BackendError", "EndpointPool", "Retryable", "Transport", "base_urls", "normalize_base_url", "parse_retry_after"]
