"""The rerank endpoints' shapes: Cohere's ``/v1/rerank`` and ``/v2/rerank`` (Jina's ``/v1/rerank`` is a superset
of Cohere v1), parsed into :class:`RerankCall` records and answered in the shape each client reads.

Requests are validated by pydantic in strict mode (a number is not a string, ``true`` is not 1); every problem is
a :class:`BadRequest` naming the field (``documents[3].text``), never a 500. Unknown fields are refused by name:
a misspelt ``top_n`` would otherwise be ignored silently. Fields Cohere's clients send that do not apply here are
accepted and said in ``meta.warnings`` (``priority``). ``max_chunks_per_doc`` splits long documents into passages
(:mod:`acurank_cli.run.passages`), at most that many a document. ``cut`` and ``cut_target`` are rerank's ``--cut`` and
``--cut-target`` on a server with a calibration map.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..params import Domain
from ..records import visible
from ..run.documents import QUERY_BLANK
from ..run.request import PIVOT_BLANK
from .limits import Limits


class BadRequest(Exception):
    """A request the server refuses: its HTTP status, the field it is about, and a one-line message."""

    def __init__(self, message: str, field: str | None = None, status: int = 400, headers: dict | None = None):
        super().__init__(message)
        self.message, self.field, self.status, self.headers = message, field, status, headers or {}

    def body(self) -> dict[str, Any]:
        """What the client is sent: the message without a secret (a backend's error may echo its URL's key)."""
        from .. import redaction

        out: dict[str, Any] = {"message": redaction.text(self.message)}
        if self.field is not None:
            out["field"] = self.field
        return out


class _Document(BaseModel):
    """A document given as an object: ``text`` (unless ``rank_fields`` names the fields to read), an optional
    ``title``; any other field is kept and returned with the document."""

    model_config = ConfigDict(extra="allow", strict=True)
    text: str | None = None
    title: str | None = None


class _Body(BaseModel):
    """Cohere's rerank request (v1 and v2), Jina's, and acurank's own optional fields (``method``, ``budget``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    query: str
    documents: list[Union[str, _Document]]
    model: str | None = None
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool | None = None
    max_tokens_per_doc: int | None = Field(default=None, ge=1)
    rank_fields: list[str] | None = None
    max_chunks_per_doc: int | None = Field(default=None, ge=1)
    priority: int | None = None
    #: acurank's extensions: the method for this request (a --method name) and its call budget per query
    method: str | None = None
    budget: int | None = Field(default=None, ge=0)
    #: a task instruction for this request's prompts (listwise LLM backends)
    instruction: str | None = None  # bounded where every entrance's is (Session.check_instruction)
    #: a reference passage at the relevance boundary, rated in every window ("simulated": the simulated reranker's)
    pivot: str | None = None  # a blank one refused below, in the API's words
    #: with this server's --calibration map: where the list stops ("p:X" or "f1", as rerank's --cut) and where the
    #: cut's calls go ("cut" or "topk", as --cut-target)
    cut: str | None = None
    cut_target: str | None = None


#: a request's own fields, named as such where a refusal speaks of them (the server's settings are its flags)
REQUEST_FIELDS = frozenset(_Body.model_fields)


@dataclass(frozen=True, kw_only=True)
class RerankCall:
    """One parsed rerank request."""

    id: str
    api: str  # "v1" or "v2"
    query: str
    texts: tuple[str, ...]
    titles: tuple[str, ...]
    originals: tuple[Any, ...]  # each document as given (returned with return_documents)
    top_n: int | None
    return_documents: bool
    method: str | None
    budget: int | None
    model: str | None
    instruction: str | None = None
    warnings: tuple[str, ...]
    truncated: int  # documents cut to the token limit
    #: passages a document may be split into (Cohere v1's field); None: the server's --passages, or whole
    max_chunks_per_doc: int | None = None
    #: the request's pivot passage (a reference player in every window), or None
    pivot: str | None = None
    #: where the list stops ("p:X" or "f1") and where the cut's calls go ("cut" or "topk"), or None
    cut: str | None = None
    cut_target: str | None = None


def _field(loc: Sequence[Any]) -> str:
    """pydantic's error location as the request's field path: ``documents[3].text``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "_Document") or str(part).startswith("function-"):
            continue  # which member of a union was tried: not a field of the request
        else:
            out += ("." if out else "") + str(part)
    return out or "body"


def explain(error: Mapping[str, Any]) -> BadRequest:
    """One pydantic error as the one-line refusal naming its field."""
    kind, field = error.get("type", ""), _field(error.get("loc", ()))
    if kind == "json_invalid":
        return BadRequest(f"the body is not valid JSON ({error.get('ctx', {}).get('error', 'malformed')})", "body")
    if kind == "model_type" or (kind == "model_attributes_type" and field == "body"):
        return BadRequest("the body must be a JSON object", "body")
    if kind == "missing":
        return BadRequest(f"{field} is required", field)
    if kind == "extra_forbidden":
        return BadRequest(f"{field} is not a field of this endpoint", field)
    bound = _BOUNDS.get(kind)
    if bound is not None:  # a number outside its domain, in the words every entrance uses (params.Domain)
        limit, open_ = float(error.get("ctx", {})[bound[0]]), bound[1]
        integer = isinstance(error.get("input"), int)
        domain = Domain(integer, limit, lo_open=open_) if bound[2] else Domain(integer, hi=limit, hi_open=open_)
        return BadRequest(f"{field}: must be {domain.describe()}", field)
    return BadRequest(f"{field}: {error.get('msg', 'invalid')}", field)


#: pydantic's bound errors -> (its limit's key, whether the bound is open, whether it is a lower bound)
_BOUNDS = {"greater_than_equal": ("ge", False, True), "greater_than": ("gt", True, True),
           "less_than_equal": ("le", False, False), "less_than": ("lt", True, False)}


def _union_error(errors: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """Of pydantic's errors for one document (one per member of string | object), the one that says most."""
    for error in errors:
        loc = error.get("loc", ())
        if "_Document" in loc and error.get("type") != "model_type":
            return error  # an object with a wrong field: about that field
    for error in errors:
        if len(error.get("loc", ())) >= 2 and error["loc"][0] == "documents" and error["loc"][-1] == "str":
            return {**error, "msg": "must be a string or an object with a 'text' string"}
    return errors[0]


def _lone_surrogate(raw: bytes) -> None:
    """The refusal of a body whose JSON escapes a lone surrogate, in the words of every reader of JSON
    (:func:`~acurank_cli.io.sources.parse_json`): the server's parser said "unexpected end of hex escape" of a whole
    escape. Nothing where that is not why the body was refused."""
    from ..io.sources import LoneSurrogate, parse_json

    try:
        parse_json(raw.decode("utf-8"))
    except LoneSurrogate as exc:
        raise BadRequest(f"the body is not valid JSON ({exc})", "body") from None
    except (ValueError, RecursionError):
        return


def without_mark(raw: bytes) -> bytes:
    """A body without the UTF-8 byte order mark before it, which JSON lets a reader ignore (PowerShell sends one)."""
    return raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw


def fields_once(raw: bytes) -> None:
    """A JSON body (an MCP message too) whose every object gives each name once: refused naming where one is given
    twice (a parser keeps the last); a body that is not JSON is left to its parser to say so."""
    try:
        parsed = json.loads(raw, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):  # not JSON, or nested past what Python reads: the parser's to say
        return
    try:
        _once(parsed)
    except RecursionError:  # nested past what the walk can follow: left to the parser, as above
        return


class _Pairs(list):
    """A JSON object as the parser read it: its (name, value) pairs, a name given twice kept twice."""


def _once(node: Any, where: str = "") -> None:
    """Every JSON object in ``node`` (read with :class:`_Pairs`) gives each name once, else the refusal naming where
    (``documents[0].text``): a parser keeps the last one, in silence."""
    if isinstance(node, _Pairs):
        seen = set()
        for key, value in node:
            path = f"{where}.{key}" if where else key
            if key in seen:
                raise BadRequest(f"{path} is given twice in one object: give each field once", path)
            seen.add(key)
            _once(value, path)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _once(value, f"{where}[{i}]")


def parse(raw: bytes, api: str, limits: Limits) -> RerankCall:
    """A request body as a :class:`RerankCall`, or :class:`BadRequest` naming the field. The body's size is the
    routes' to check (they read it no further than ``limits.max_request_bytes``)."""
    if not raw.strip():
        raise BadRequest("the body is empty: send a JSON object with query and documents", "body")
    raw = without_mark(raw)
    try:
        body = _Body.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors[0].get("type") == "json_invalid":
            _lone_surrogate(raw)
        raise explain(_union_error(errors)) from None
    fields_once(raw)  # a field given twice: the parser above kept the last
    if not visible(body.query):  # the API's rule and words (run.documents.prepare)
        raise BadRequest(QUERY_BLANK, "query")
    if body.pivot is not None and not visible(body.pivot):
        raise BadRequest(PIVOT_BLANK, "pivot")
    if not body.documents:
        raise BadRequest("documents must hold at least one document", "documents")
    if len(body.documents) > limits.max_documents:
        raise BadRequest(f"documents holds {len(body.documents)}, more than this server's limit of "
                         f"{limits.max_documents}", "documents", 413)
    warnings = []
    if body.priority is not None:
        warnings.append("priority is not used: requests are served in arrival order")
    cap = min(body.max_tokens_per_doc or limits.max_tokens_per_doc, limits.max_tokens_per_doc)
    texts, titles, truncated = [], [], 0
    for i, doc in enumerate(body.documents):
        text, title = _text_of(doc, i, body.rank_fields)
        words = text.split()
        if len(words) > cap:
            text, truncated = " ".join(words[:cap]), truncated + 1
        texts.append(text)
        titles.append(title)
    if truncated:
        warnings.append(f"{truncated} document{'s' if truncated != 1 else ''} cut to {cap} tokens (max_tokens_per_doc)")
    originals = tuple(d if isinstance(d, str) else d.model_dump(exclude_none=True) for d in body.documents)
    for i, original in enumerate(originals):
        _finite(original, f"documents[{i}]")
    return RerankCall(id=str(uuid.uuid4()), api=api, query=body.query, texts=tuple(texts), titles=tuple(titles),
                      originals=originals, top_n=body.top_n,
                      return_documents=bool(body.return_documents),
                      method=body.method, budget=body.budget, model=body.model, warnings=tuple(warnings),
                      instruction=body.instruction, truncated=truncated,
                      max_chunks_per_doc=body.max_chunks_per_doc, pivot=body.pivot, cut=body.cut,
                      cut_target=body.cut_target)


def _finite(value: Any, field: str) -> None:
    """JSON has no NaN or infinity (which Python's parser reads from ``NaN``, ``Infinity``, ``1e999``): a document's
    field holding one could not be returned, so it is refused where it is."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadRequest(f"{field} is {value!r}, which JSON cannot carry", field)
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{field}.{key}")
    elif isinstance(value, list):
        for j, item in enumerate(value):
            _finite(item, f"{field}[{j}]")


def _text_of(doc: Union[str, _Document], i: int, rank_fields: list[str] | None) -> tuple[str, str]:
    """A document's passage text and title: a string as it is; an object's ``text`` and ``title``, or with
    ``rank_fields`` its named fields as ``name: value`` lines (Cohere's reading of structured documents)."""
    if isinstance(doc, str):
        return doc, ""
    fields = doc.model_dump(exclude_none=True)
    if rank_fields:
        lines = []
        for name in rank_fields:
            if name not in fields:
                raise BadRequest(f"documents[{i}] has no field {name!r} (named in rank_fields)",
                                 f"documents[{i}].{name}")
            value = fields[name]
            lines.append(f"{name}: {value if isinstance(value, str) else json.dumps(value)}")
        return "\n".join(lines), ""
    if doc.text is None:
        raise BadRequest(f"documents[{i}] needs a 'text' string (or name its fields in rank_fields)",
                         f"documents[{i}].text")
    return doc.text, doc.title or ""


def response(call: RerankCall, order: Sequence[int], scores: Sequence[float], usage: Mapping[str, Any],
             model: str, passages: Sequence[Mapping[str, Any] | None] = (), *, warned: Sequence[str] = ()
             ) -> dict[str, Any]:
    """The answer in the endpoint's shape: ``results`` (index into the request's documents, relevance_score,
    the document itself when asked for, and then a split document's scoring ``passage``), ``id``, ``meta`` (billed
    units, tokens, acurank's accounting in ``meta.acurank``, and ``meta.warnings``: the request's own, then
    ``warned``, what the method warns of its documents at admission); on v1 also Jina's ``model`` and ``usage``."""
    results = []
    for j, (index, score) in enumerate(zip(order, scores)):
        item: dict[str, Any] = {"index": index, "relevance_score": score}
        if call.return_documents:
            original = call.originals[index]
            item["document"] = {"text": original} if isinstance(original, str) else original
            if j < len(passages) and passages[j] is not None:
                item["passage"] = dict(passages[j])
        results.append(item)
    tokens = {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]}
    if usage.get("reasoning_tokens"):  # a thought is billed as output, and said apart
        tokens["reasoning_tokens"] = usage["reasoning_tokens"]
    meta: dict[str, Any] = {"api_version": {"version": call.api[1:]},
                            "billed_units": {"search_units": 1, **tokens}, "tokens": tokens,
                            "acurank": dict(usage)}
    warned = [*call.warnings, *warned]  # the request's, then the method's of its documents
    if warned:
        meta["warnings"] = warned
    out: dict[str, Any] = {"id": call.id, "results": results, "meta": meta}
    if call.api == "v1":  # Jina's fields beside Cohere's
        out["model"] = model
        out["usage"] = {"total_tokens": usage["input_tokens"] + usage["output_tokens"]
                        + (usage.get("reasoning_tokens") or 0)}
    return out
