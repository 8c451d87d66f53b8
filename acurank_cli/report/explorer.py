"""``acurank report html``: a run explorer in one self-contained HTML file (issue 84).

Every figure in the file is computed here, by the code ``eval`` and ``report table`` use (per-query measures by
:func:`acurank_cli.evaluation.evaluate`, each run's mean and its significance mark against the baseline by
:func:`acurank_cli.report.tables.build_table`, calls and tokens from the one stats reader, ratings from the one trace
reader); the page's script only lays them out (tables, and SVG drawn from the same numbers), sorts, filters and
navigates. No network: the script and the styles are inline, and the page opens from ``file://``.

The file holds the overview as one JSON block and each query as its own JSON block, parsed when the query is opened,
so a large run set costs the browser one query at a time (the HTML grows with the runs' size: about 1 KB a query per
run without a trace; a trace adds its ratings, kept for the top ``TRACE_TOP`` documents by final mu). With the
documents' texts (``--corpus``), each listed document carries its opening ``OPENING`` words, once a query, and a split
document its scoring passage as the run ranked it (its characters of the document's text, from the stats' span); the
corpus is read for the listed documents only.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .collection import MethodRun

#: how many documents of each ranking the per-query view lists, and how many documents' ratings a trace keeps
SHOWN, TRACE_TOP = 20, 8
#: the words of a listed document's text the page keeps (--corpus); a split document's scoring passage is kept whole
OPENING = 100


#: the one dataset of the page's collection: its runs name it (:class:`~.collection.MethodRun`)
DATASET = "runs"


def _ordered(scores: dict[str, float]) -> list[str]:
    """A query's documents in trec_eval's order (:func:`acurank_cli.io.runs.in_trec_order`)."""
    from ..io.runs import in_trec_order

    return list(in_trec_order(list(scores), list(scores.values()))[0])


@dataclass(frozen=True)
class _Traced:
    """What the page keeps of one query's trace: the view of its top documents' ratings, and every document's count
    of windows."""

    view: dict[str, Any]
    windows: dict[str, int]


def _trace_of(path: str | Path | None) -> dict[str, _Traced]:
    """Each query's trace (the one trace reader), read a query at a time: a query's lines are written together, and
    only what the page shows of them is kept (a later block of a qid wins, as in the stats), so a trace of any
    length costs the memory of one query's steps."""
    if path is None:
        return {}
    from ..errors import InputError
    from ..io.line_records import trace_record
    from ..io.sources import open_text

    out: dict[str, _Traced] = {}
    steps: list = []

    def done() -> None:
        if steps:
            sent = _windows_of(steps)
            out[steps[0].qid] = _Traced(_trace_view(steps, sent), {d: len(s) for d, s in sent.items()})
            steps.clear()

    with open_text(path) as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = trace_record(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError):  # JSONDecodeError is a ValueError
                raise InputError("--trace: not a trace record (a line of rerank --trace: qid, iteration, phase, t, "
                                 "docs)", str(path), lineno) from None
            if steps and rec.qid != steps[0].qid:
                done()
            steps.append(rec)
    done()
    return out


def _own_trace(run: "MethodRun") -> dict[str, _Traced]:
    """The run's trace, refused when it holds a query the run does not (another run's: another dataset's, or the
    first stage given a reranker's trace); a query cut to nothing is the run's (its stats say so)."""
    from ..errors import InputError

    traced = _trace_of(run.trace_path)
    foreign = sorted(set(traced) - set(run.run_dict()) - run.emptied())
    if foreign:
        raise InputError(f"--trace: holds {len(foreign)} queries that the run {run.method} does not have (e.g. "
                         f"{foreign[0]}): the trace of another run? give its own", str(run.trace_path))
    return traced


def _windows_of(steps: list) -> dict[str, list[int]]:
    """The steps (1, 2, ... as the trace lists them) at which each document was sent in a window, once per window."""
    out: dict[str, list[int]] = {}
    for i, step in enumerate(steps, 1):
        for window in step.windows:
            for docid in window:
                out.setdefault(docid, []).append(i)
    return out


def _trace_view(steps: list, sent: dict[str, list[int]]) -> dict[str, Any]:
    """mu and sigma per step of the top documents by final mu, the threshold t, and whether each of those documents
    was sent in a window at each step (``sent``: :func:`_windows_of` the steps)."""
    final = sorted(steps[-1].docs, key=lambda d: -d.mu)[:TRACE_TOP]
    return {"steps": [f"{s.phase.value} {s.iteration}" for s in steps], "t": [s.t for s in steps],
            "docs": [{"docid": d.docid, "mu": [s.by_docid[d.docid].mu if d.docid in s.by_docid else None for s in steps],
                      "sigma": [s.by_docid[d.docid].sigma if d.docid in s.by_docid else None for s in steps],
                      "sent": [i in sent.get(d.docid, ()) for i in range(1, len(steps) + 1)]}
                     for d in final]}


def _summary(table, measure: str) -> list[dict[str, Any]]:
    """Each run's mean ``measure`` (its name as the collection keys it), calls and mark against the baseline, from
    ``report table``'s own report."""
    out = []
    for row in table.data["methods"]:
        cell = next(iter(row["datasets"].values()))
        if cell is None:
            continue
        versus = cell.get("vs_baseline") or {}
        out.append({"run": row["method"], "mean": cell[measure], "calls": cell.get("calls"),
                    "mark": versus.get("mark", ""), "p": versus.get("p_ttest")})
    return out


def build_explorer(runs: Sequence[MethodRun], qrels_path: str, *, measure: str, rel_level: int = 1,
                   baseline: str | None = None, topics: dict[str, str] | None = None,
                   corpus: str | None = None) -> tuple[dict, dict]:
    """The overview and every query's view, as the page reads them: the runs, their stats and per-query measures
    held and read once by ``report table``'s :class:`~.collection.Collection` (the first run without stats is the
    first stage, 0 calls); ``corpus``: the documents' texts (see the module's doc)."""
    from .collection import DatasetRuns, assembled
    from .tables import build_table, measure_label

    base = baseline or runs[0].method
    first = next((r.method for r in runs if r.stats_path is None), "")
    traces = {r.method: _own_trace(r) for r in runs}  # before the runs' warnings: another run's trace is refused
    coll = assembled({DATASET: DatasetRuns(DATASET, Path(qrels_path), runs={r.method: r for r in runs})},
                     first_stage=first, measure=measure, rel_level=rel_level)
    judged = coll.datasets[DATASET].qrels()
    scores = {r.method: r.run_dict() for r in runs}
    per_query = {r.method: coll.per_query(DATASET, r.method) for r in runs}
    stats = {r.method: r.stats() or {} for r in runs}
    table = build_table([coll], {DATASET: base})
    label = measure_label(measure, rel_level)
    qids = sorted(set().union(*(set(s) for s in scores.values())) & set(judged))
    other = next((r.method for r in runs if r.method != base), base)  # the run the page compares with the baseline

    queries, views = [], {}
    for q in qids:
        row: dict[str, Any] = {"qid": q, "text": (topics or {}).get(q, ""), "values": {}, "calls": {}, "tokens": {},
                               "money": {}}
        for r in runs:
            row["values"][r.method] = per_query[r.method].get(q)
            rec = stats[r.method].get(q)
            row["calls"][r.method] = None if rec is None else rec.calls
            row["tokens"][r.method] = None if rec is None else (rec.input_tokens or 0) + (rec.output_tokens or 0)
            row["money"][r.method] = None if rec is None else rec.money
        top = _ordered(scores[other].get(q, {}))[:10]
        row["unjudged_top10"] = sum(1 for d in top if d not in judged.get(q, {}))
        queries.append(row)
        views[q] = _query_view(q, runs, scores, judged, stats, base)
        views[q]["trace"] = {name: traced[q].view for name, traced in traces.items() if q in traced}
        for name, traced in traces.items():  # each listed document's windows, where the run has a trace
            if q in traced:
                for d in views[q]["rankings"][name]:
                    d["windows"] = traced[q].windows.get(d["docid"], 0)
    if corpus is not None:
        _add_texts(views, stats, corpus)
    priced = any(m is not None for row in queries for m in row["money"].values())
    overview = {"measure": label, "baseline": base, "runs": [r.method for r in runs],
                "summary": _summary(table, coll.measure), "priced": priced,
                "queries": queries}
    return overview, views


def _scoring_passages(rec) -> dict:
    """A query's split documents' scoring passages (docid -> span) as its stats record them; none without passages."""
    return dict(rec.passages.best) if rec is not None and rec.passages is not None else {}


def _query_view(q: str, runs: Sequence[MethodRun], scores: dict, judged: dict, stats: dict, base: str) -> dict:
    base_rank = {d: i + 1 for i, d in enumerate(_ordered(scores[base].get(q, {})))}
    view: dict[str, Any] = {"qid": q, "rankings": {}, "iterations": {}, "thinking": {}, "relevance": {}, "trace": {}}
    for r in runs:
        order = _ordered(scores[r.method].get(q, {}))[:SHOWN]
        view["rankings"][r.method] = [{"docid": d, "grade": judged.get(q, {}).get(d), "was": base_rank.get(d)}
                                    for d in order]
        rec = stats[r.method].get(q)
        best = _scoring_passages(rec)
        for d in view["rankings"][r.method]:  # --passages: the passage that scored a split document, by its words
            if d["docid"] in best:
                span = best[d["docid"]]
                d["passage"] = [span.index, span.start, span.end]
        if rec is not None:
            view["iterations"][r.method] = [{"step": it.step, "phase": it.phase.value, "uncertain": it.uncertain,
                                           "windows": len(it.window_sizes)} for it in rec.iterations]
            view["thinking"][r.method] = rec.reasoning_tokens
            if rec.relevance is not None:
                view["relevance"][r.method] = {"p": dict(rec.relevance.p), "kept": rec.relevance.kept,
                                             "p_none": rec.relevance.p_none}
    return view


def _opening(text: str) -> str:
    words = text.split()
    return " ".join(words[:OPENING]) + (" …" if len(words) > OPENING else "")


def _add_texts(views: dict[str, dict], stats: dict, corpus: str) -> None:
    """Each query's listed documents' openings (``texts``, by docid) and each split document's scoring passage
    (``passage_text``: the characters of the document's text that the stats' span names), from ``corpus``, read
    for the listed documents only (the one corpus reader)."""
    from ..io.collection_files import read_corpus

    docs = read_corpus(corpus, {d["docid"] for v in views.values() for r in v["rankings"].values() for d in r})
    for q, view in views.items():
        view["texts"] = {}
        for name, ranking in view["rankings"].items():
            best = _scoring_passages(stats[name].get(q))
            for d in ranking:
                doc = docs.get(d["docid"])
                if doc is None:
                    continue
                view["texts"][d["docid"]] = {"title": doc.title, "text": _opening(doc.text)}
                if d["docid"] in best:
                    span = best[d["docid"]]
                    d["passage_text"] = doc.text[span.char_start: span.char_end]


def render_explorer(overview: dict, views: dict[str, dict], title: str) -> str:
    """The page: the overview and each query's view as JSON blocks, the script and the styles inline."""
    def block(ident: str, data: Any) -> str:
        text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        return f'<script type="application/json" id="{html.escape(ident)}">{text}</script>'

    blocks = [block("overview", overview), *(block(f"q:{q}", v) for q, v in views.items())]
    return (_PAGE.replace("__TITLE__", html.escape(title)).replace("__STYLE__", _STYLE)
            .replace("__DATA__", "\n".join(blocks)).replace("__SCRIPT__", _SCRIPT))


def write_explorer(runs: Sequence[MethodRun], qrels: str, output: str | Path, *, measure: str, rel_level: int = 1,
                   baseline: str | None = None, topics: dict[str, str] | None = None,
                   corpus: str | None = None) -> int:
    """Build and write the page; returns its size in bytes."""
    overview, views = build_explorer(runs, qrels, measure=measure, rel_level=rel_level, baseline=baseline,
                                     topics=topics, corpus=corpus)
    text = render_explorer(overview, views, f"acurank runs: {', '.join(r.method for r in runs)}")
    Path(output).write_text(text, encoding="utf-8")
    return len(text.encode("utf-8"))


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>__STYLE__</style></head>
<body><header><h1>__TITLE__</h1><nav><a href="#">Overview</a></nav></header>
<main id="main" aria-live="polite"></main>
__DATA__
<script>__SCRIPT__</script></body></html>
"""

_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em;color:#222}h1{font-size:1.2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}tr.sel{outline:2px solid #06c}tr.q{cursor:pointer}
.g0{background:#fff}.g1{background:#fde9b6}.g2{background:#c9ecc0}.g3{background:#8fd68a}.gu{background:#eee;color:#777}
.up{color:#070}.down{color:#b00}.side{display:flex;gap:1.5em;flex-wrap:wrap}svg{border:1px solid #ddd;margin:.3em 0}
.controls{margin:.5em 0}.controls>*{margin-right:.8em}td.t{text-align:left;max-width:26em}td.t summary{cursor:pointer}"""

_SCRIPT = r"""
const $ = (s) => document.querySelector(s);
const data = (id) => JSON.parse(document.getElementById(id).textContent);
const O = data("overview");
const fmt = (x, d = 4) => (x === null || x === undefined) ? "-" : (typeof x === "number" ? x.toFixed(d) : String(x));
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const other = O.runs.find((r) => r !== O.baseline) || O.baseline;
const delta = (q) => (q.values[other] === null || q.values[O.baseline] === null) ? null : q.values[other] - q.values[O.baseline];
let shown = [], selected = 0;

function table(head, rows, cls) {
  return `<table class="${cls || ""}"><thead><tr>${head.map((h, i) => `<th class="${i ? "" : "l"}" scope="col">${esc(h)}</th>`).join("")}</tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table>`;
}

function bars(values, width, height) {
  const n = values.length, m = Math.max(1e-9, ...values.map((v) => Math.abs(v)));
  const w = width / Math.max(1, n), mid = height / 2;
  const rects = values.map((v, i) => `<rect x="${(i * w).toFixed(1)}" y="${(v >= 0 ? mid - v / m * mid : mid).toFixed(1)}" width="${Math.max(1, w - 1).toFixed(1)}" height="${(Math.abs(v) / m * mid).toFixed(1)}" fill="${v >= 0 ? "#3a3" : "#c33"}"></rect>`);
  return `<svg id="delta-chart" role="img" aria-label="per-query difference, sorted" width="${width}" height="${height}"><line x1="0" x2="${width}" y1="${mid}" y2="${mid}" stroke="#999"></line>${rects.join("")}</svg>`;
}

function scatter(points, width, height) {
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1e-9), y1 = Math.max(...ys, 1);
  const dots = points.map((p) => `<circle cx="${(10 + (p[0] - x0) / (x1 - x0) * (width - 20)).toFixed(1)}" cy="${(height - 10 - p[1] / y1 * (height - 20)).toFixed(1)}" r="3" fill="#36c"></circle>`);
  return `<svg id="allocation-chart" role="img" aria-label="calls against the baseline's measure" width="${width}" height="${height}">${dots.join("")}</svg>`;
}

function lines(series, width, height, tvals) {
  const all = series.flatMap((s) => s.mu.map((m, i) => [m - 2 * (s.sigma[i] || 0), m + 2 * (s.sigma[i] || 0)])).flat().filter((v) => v !== null && !isNaN(v));
  (tvals || []).forEach((t) => { if (t !== null) all.push(t); });
  const lo = Math.min(...all), hi = Math.max(...all, lo + 1e-9), n = Math.max(2, series[0].mu.length);
  const X = (i) => (10 + i / (n - 1) * (width - 20)).toFixed(1), Y = (v) => (height - 10 - (v - lo) / (hi - lo) * (height - 20)).toFixed(1);
  const colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
  const paths = series.map((s, k) => `<path class="mu" d="${s.mu.map((m, i) => m === null ? "" : `${i ? "L" : "M"}${X(i)},${Y(m)}`).join("")}" stroke="${colours[k % 8]}" fill="none"></path>`);
  const t = (tvals || []).map((v, i) => v === null ? "" : `${i ? "L" : "M"}${X(i)},${Y(v)}`).join("");
  return `<svg id="trace-chart" role="img" aria-label="mu over iterations" width="${width}" height="${height}">${paths.join("")}${t ? `<path d="${t}" stroke="#000" stroke-dasharray="4 3" fill="none"></path>` : ""}</svg>`;
}

function overview() {
  const s = O.summary.map((r) => `<tr><td class="l">${esc(r.run)}</td><td>${fmt(r.mean)} ${esc(r.mark || "")}</td><td>${fmt(r.calls, 2)}</td><td>${fmt(r.p)}</td></tr>`);
  const d = O.queries.map((q) => [q.qid, delta(q)]).filter((x) => x[1] !== null).sort((a, b) => b[1] - a[1]);
  const alloc = O.queries.filter((q) => q.calls[other] !== null && q.values[O.baseline] !== null).map((q) => [q.values[O.baseline], q.calls[other]]);
  const filter = $("#filter") ? $("#filter").value : "all", find = $("#find") ? $("#find").value.toLowerCase() : "";
  shown = O.queries.filter((q) => (filter !== "hurt" || (delta(q) !== null && delta(q) < 0)) && (filter !== "unjudged" || q.unjudged_top10 > 0) &&
    (!find || q.qid.toLowerCase().includes(find) || q.text.toLowerCase().includes(find)));
  if (filter === "calls") shown.sort((a, b) => (b.calls[other] || 0) - (a.calls[other] || 0));
  if (filter === "hurt") shown.sort((a, b) => delta(a) - delta(b));
  selected = Math.min(selected, Math.max(0, shown.length - 1));
  const rows = shown.map((q, i) => `<tr class="q${i === selected ? " sel" : ""}" data-qid="${esc(q.qid)}"><td class="l"><a href="#q=${encodeURIComponent(q.qid)}">${esc(q.qid)}</a> ${esc(q.text)}</td>` +
    O.runs.map((r) => `<td>${fmt(q.values[r])}</td>`).join("") + `<td>${fmt(delta(q))}</td>` + O.runs.map((r) => `<td>${fmt(q.calls[r], 0)}</td><td>${fmt(q.tokens[r], 0)}</td>` + (O.priced ? `<td>${fmt(q.money[r], 4)}</td>` : "")).join("") + `<td>${q.unjudged_top10}</td></tr>`);
  $("#main").innerHTML = `<h2>Overview (${esc(O.measure)}, against ${esc(O.baseline)})</h2>` +
    table(["run", O.measure + " (mark against the baseline)", "calls a query", "p (paired t-test)"], s, "summary") +
    `<h3>Per-query difference, ${esc(other)} minus ${esc(O.baseline)}, sorted</h3>${bars(d.map((x) => x[1]), 600, 120)}` +
    `<h3>Calls of ${esc(other)} against the baseline's ${esc(O.measure)} (allocation)</h3>${scatter(alloc, 300, 160)}` +
    `<h3>Queries</h3><div class="controls"><label>Show <select id="filter"><option value="all">all</option><option value="hurt">hurt by reranking</option>` +
    `<option value="calls">most calls</option><option value="unjudged">unjudged in the top 10</option></select></label>` +
    `<label>Find <input id="find" type="search" placeholder="qid or text"></label> <span>j/k or arrows to move, Enter to open</span></div>` +
    table(["query", ...O.runs, "difference", ...O.runs.flatMap((r) => [r + " calls", r + " tokens", ...(O.priced ? [r + " money"] : [])]), "unjudged in top 10"], rows, "queries");
  $("#filter").value = filter; $("#find").value = find;
  $("#filter").onchange = overview; $("#find").oninput = overview;
  document.querySelectorAll("tr.q").forEach((tr) => tr.onclick = () => { location.hash = "q=" + encodeURIComponent(tr.dataset.qid); });
}

function query(qid) {
  const el = document.getElementById("q:" + qid);
  if (!el) { $("#main").innerHTML = `<p>No query ${esc(qid)} in this file. <a href="#">Overview</a></p>`; return; }
  const v = JSON.parse(el.textContent), q = O.queries.find((x) => x.qid === qid);
  const ranking = (r) => {
    const rel = v.relevance[r], traced = v.rankings[r].length > 0 && v.rankings[r][0].windows !== undefined;
    const split = v.rankings[r].some((d) => d.passage), texts = v.texts || {}, texted = Object.keys(texts).length > 0;
    const shown = (d) => {  // the text a reader opens: the scoring passage of a split document, else its opening
      const t = texts[d.docid], body = d.passage_text !== undefined ? d.passage_text : (t ? t.text : "");
      if (!t && d.passage_text === undefined) return "<td></td>";
      const words = body.split(/\s+/).filter((x) => x), head = words.slice(0, 8).join(" ") + (words.length > 8 ? " …" : "");
      return `<td class="l t"><details><summary>${esc(head)}</summary>${t && t.title ? `<b>${esc(t.title)}</b> ` : ""}${esc(body)}</details></td>`;
    };
    const rows = v.rankings[r].map((d, i) => {
      const g = d.grade === null ? "gu" : "g" + Math.min(3, d.grade), move = d.was === null ? "" : d.was - (i + 1);
      const p = rel ? `<td>${fmt(rel.p[d.docid], 3)}${rel.kept !== null && i >= rel.kept ? " (cut)" : ""}</td>` : "";
      const w = (traced ? `<td>${d.windows}</td>` : "") + (split ? `<td>${d.passage ? `${d.passage[0]} (words ${d.passage[1]}-${d.passage[2]})` : ""}</td>` : "") +
        (texted ? shown(d) : "");
      return `<tr class="${g}"><td class="l">${i + 1}</td><td class="l">${esc(d.docid)}</td><td>${d.grade === null ? "unjudged" : d.grade}</td>` +
        `<td class="${move > 0 ? "up" : move < 0 ? "down" : ""}">${move === "" ? "" : (move > 0 ? "+" : "") + move}</td>${w}${p}</tr>`;
    });
    return `<section class="ranking" data-run="${esc(r)}"><h3>${esc(r)}: ${fmt(q ? q.values[r] : null)}</h3>` +
      table(["rank", "docid", "grade", "move", ...(traced ? ["windows"] : []), ...(split ? ["scoring passage"] : []),
             ...(texted ? [split ? "text (a split document: its scoring passage)" : "text"] : []),
             ...(rel ? ["P(relevant) (the cut: where the run's list stops)"] : [])], rows, "rank") +
      (rel ? `<p>P(no relevant document): ${fmt(rel.p_none, 3)}</p>` : "") + "</section>";
  };
  const iters = Object.entries(v.iterations).map(([r, its]) => `<h3>${esc(r)}: the uncertain set per step` +
    (v.thinking[r] ? `, ${v.thinking[r]} thinking tokens` : "") + `</h3>` +
    table(["step", "phase", "uncertain", "windows"], its.map((it) => `<tr><td class="l">${it.step}</td><td>${esc(it.phase)}</td><td>${fmt(it.uncertain, 0)}</td><td>${it.windows}</td></tr>`), "iterations"));
  const traces = Object.entries(v.trace).map(([r, t]) => `<h3>${esc(r)}: mu over the steps (top ${t.docs.length} by final mu; t dashed)</h3>` +
    lines(t.docs, 600, 200, t.t) + `<p>mu ± sigma at each step; ▪: sent in a window at that step</p>` +
    table(["docid", ...t.steps], t.docs.map((d) => `<tr><td class="l">${esc(d.docid)}</td>${d.mu.map((m, i) => `<td>${fmt(m, 2)} ± ${fmt(d.sigma[i], 2)}${d.sent && d.sent[i] ? " ▪" : ""}</td>`).join("")}</tr>`), "trace"));
  $("#main").innerHTML = `<h2>Query ${esc(qid)}${q && q.text ? ": " + esc(q.text) : ""}</h2>` +
    `<div class="side">${O.runs.map(ranking).join("")}</div>${iters.join("")}${traces.join("")}`;
}

function route() {
  const m = location.hash.match(/^#q=(.*)$/);
  if (m) query(decodeURIComponent(m[1])); else overview();
}

document.addEventListener("keydown", (e) => {
  if (location.hash.startsWith("#q=") || e.target.tagName === "INPUT" || e.target.tagName === "SELECT") {
    if (e.key === "Escape") location.hash = "";
    return;
  }
  if (e.key === "j" || e.key === "ArrowDown") selected = Math.min(shown.length - 1, selected + 1);
  else if (e.key === "k" || e.key === "ArrowUp") selected = Math.max(0, selected - 1);
  else if (e.key === "Enter" && shown[selected]) { location.hash = "q=" + encodeURIComponent(shown[selected].qid); return; }
  else return;
  e.preventDefault(); overview();
});
window.addEventListener("hashchange", route);
route();
"""
