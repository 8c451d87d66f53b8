"""``acurank report provenance``: each run's recorded software and model (its meta file's ``provenance``), one
row per run, so that a table's figures can be told apart by what made them."""

from __future__ import annotations

from ..errors import InputError
from ..io.meta_file import MetaFile
from .render import Table
from .render import Report

COLUMNS = ["run", "method", "parameters", "acurank", "source", "python", "engines", "backend", "model",
           "revision / weights", "device", "dtype", "prompt", "started", "command"]


def _row(run: str) -> tuple[list[str], dict]:
    path = MetaFile.path_for(run)
    if not path.is_file():
        raise InputError(f"has no {path.name} (provenance is recorded by rerank and baseline)", run)
    meta = MetaFile.find(run)  # read once
    prov = meta.provenance if meta is not None else None
    fingerprint = meta.fingerprint if meta is not None else {}
    method, params = fingerprint.get("method", ""), fingerprint.get("params") or {}
    shown = ", ".join(f"{k}={v}" for k, v in sorted(params.items()) if v is not None)
    if not prov:
        return [run, method, shown, "not recorded (made before provenance was, or an unreadable meta file)",
                *[""] * (len(COLUMNS) - 4)], {"run": run, "method": method, "params": params}
    rr = prov.get("reranker", {})
    engines = ", ".join(f"{k} {v}" for k, v in prov.get("packages", {}).items() if k not in ("numpy", "numba", "trueskill",
                                                                                               "httpx"))
    revision = rr.get("revision") or rr.get("weights_sha256") or rr.get("gguf_sha256") or rr.get("package") or ""
    source = prov.get("source") or {}
    row = [run, method, shown, prov.get("acurank", ""), source.get("git") or source.get("build") or "",
           prov.get("python", ""), engines or "-", rr.get("backend", ""), str(rr.get("model", "")),
           _short(str(revision)), rr.get("device", ""), rr.get("dtype", ""), rr.get("prompt_format", ""),
           prov.get("started") or "", prov.get("command") or ""]
    return row, {"run": run, "method": method, "params": params, **prov}


def _short(value: str) -> str:
    """A commit or sha256 shortened to 12 hex digits (as git shows one); anything else as it is."""
    hexdigits = set("0123456789abcdef")
    return value[:12] if len(value) >= 40 and set(value) <= hexdigits else value


def provenance_report(runs: list[str]) -> Report:
    table = Table("Provenance", list(COLUMNS), align=["l"] * len(COLUMNS))
    records, data = [], {}
    for run in runs:
        row, record = _row(run)
        table.add(*row)
        records.append(dict(zip(COLUMNS, row)))
        data[run] = record
    table.notes.append("engines: the packages that decide answers, at the versions the run loaded; a resume refuses "
                       "a change of one of them or of the model's revision")
    return Report([table], records, data)
