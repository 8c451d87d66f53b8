"""The HTTP face of :class:`~.service.RerankService` (FastAPI, served by uvicorn).

``POST /v1/rerank`` (Cohere v1 and Jina), ``POST /v2/rerank`` (Cohere v2); ``GET /health``, ``GET /v1/models``,
``GET /metrics``; ``/mcp``, the same service as MCP tools over streamable HTTP (:mod:`.mcp_tools`, where the ``mcp``
SDK is installed), behind the same keys. Every refusal is a JSON ``{"message", "field"}`` with a 4xx status; a backend that fails is a
502, a request past its time a 504; nothing is ever answered with a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import sys
from contextlib import asynccontextmanager
from typing import Any, Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import redaction
from .exchange import CALLER_GONE, exchange
from .metrics import CONTENT_TYPE
from .protocol import BadRequest, fields_once, without_mark
from .service import RerankService

#: how long a request's body may take to arrive (then 408): a client that sends half a body and waits holds a
#: connection, and a stop, no longer than this
BODY_SECONDS = 30.0
#: the paths the server answers (acurank_requests_total counts any other as "other")
KNOWN_PATHS = frozenset({"/v1/rerank", "/v2/rerank", "/health", "/v1/models", "/metrics", "/mcp"})


def create_app(service: RerankService, model: str, keys: Sequence[str] = (), *, on_shutdown=None,
               log: Callable[[str], None] = lambda line: print(redaction.text(line), file=sys.stderr),
               mcp: Any = None, host: str = "127.0.0.1") -> FastAPI:
    """The app over ``service``; ``keys``: bearer keys (none: no authentication); ``model``: the name answered in
    ``/v1/models`` and Jina's ``model``; ``on_shutdown``: called when the server stops (after it has drained);
    ``log``: where the server's own lines go (one line each); ``mcp``: the MCP server answered at ``/mcp``
    (:func:`~.mcp_tools.build_mcp`; None: no ``/mcp``), ``host`` the address it is reached at."""
    routes = _Routes(service, model, [k.encode() for k in keys], log)
    mcp_route, sessions = _mcp_route(mcp, routes, host) if mcp is not None else (None, None)

    @asynccontextmanager
    async def lifespan(_app):
        if sessions is None:
            yield
        else:
            async with sessions.run():  # the MCP sessions live as long as the server
                yield
        service.draining = True
        if on_shutdown is not None:
            await asyncio.to_thread(on_shutdown)

    app = FastAPI(title="acurank", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    if mcp_route is not None:
        app.router.routes.append(mcp_route)

    @app.post("/v1/rerank")
    async def rerank_v1(request: Request) -> Response:
        return await routes.rerank(request, "v1")

    @app.post("/v2/rerank")
    async def rerank_v2(request: Request) -> Response:
        return await routes.rerank(request, "v2")

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health() -> Response:  # open: a load balancer's probe carries no key
        return routes.health()

    @app.get("/v1/models")
    async def models(request: Request) -> Response:
        return routes.guarded("/v1/models", request, routes.models)

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        return routes.guarded("/metrics", request, lambda: Response(service.metrics.text(), media_type=CONTENT_TYPE))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        """A path the server does not have (404) or a method a path does not take (405): answered as JSON and
        counted like every other answer (a path it does not know as ``other``: the label's values stay bounded)."""
        path = request.url.path
        service.metrics.requests.labels(path if path in KNOWN_PATHS else "other", str(exc.status_code)).inc()
        field = "path" if exc.status_code == 404 else ("method" if exc.status_code == 405 else None)
        body = {"message": str(exc.detail)}
        if field:
            body["field"] = field
        return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    return app


def _mcp_route(mcp: Any, routes: "_Routes", host: str) -> tuple[Any, Any]:
    """``/mcp``: the MCP SDK's streamable HTTP endpoint behind the server's keys (stateless: each call stands
    alone, as a rerank request does), and its session manager (run for the server's lifetime)."""
    from starlette.routing import Route

    inner = mcp.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                    max_request_body_size=routes.limits.max_request_bytes, host=host)
    endpoint = next(r.endpoint for r in inner.routes if getattr(r, "path", None) == "/mcp")
    return Route("/mcp", endpoint=_Guarded(endpoint, routes), methods=["GET", "POST", "DELETE"]), mcp.session_manager


class _Guarded:
    """An ASGI app behind the server's bearer keys: a request without one is refused (401, JSON) and counted."""

    def __init__(self, app: Any, routes: "_Routes"):
        self.app, self.routes = app, routes

    async def __call__(self, scope, receive, send) -> None:
        try:
            request = Request(scope, receive)
            self.routes.authorised(request)
            self.routes.within_limit(request)  # a body declared too large: the REST routes' JSON 413, not plain text
            if scope.get("method") == "POST":  # the message by the REST body's rules: a field given twice refused
                raw = without_mark(await self.routes.body_of(request))
                fields_once(raw)
                receive = _replaying(raw, receive)
        except BadRequest as exc:
            self.routes.service.metrics.requests.labels("/mcp", str(exc.status)).inc()
            await JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)(scope, receive, send)
            return
        token = CALLER_GONE.set(request.is_disconnected)  # a tool call's client that leaves withdraws it (exchange)
        try:
            await self.app(scope, receive, send)
        finally:
            CALLER_GONE.reset(token)


def _replaying(raw: bytes, receive: Callable) -> Callable:
    """An ASGI ``receive`` that gives ``raw`` as the whole body, then what ``receive`` gives (a disconnect)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


class _Routes:
    """What the routes do: keys checked, bodies read within their limits, requests submitted to the service and
    waited for (withdrawn when the caller leaves or the time is up), answers and refusals as JSON."""

    def __init__(self, service: RerankService, model: str, wanted: list[bytes], log: Callable[[str], None]):
        self.service, self.model, self.wanted, self.log = service, model, wanted, log
        self.limits = service.limits

    def authorised(self, request: Request) -> None:
        if not self.wanted:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        token_bytes = token.strip().encode()
        ok = False
        for key in self.wanted:  # every key compared, in constant time each: the time says nothing of which matched
            ok |= hmac.compare_digest(token_bytes, key)
        if scheme.lower() != "bearer" or not ok:
            raise BadRequest("a bearer key is required (Authorization: Bearer KEY)" if not given else
                             "the bearer key is not one this server takes", "Authorization", 401,
                             {"WWW-Authenticate": "Bearer"})

    def within_limit(self, request: Request) -> None:
        """A body whose declared length passes the limit is refused (413) before it is read."""
        limit = self.limits.max_request_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BadRequest(f"the body has {declared} bytes, more than this server's limit of {limit}", "body", 413)

    async def body_of(self, request: Request) -> bytes:
        """The body, read no further than the limit (413 past it)."""
        limit = self.limits.max_request_bytes
        self.within_limit(request)
        chunks, size = [], 0

        async def read() -> None:
            nonlocal size
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BadRequest(f"the body has more than this server's limit of {limit} bytes", "body", 413)
                chunks.append(chunk)

        try:
            await asyncio.wait_for(read(), BODY_SECONDS)
        except asyncio.TimeoutError:
            raise BadRequest(f"the body did not arrive within {BODY_SECONDS:g} s", "body", 408) from None
        return b"".join(chunks)

    async def rerank(self, request: Request, api: str) -> Response:
        """``/v1/rerank`` and ``/v2/rerank``: the exchange (:func:`~.exchange.exchange`, the MCP tool's too), or a
        refusal as JSON (never a traceback); a caller that disconnects withdraws its request."""
        async def body() -> bytes:
            self.authorised(request)
            return await self.body_of(request)

        try:
            return JSONResponse(await exchange(self.service, self.model, body, api, f"/{api}/rerank",
                                               gone=request.is_disconnected, log=self.log))
        except BadRequest as exc:
            return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
        except asyncio.CancelledError:  # a forced stop cuts the request off: said, not a traceback
            return JSONResponse({"message": "the server stopped before answering"}, status_code=503)
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            return JSONResponse({"message": redaction.text(f"internal error: {type(exc).__name__}: "
                                                           f"{' '.join(str(exc).split())}")},
                                status_code=500)

    def guarded(self, endpoint: str, request: Request, answer) -> Response:
        try:
            self.authorised(request)
        except BadRequest as exc:
            self.service.metrics.requests.labels(endpoint, str(exc.status)).inc()
            return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
        self.service.metrics.requests.labels(endpoint, "200").inc()
        return answer()

    def health(self) -> Response:
        service = self.service
        body = {"status": "draining" if service.draining else "ok", "model": self.model,
                "method": service.methods.name, "in_flight": service.open - service.queued, "queued": service.queued,
                "windows_out": service.windows_out}
        status = 503 if service.draining else 200
        service.metrics.requests.labels("/health", str(status)).inc()
        return JSONResponse(body, status_code=status)

    def models(self) -> Response:
        entry = {"id": self.model, "object": "model", "owned_by": "acurank", "method": self.service.methods.name,
                 "endpoints": ["rerank"]}
        return JSONResponse({"object": "list", "data": [entry], "models": [{"name": self.model, "endpoints": ["rerank"]}]})
