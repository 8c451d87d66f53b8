"""One rerank exchange, the same for ``POST /v1/rerank`` and ``/v2/rerank`` and for the MCP ``rerank`` tool (over
``acurank serve``'s ``/mcp`` and ``acurank mcp``'s stdio): the request parsed, admitted, waited for (withdrawn when
its caller is gone or its time is up), answered in the endpoint's shape, and counted in ``/metrics``. Each entrance
only reads its body and writes the answer or the refusal in its own form (JSON with a status; a tool error)."""

from __future__ import annotations

import asyncio
import sys
import time
from contextvars import ContextVar
from typing import Any, Awaitable, Callable

from .. import redaction
from .protocol import BadRequest, parse, response
from .service import BackendFailed, RerankService, Ticket

#: how often a waiting request looks whether its caller is still there and its time is up
POLL_SECONDS = 0.1


def _stderr(line: str) -> None:
    print(redaction.text(line), file=sys.stderr)


#: whether the caller of the request being handled has left, for an entrance that cannot hand it to
#: :func:`exchange` itself (an MCP tool call over HTTP: the transport's request is set here by the route that guards
#: ``/mcp``, and its tool's exchange reads it); None: no caller that can leave is known (MCP over stdio)
CALLER_GONE: ContextVar[Callable[[], Awaitable[bool]] | None] = ContextVar("acurank_caller_gone", default=None)


async def exchange(service: RerankService, model: str, body: Callable[[], Awaitable[bytes]], api: str, endpoint: str,
                   *, gone: Callable[[], Awaitable[bool]] | None = None,
                   log: Callable[[str], None] = _stderr) -> dict[str, Any]:
    """The answer to one rerank request (``body``: reads it, its caller's key checked; ``api``: "v1" or "v2"), or
    :class:`BadRequest` (its status and field); ``gone``: whether the caller has left (HTTP's disconnect; None: the
    one :data:`CALLER_GONE` holds, if any); ``log``: where a backend's failure is written whole (the caller gets one line and the request's id).
    Every outcome is counted under ``endpoint``: its status, and the seconds of an answered one."""
    metrics, status, started = service.metrics, "200", time.perf_counter()
    gone = gone or CALLER_GONE.get()  # an MCP call over HTTP: its client leaving withdraws it, as a REST request's
    try:
        call = parse(await body(), api, service.limits)
        ticket = await asyncio.to_thread(service.submit, call)
        try:
            outcome = await wait(service, ticket, gone)
        except BackendFailed as exc:
            log(f"serve: request {call.id}: the reranker failed: {exc}")
            raise BadRequest(f"the reranker failed (request {call.id}; the server's log says why)", None, 502) from None
        order, scores, usage, passages = service.answer(ticket, outcome)
        return response(call, order, scores, usage, model, passages, warned=ticket.admitted.warnings)
    except BadRequest as exc:
        status = str(exc.status)
        raise
    except asyncio.CancelledError:  # a forced stop cut the request off
        status = "503"
        metrics.cut_off.inc()
        raise
    except Exception:
        status = "500"
        raise
    finally:
        metrics.requests.labels(endpoint, status).inc()
        if status == "200":
            metrics.latency.labels(endpoint).observe(time.perf_counter() - started)


async def wait(service: RerankService, ticket: Ticket, gone: Callable[[], Awaitable[bool]] | None = None):
    """The request's outcome; its caller gone (499) or its time up (504): withdrawn, its windows not sent."""
    pending = asyncio.wrap_future(ticket.future)
    deadline = time.monotonic() + service.limits.timeout
    try:
        while True:
            done, _ = await asyncio.wait({pending}, timeout=POLL_SECONDS)
            if done:
                return pending.result()
            if gone is not None and await gone():
                service.withdraw(ticket)
                raise BadRequest("the client disconnected", None, 499)
            if time.monotonic() > deadline:
                service.withdraw(ticket)
                raise BadRequest(f"the request took more than this server's limit of {service.limits.timeout:g} s",
                                 None, 504)
    except asyncio.CancelledError:
        service.withdraw(ticket)
        raise


__all__ = ["exchange", "wait"]
