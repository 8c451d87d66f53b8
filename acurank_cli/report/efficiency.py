"""The paper's efficiency table from runs: per method and dataset, reranker calls, the mean size of the
windows sent, input and output tokens, wall seconds (latency) and estimated FLOPs per query, and the change
in input tokens and FLOPs against a baseline (the paper reports AcuRank's shorter inputs and fewer FLOPs
than sliding windows).

Everything is a mean over the judged queries found in the stats files. FLOPs are the stats' estimate,
2 x model parameters x (input + output tokens), present when the run knew its model's size (``hf:``,
``vllm:``, ``minilm``, or ``--model-params``): an estimate that counts every token through every parameter
(embeddings included, attention's quadratic term and any KV-cache reuse left out).
"""

from __future__ import annotations

from .collection import Collection
from .render import MISSING, Table, num
from .render import Report
from .tables import ordered_methods

#: (stats kind, column title, digits)
COLUMNS = (("calls", "Calls/q", 2), ("cached", "Cached/q", 2), ("window", "Window", 2), ("input_tokens", "Input tokens/q", 0),
           ("output_tokens", "Output tokens/q", 0), ("seconds", "Latency s/q", 3), ("flops", "TFLOPs/q", 2))
#: shown beside the answer's tokens where a run of the dataset thought (``--thinking``; docs/thinking.md)
THINKING = ("thinking_tokens", "Thinking tokens/q", 0)


def _columns(coll: Collection, ds: str, methods: list[str]) -> tuple:
    """The table's columns: the thinking tokens' only where some run of the dataset spent any."""
    thought = any((coll.mean_cost(ds, m, THINKING[0]) or 0) > 0 for m in methods if coll.has(ds, m))
    return COLUMNS[:5] + (THINKING,) + COLUMNS[5:] if thought else COLUMNS


def _change(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else 100.0 * (value - base) / base


def build_efficiency(coll: Collection, baseline: str | None = None) -> Report:
    """One table per dataset (methods as rows; the first stage, which makes no call, left out)."""
    tables, records, data = [], [], {}
    methods = [m for m in ordered_methods(coll) if m != coll.first_stage]
    for ds in coll.datasets:
        base = baseline if baseline and coll.has(ds, baseline) else None
        base_vals = {k: coll.mean_cost(ds, base, k) for k in ("input_tokens", "flops")} if base else {}
        kinds = _columns(coll, ds, methods)
        columns = ["Method", *(c[1] for c in kinds)]
        if base:
            columns += [f"Input vs {base}", f"FLOPs vs {base}"]
        table = Table(f"{ds}: efficiency per query", columns)
        data[ds] = {}
        for m in methods:
            if not coll.has(ds, m):
                continue
            values = {kind: coll.mean_cost(ds, m, kind) for kind, _, _ in kinds}
            scaled = {**values, "flops": None if values["flops"] is None else values["flops"] / 1e12}
            cells = [m] + [num(scaled[kind], digits) if digits else _int(scaled[kind]) for kind, _, digits in kinds]
            rec = {"dataset": ds, "method": m, **values}
            if base:
                d_in = _change(values["input_tokens"], base_vals["input_tokens"])
                d_fl = _change(values["flops"], base_vals["flops"])
                cells += [_pct(d_in), _pct(d_fl)]
                rec.update({"input_tokens_change_pct": d_in, "flops_change_pct": d_fl, "baseline": base})
            table.add(*cells)
            records.append(rec)
            data[ds][m] = rec
        table.notes = [
            "Means over the judged queries in the stats files. Cached: of the calls, those answered from the call "
            "cache (no model time: where there are any, latency is not the model's; --no-cache measures it). "
            f"Window: mean size of the windows sent. Tokens: {MISSING} where the reranker counts none (the "
            "simulated reranker without --sim-tokens). Latency: wall seconds per query as recorded (batching across "
            "queries shares them). TFLOPs: estimate 2 x parameters x "
            f"(input + output tokens) / 1e12, {MISSING} where the run did not know its model's size "
            "(--model-params sets it)."
        ]
        if THINKING in kinds:
            table.notes.append("Thinking tokens: spent on thoughts (--thinking), apart from the answer's output "
                               "tokens; the TFLOPs estimate counts them too.")
        tables.append(table)
    return Report(tables, records, data)


def _int(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.0f}"


def _pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:+.1f}%"
