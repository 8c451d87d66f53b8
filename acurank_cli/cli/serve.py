"""``acurank serve``: listwise reranking over HTTP in the shapes Cohere's and Jina's clients speak.

The flags are the server's (below) and, as for ``rerank``, every method family's and backend's options. Every
flag is checked and the port bound before the backend is built; the backend is built once, then the server
answers until SIGINT or SIGTERM, when it takes no new request, answers the ones it holds, and exits 0.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import signal
import socket
from typing import Annotated, Any, Callable, Optional

import typer

from .. import redaction
from ..errors import InputError, Stopped
from ..run.pipeline import DEFAULTS
from ..serve.limits import DEFAULT_LIMITS as LIMITS, Limits
from .flags import (ServedAllowMapMismatch, ServedCalibration, SERVER, Cache, MaxPassages, NoCache, PanelledCommand, PassageScore, PassagesFlag, RayActors,
                    RayAddress, RayGpus, ReadDirs, Reranker, cache_choice, method_option, say, with_generated_flags)

#: where bearer keys come from when no --api-key is given (comma-separated)
KEYS_ENV = "ACURANK_API_KEYS"


def serve(
    ctx: typer.Context,
    *,
    method: method_option(f"Default method of the requests (a request may name another in its 'method' field; default {DEFAULTS.method}): {{methods}}.") = None,
    reranker: Reranker = DEFAULTS.backend,
    host: Annotated[str, typer.Option("--host", rich_help_panel=SERVER, help="Address to listen on (default loopback only; another address should come with --api-key).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", rich_help_panel=SERVER, min=0, max=65535, help="Port (0: any free one, said on stderr).")] = 8000,
    api_key: Annotated[Optional[list[str]], typer.Option("--api-key", rich_help_panel=SERVER, help=f"A bearer key the server takes (repeat for several; default ${KEYS_ENV}, comma-separated; none: no authentication).")] = None,
    cache: Cache = None,
    no_cache: NoCache = False,
    max_documents: Annotated[int, typer.Option("--max-documents", rich_help_panel=SERVER, min=1, help="Documents a request may hold.")] = LIMITS.max_documents,
    max_request_bytes: Annotated[int, typer.Option("--max-request-bytes", rich_help_panel=SERVER, min=1, help="Bytes a request's body may hold.")] = LIMITS.max_request_bytes,
    max_tokens_per_doc: Annotated[int, typer.Option("--max-tokens-per-doc", rich_help_panel=SERVER, min=1, help="Documents are cut to this many whitespace-separated tokens (a request's max_tokens_per_doc may ask for fewer).")] = LIMITS.max_tokens_per_doc,
    max_in_flight: Annotated[int, typer.Option("--max-in-flight", rich_help_panel=SERVER, min=1, help="Requests reranked at once (their windows share the backend's batches and slots).")] = LIMITS.max_in_flight,
    max_queued: Annotated[int, typer.Option("--max-queued", rich_help_panel=SERVER, min=0, help="Requests that may wait beyond those in flight; more are answered 429 with Retry-After.")] = LIMITS.max_queued,
    request_timeout: Annotated[float, typer.Option("--request-timeout", rich_help_panel=SERVER, min=0.001, help="Seconds a request may take (then 504, its windows withdrawn).")] = LIMITS.timeout,
    read_dir: ReadDirs = None,
    max_calls: Annotated[int, typer.Option("--max-calls", rich_help_panel=SERVER, min=1, help="Reranker calls one request may make (then 422, its windows withdrawn): a method such as sw-99999 would otherwise ask for any number.")] = LIMITS.max_calls,
    passages: PassagesFlag = None,
    passage_score: PassageScore = None,
    max_passages: MaxPassages = None,
    calibration: ServedCalibration = None,
    allow_map_mismatch: ServedAllowMapMismatch = False,
    ray: RayAddress = None,
    actors: RayActors = None,
    gpus_per_actor: RayGpus = None,
    **generated,
) -> None:
    """Serve reranking over HTTP: POST /v1/rerank and /v2/rerank (Cohere's and Jina's shapes), GET /health, /v1/models, /metrics."""
    from ..run.ray_executor import ray_options

    cache = cache_choice(cache, no_cache)
    import uvicorn  # noqa: F401 - a missing one: app.main names the extra (serve), before anything is built

    from ..serve.routes import create_app
    from ..serve.service import start_service

    keys = _keys(api_key)
    limits = Limits(max_documents=max_documents, max_request_bytes=max_request_bytes,
                    max_tokens_per_doc=max_tokens_per_doc, max_in_flight=max_in_flight, max_queued=max_queued,
                    timeout=request_timeout, max_calls=max_calls)
    service, sock = _bound(host, port, keys, lambda bind: start_service(
        reranker, method, generated, limits, cache, calibration=calibration, allow_map_mismatch=allow_map_mismatch,
        passages=(passages, passage_score, max_passages), ray=ray_options(ray, actors, gpus_per_actor, flags=True),
        before_load=bind))
    methods = service.methods
    tools = mcp_tools(service, reranker, read_dir)
    app = create_app(service, reranker, keys, on_shutdown=lambda: service.close(limits.timeout), log=say, mcp=tools,
                     host=host)
    say(f"serving {methods.strategy.name} with {reranker} on http://{_shown(host)}:{sock.getsockname()[1]} "
        f"(POST /v1/rerank, /v2/rerank; GET /health, /v1/models, /metrics; "
        f"{'MCP at /mcp; ' if tools is not None else ''}"
        f"{'bearer keys: ' + str(len(keys)) if keys else 'no authentication'}; "
        f"{limits.max_in_flight} in flight, {limits.max_queued} queued)")
    _run(app, sock, service, limits.timeout)


def _bound(host: str, port: int, keys: list[str], start: Callable[[Callable[[], None]], Any]) -> tuple[Any, Any]:
    """The service ``start(bind)`` makes, and the socket ``bind`` opened: after every check, before the backend
    loads, so that a busy port costs no load (the socket closed again where the start fails)."""
    bound = []

    def bind() -> None:
        bound.append(_bind(host, port))
        if not keys and not _loopback(host):
            say(f"warning: serving on {host} without --api-key: anyone who reaches it can spend your calls")

    try:
        service = start(bind)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return service, bound[0]


def mcp_tools(service, model: str, read_dir: list[str] | None):
    """The MCP tools over ``service`` (:func:`~acurank_cli.serve.mcp_tools.build_mcp`), or None where the ``mcp`` SDK
    is not installed (``pip install 'acurank[mcp]'``)."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        return None
    from ..serve.mcp_tools import build_mcp

    return build_mcp(service, model, read_dir or ())


def _keys(api_key: list[str] | None) -> list[str]:
    """The bearer keys: --api-key, else $ACURANK_API_KEYS (comma-separated, spaces around a key dropped)."""
    source = "--api-key" if api_key else f"${KEYS_ENV}"
    keys = [k.strip() for k in (api_key or os.environ.get(KEYS_ENV, "").split(",")) if k.strip()]
    if any(len(k) < 8 for k in keys):
        raise InputError(f"{source}: a key must have at least 8 characters")
    return keys


def _run(app, sock: socket.socket, service, timeout: float) -> None:
    """Serve until a signal: the first drains (every request held is answered), a second stops at once (the
    requests cut off answered 503, exit 128 + the signal)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=int(timeout) + 5)

    class Server(uvicorn.Server):
        """uvicorn's server, but any second signal stops at once (uvicorn forces only on a repeated SIGINT; docs/serve.md
        promises a second SIGTERM does too); the first notes what the drain starts from."""

        at_signal: dict[str, int] | None = None
        held = 0
        signals: list[int] = []

        def handle_exit(self, sig, frame) -> None:
            self.signals = [*self.signals, sig]
            if self.should_exit:
                self._captured_signals.append(sig)
                self.force_exit = True
                return
            self.at_signal, self.held = service.metrics.by_status(), service.open
            super().handle_exit(sig, frame)

    server = Server(config)
    for name in ("uvicorn.error", "uvicorn.access", "uvicorn"):  # after the config set uvicorn's logging up
        logging.getLogger(name).addFilter(_Redacted())
    logging.getLogger("uvicorn.error").addFilter(_NotCancelled())
    received: list[int] = []
    # uvicorn takes SIGINT/SIGTERM while it serves (the first drains, a second forces) and hands each back to the
    # handler it found when it stops: recorded here, not raised into the requests still being cut off
    previous = {sig: signal.signal(sig, lambda signum, _frame: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        if not service.draining:  # the server did not reach its shutdown (it failed to start)
            service.close(timeout)
    got = server.signals or received  # in the order they came (uvicorn hands them back last first)
    name = signal.Signals(got[0]).name if got else None
    ended = _since(server.at_signal, service.metrics.by_status())
    if server.force_exit:
        last = signal.Signals(got[-1]).name if got else "signal"
        say(f"serve: stopped at once on a second {last}: of the {server.held} requests held at the first, "
            f"{_told({k: n for k, n in ended.items() if k != '503'})}; {service.metrics.total(service.metrics.cut_off)} in flight were cut off (answered 503)")
        raise Stopped(128 + (got[-1] if got else signal.SIGINT))
    if name is None:
        say("serve: stopped")
    elif server.held and ended.get("200", 0) == sum(ended.values()) == server.held:
        say(f"serve: stopped on {name}; every request it held ({server.held}) was answered")
    elif not server.held:
        say(f"serve: stopped on {name}; no request was in flight")
    else:
        say(f"serve: stopped on {name}; of the {server.held} requests it held, {_told(ended)}")


def _since(before: dict[str, int] | None, now: dict[str, int]) -> dict[str, int]:
    """The rerank answers by status between the first signal and now."""
    before = before or {}
    return {k: v - before.get(k, 0) for k, v in now.items() if v - before.get(k, 0)}


def _told(ended: dict[str, int]) -> str:
    """``3 answered, 1 timed out (504), 1 failed (502)``: the drain's requests by how they ended."""
    words = {"200": "answered", "504": "timed out (504)", "502": "failed (502)", "499": "left by their client",
             "503": "cut off (503)"}
    parts = [f"{ended.get('200', 0)} answered"]
    parts += [f"{n} {words.get(k, 'answered ' + k)}" for k, n in sorted(ended.items()) if k != "200"]
    return ", ".join(parts)


class _Redacted(logging.Filter):
    """uvicorn's log lines (a request line may carry a key in its query string) redacted as every other line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redaction.text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class _NotCancelled(logging.Filter):
    """A forced stop cancels what is still running (the app's lifespan, requests): that is the stop, said in one line
    by the command, not a traceback of each cancelled task."""

    def filter(self, record: logging.LogRecord) -> bool:
        import asyncio  # not at the CLI's start: a served process has it already

        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            return False
        text = record.getMessage().rstrip()  # the lifespan's failure arrives as a formatted traceback
        return not (text.startswith("Traceback") and text.endswith("CancelledError"))


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the backend is built (a port in use is one line, not a model loaded
    for nothing)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise InputError(f"--port {port}: cannot listen on {host}:{port} ({reason})") from None
    sock.set_inheritable(True)
    return sock


def mount(app: typer.Typer) -> None:
    app.command("serve", cls=PanelledCommand, help="Serve reranking over HTTP in Cohere's and Jina's shapes (/v1/rerank, /v2/rerank).")(
        with_generated_flags(serve))
