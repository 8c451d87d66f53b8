"""acurank as an MCP tool server (the official ``mcp`` SDK's :class:`MCPServer`; ``pip install 'acurank[mcp]'``).

Two tools, over stdio (``acurank mcp``) or streamable HTTP (``acurank serve``'s ``/mcp``, behind its keys, limits,
queue and metrics):

* ``rerank``: a query and its documents, reranked by the server's one :class:`~.service.RerankService`, exactly as
  ``POST /v2/rerank`` reranks the same request (the same checks, the same order and scores, the same ``meta``);
* ``evaluate``: a TREC run against qrels, each given inline (their text) or as a path under a folder the server
  was told it may read (``--read-dir``), by trec_eval or ir_measures names.

A refused call is an MCP tool error whose text is the HTTP API's one-line message (its field named); nothing a
caller sends crashes the server.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InputError
from .exchange import exchange
from .protocol import BadRequest, explain
from .service import RerankService

INSTRUCTIONS = ("Listwise reranking with AcuRank (uncertainty-aware: LLM calls go where the top of the ranking is "
                "still uncertain). Call `rerank` to order candidate documents for a query, best first, with a "
                "0-1 relevance score each; call `evaluate` to score a TREC run against relevance judgments.")

RERANK_HELP = (
    "Rerank documents for a query, best first. Give the query and the documents (strings, or objects with a "
    "'text' field and optional 'title' and other fields). Returns 'results': each document's 'index' in the list "
    "given and its 'relevance_score' (0-1: with the acurank methods, the probability that it belongs in the top k), "
    "best first, at most top_n of them; 'meta.acurank' says how many reranker calls it took. Optional: top_n (how many "
    "to return), method (acurank, acurank-9, sw-1, ...; default: the server's), budget (reranker calls at most), "
    "return_documents (echo each document), rank_fields (the object fields to rank by), instruction (the task, for "
    "LLM rerankers), max_tokens_per_doc (cut each document to that many words), max_chunks_per_doc (rank a long document "
    "by its passages, at most that many; with return_documents, each split document's best 'passage' is returned), pivot "
    "(a passage at the relevance boundary written for this query, rated in every window as a reference; a server "
    "whose calibration map was fit with a pivot needs one), cut (on a server with a calibration map: 'p:X' keeps the "
    "documents whose P(relevant) is at least X, 'f1' the ones that maximise the expected F1; the list may be empty) and "
    "cut_target ('cut' or 'topk': where the cut's reranker calls go).")

EVALUATE_HELP = (
    "Evaluate a TREC run against relevance judgments (qrels), as trec_eval does. 'run' and 'qrels' are either the "
    "files' text (run lines 'qid Q0 docid rank score tag', qrels lines 'qid 0 docid grade') or paths to files in a "
    "folder the server may read. 'measures': trec_eval names (ndcg_cut.10, map, recall.100, P.10, recip_rank) or "
    "ir_measures names (nDCG@10, AP, R@100, P@10, RR); default nDCG@10. 'rel_level': the grade a document needs to "
    "count as relevant for binary measures (TREC DL uses 2). Returns the mean of each measure over the qrels' "
    "queries, as acurank eval: a query the run lacks scores 0, and 'note' says how many it lacks ('fill': false "
    "averages over the run's judged queries only, as trec_eval without -c), and per query values when per_query is "
    "true.")


#: ``evaluate``'s measure where none is given (in ir_measures' name, as its answer's key)
EVALUATE_MEASURE = "nDCG@10"


def build_mcp(service: RerankService, model: str, read_dirs: Sequence[str | Path] = ()) -> Any:
    """The MCP server over ``service`` (its tools ``rerank`` and ``evaluate``)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("acurank", instructions=INSTRUCTIONS, log_level="WARNING")
    roots = tuple(Path(d).resolve() for d in read_dirs)

    # the signatures publish each tool's input schema; the arguments reach the tools as sent (_as_sent)
    @server.tool(name="rerank", description=RERANK_HELP)
    async def rerank(query: str, documents: list[str | dict[str, Any]], *, top_n: int | None = None,
                     method: str | None = None, budget: int | None = None, return_documents: bool | None = None,
                     rank_fields: list[str] | None = None, instruction: str | None = None,
                     max_tokens_per_doc: int | None = None, max_chunks_per_doc: int | None = None,
                     pivot: str | None = None, cut: str | None = None, cut_target: str | None = None
                     ) -> dict[str, Any]:
        raise AssertionError("replaced by _as_sent")  # pragma: no cover

    @server.tool(name="evaluate", description=EVALUATE_HELP)
    def evaluate(run: str, qrels: str, measures: list[str] | None = None, rel_level: int = 1,
                 per_query: bool = False, fill: bool = True) -> dict[str, Any]:
        raise AssertionError("replaced by _as_sent")  # pragma: no cover

    async def rerank_as_sent(sent: dict[str, Any]) -> dict[str, Any]:
        return await reranked(service, model, {"model": model, **sent})

    def evaluate_as_sent(sent: dict[str, Any]) -> dict[str, Any]:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            args = _EvaluateArguments.model_validate(sent)
        except ValidationError as exc:
            raise ToolError(explain(exc.errors(include_url=False)[0]).message) from None
        return evaluated(args, roots)

    _as_sent(server, "rerank", rerank_as_sent)
    _as_sent(server, "evaluate", evaluate_as_sent)
    return server


class _EvaluateArguments(BaseModel):
    """``evaluate``'s arguments, held to the HTTP API's rules: strict types, no unknown field."""

    model_config = ConfigDict(extra="forbid", strict=True)
    run: str
    qrels: str
    measures: Optional[list[str]] = None
    rel_level: int = Field(1, ge=1)  # refused in the words every entrance uses: "rel_level: must be an integer >= 1"
    per_query: bool = False
    #: a query of the qrels missing from the run scores 0 in the mean (eval's default; false: eval's --no-fill)
    fill: bool = True


def _as_sent(server: Any, name: str, take: Callable[[dict[str, Any]], Any]) -> None:
    """The tool ``name`` gets its arguments exactly as the caller sent them, in one dict, and checks them itself:
    the SDK's own validation would coerce ``"1"``, ``true`` and ``1.0`` to a number, drop a misspelt field, and
    answer a type error with a multi-line pydantic dump, where ``POST /v2/rerank`` refuses each in one line naming
    the field. The typed signature it was registered with still publishes the input schema."""
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase

    class AsSent(ArgModelBase):
        model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

        def model_dump_one_level(self) -> dict[str, Any]:
            return {"sent": dict(self.model_extra or {})}

    tool = server._tool_manager.get_tool(name)  # the SDK keeps no public handle on a registered tool's validation
    tool.fn_metadata.arg_model = AsSent
    tool.fn, tool.is_async = take, asyncio.iscoroutinefunction(take)


async def reranked(service: RerankService, model: str, body: dict[str, Any]) -> dict[str, Any]:
    """One rerank request, as ``POST /v2/rerank`` answers it (the one exchange, :func:`~.exchange.exchange`);
    refused: a tool error with the API's message."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        async def sent() -> bytes:
            return json.dumps(body).encode()

        return await exchange(service, model, sent, "v2", "mcp:rerank")
    except BadRequest as exc:
        raise ToolError(exc.body()["message"]) from None


def evaluated(args: "_EvaluateArguments", roots: Sequence[Path]) -> dict[str, Any]:
    """The ``evaluate`` tool: the run and qrels read (inline, or a path under ``roots``), measured as ``acurank eval``
    measures them (a run of another dataset's queries refused; where it holds only some of the qrels' queries, the
    result's ``note`` says what the mean is over, as eval warns)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from ..evaluation import check_judged, coverage, evaluate
    from ..io.collection_files import read_qrels
    from ..io.runs import read_run

    try:
        if args.measures is not None and not args.measures:
            raise InputError(f"measures: give at least one measure (left out: {EVALUATE_MEASURE})")
        judged = read_qrels(_source(args.qrels, "qrels", roots))
        ranked = read_run(_source(args.run, "run", roots)).scores()
        check_judged(ranked, judged, "given", "run")
        result = evaluate(ranked, judged, args.measures or [EVALUATE_MEASURE], args.rel_level, fill=args.fill)
    except (InputError, ValueError) as exc:
        raise ToolError(" ".join(str(exc).split())) from None
    out: dict[str, Any] = {"measures": {m: result.mean(m) for m in result.measures},
                           "queries": len(result.per_query), "rel_level": args.rel_level}
    note = coverage(ranked, judged, args.fill, "fill: false")
    if note is not None:
        out["note"] = note
    if args.per_query:
        out["per_query"] = result.per_query
    return out


def _source(value: str, what: str, roots: Sequence[Path]) -> Any:
    """A file's text given inline (it holds a line break, or the 4 or 6 fields of one qrels or run line: a one-line
    run was read as a path), or a path under one of ``roots``."""
    if "\n" in value or not value.strip() or len(value.split()) >= 4:
        given = io.StringIO(value)
        given.name = what  # its refusals name the argument (they named "<stream>"), as eval's name the file
        return given
    path = Path(value).expanduser()
    resolved = path.resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        if not roots:
            raise InputError(f"{what}: {value!r} is a path, and this server reads no folder (it was started without "
                             "--read-dir): give the file's text instead")
        allowed = ", ".join(str(r) for r in roots)
        raise InputError(f"{what}: {value!r} is not under a folder this server may read ({allowed})")
    if not resolved.exists() or resolved.is_dir():  # a file, a FIFO, a .gz: read as the CLI reads them
        raise InputError(f"{what}: no such file {value!r}")
    return str(resolved)


__all__ = ["build_mcp", "evaluated", "reranked"]
