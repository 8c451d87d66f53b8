"""``acurank report provenance``: each run's recorded software and model (its meta file's ``provenance``), one
row per run, so that a table's figures can be told apart by what made them."""

from __future__ import annotations

from ..errors import InputError
from ..io.outputs import meta_path_for, recorded_provenance
from .render import Table
from .tables import Report

COLUMNS = ["run", "acurank", "python", "engines", "backend", "model", "revision / weights", "device", "dtype",
           "prompt"]


def _row(run: str) -> tuple[list[str], dict]:
    meta = meta_path_for(run)
    if not meta.is_file():
        raise InputError(f"has no {meta.name} (provenance is recorded by rerank and baseline)", run)
    prov = recorded_provenance(run)
    if not prov:
        return [run, "not recorded (made before provenance was, or an unreadable meta file)", "", "", "", "", "", "", "", ""], {"run": run}
    rr = prov.get("reranker", {})
    engines = ", ".join(f"{k} {v}" for k, v in prov.get("packages", {}).items() if k not in ("numpy", "trueskill",
                                                                                               "httpx"))
    revision = rr.get("revision") or rr.get("weights_sha256") or rr.get("gguf_sha256") or rr.get("package") or ""
    row = [run, prov.get("acurank", ""), prov.get("python", ""), engines or "-", rr.get("backend", ""),
           str(rr.get("model", "")), _short(str(revision)), rr.get("device", ""), rr.get("dtype", ""),
           rr.get("prompt_format", "")]
    return row, {"run": run, **prov}


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
