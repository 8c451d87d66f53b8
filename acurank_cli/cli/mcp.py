"""``acurank mcp``: acurank's tools (``rerank``, ``evaluate``) for an agent, as an MCP server on stdio
(:mod:`acurank_cli.serve.mcp_tools`; ``acurank serve`` answers the same tools at ``/mcp``).

The backend is built once, as ``serve`` builds it (the same method and backend flags); stdout carries the protocol
alone, every status line goes to stderr. It runs until the client closes stdin.
"""

from __future__ import annotations

import typer

from ..run.pipeline import DEFAULTS
from .flags import (ServedAllowMapMismatch, ServedCalibration, Cache, MaxPassages, NoCache, PanelledCommand, PassageScore, PassagesFlag, ReadDirs, Reranker,
                    cache_choice, method_option, say, with_generated_flags)


def mcp_cmd(
    ctx: typer.Context,
    *,
    method: method_option(f"Default method of the calls (a call may name another in its 'method' argument; default {DEFAULTS.method}): {{methods}}.") = None,
    reranker: Reranker = DEFAULTS.backend,
    cache: Cache = None,
    no_cache: NoCache = False,
    read_dir: ReadDirs = None,
    passages: PassagesFlag = None,
    passage_score: PassageScore = None,
    max_passages: MaxPassages = None,
    calibration: ServedCalibration = None,
    allow_map_mismatch: ServedAllowMapMismatch = False,
    **generated,
) -> None:
    """Serve acurank's tools to an MCP client over stdio: rerank (a query and its documents) and evaluate (a run
    against qrels)."""
    from ..serve.limits import DEFAULT_LIMITS
    from ..serve.mcp_tools import build_mcp  # the mcp SDK: a missing one names its extra (mcp), before any load
    from ..serve.service import start_service

    def sdk() -> None:
        import mcp.server.mcpserver  # noqa: F401 - checked before the backend is built

    service = start_service(reranker, method, generated, DEFAULT_LIMITS, cache_choice(cache, no_cache),
                            calibration=calibration, allow_map_mismatch=allow_map_mismatch,
                            passages=(passages, passage_score, max_passages),
                            before_load=sdk)
    server = build_mcp(service, reranker, read_dir or ())
    say(f"mcp: serving {service.methods.strategy.name} with {reranker} on stdio (tools: rerank, evaluate)")
    try:
        server.run("stdio")
    finally:
        service.close(DEFAULT_LIMITS.timeout)


def mount(app: typer.Typer) -> None:
    app.command("mcp", cls=PanelledCommand, help="Serve acurank's tools (rerank, evaluate) to an agent over MCP (stdio).")(
        with_generated_flags(mcp_cmd))
