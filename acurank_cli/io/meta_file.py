"""``X.run.meta.json``, the file beside a run that says what made it: the one record that reads and writes it.

Its fields: ``fingerprint`` (method, parameters, reranker, inputs: what a resume must match), ``digest`` and
``command_digest`` (digests of it, whole and without the query set), ``provenance`` (software and model,
:mod:`acurank_cli.run.provenance`) and, for a part of a sharded run, ``shard`` (its place and the unsharded input's
query order, :mod:`.shards`). Every reader and writer of the file goes through :class:`MetaFile`: the resume check,
the merge of shards, ``report provenance`` and ``report``'s check of unfinished runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .plan import write_whole

#: the fields :class:`MetaFile` knows; any other a file holds is kept in ``other`` and written back
KNOWN = ("fingerprint", "digest", "command_digest", "provenance", "shard")


class Unreadable(ValueError):
    """The meta file exists but is not a JSON object with a fingerprint."""


@dataclass(frozen=True)
class MetaFile:
    """What made a run (see the module doc); ``fingerprint`` is the defining field."""

    fingerprint: dict[str, Any]
    digest: str | None = None
    command_digest: str | None = None
    provenance: dict[str, Any] | None = None
    shard: dict[str, Any] | None = None
    other: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def path_for(run: str | Path) -> Path:
        """``X.run`` -> ``X.run.meta.json``."""
        p = Path(run)
        return p.with_name(p.name + ".meta.json")

    @classmethod
    def read(cls, run: str | Path) -> "MetaFile":
        """The meta file beside ``run``: FileNotFoundError when there is none, :class:`Unreadable` when it is not
        one (other OSErrors as raised)."""
        try:
            recorded = json.loads(cls.path_for(run).read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise Unreadable(str(exc)) from None
        except json.JSONDecodeError as exc:
            raise Unreadable(str(exc)) from None
        if not isinstance(recorded, dict) or not isinstance(recorded.get("fingerprint"), dict):
            raise Unreadable("no fingerprint")
        return cls(**{k: recorded.get(k) for k in KNOWN},
                   other={k: v for k, v in recorded.items() if k not in KNOWN})

    @classmethod
    def find(cls, run: str | Path) -> "MetaFile | None":
        """The meta file beside ``run``, or None: none (a run made elsewhere, standard output) or unreadable."""
        if str(run) == "-":
            return None
        try:
            return cls.read(run)
        except (OSError, Unreadable):
            return None

    def write(self, run: str | Path) -> None:
        """Write it beside ``run`` whole (through a temporary file: a crash leaves the old one or the new)."""
        out = {**self.other, "fingerprint": self.fingerprint, "digest": self.digest,
               "command_digest": self.command_digest}
        out.update({k: getattr(self, k) for k in ("provenance", "shard") if getattr(self, k) is not None})
        write_whole(self.path_for(run), json.dumps(out, indent=1, sort_keys=True) + "\n")

    @property
    def expected_queries(self) -> int | None:
        """The queries the run was made for (None: not recorded)."""
        queries = (self.fingerprint.get("inputs") or {}).get("queries")
        return queries if isinstance(queries, int) else None

    def unfinished(self, queries: int) -> str | None:
        """``"18 of 54 queries"`` when the run was made for more queries than the ``queries`` it holds."""
        expected = self.expected_queries
        return None if expected is None or queries >= expected else f"{queries} of {expected} queries"

    @property
    def backend(self) -> str | None:
        reranker = self.fingerprint.get("reranker")
        return reranker.get("backend") if isinstance(reranker, dict) else None

    @property
    def simulated(self) -> bool:
        """Made by the simulated reranker (a qrels oracle), not a model."""
        return self.backend == "simulated"
