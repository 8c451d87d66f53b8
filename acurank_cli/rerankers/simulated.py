"""The simulated reranker: qrels grade plus seeded Gaussian noise per (window, doc), as specified."""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..errors import InputError
from ..records import RerankRequest, RerankResult
from ..params import ANY_INT, at_least
from .base import RerankerBase, option, register

_NORMAL = statistics.NormalDist()


def simulated_scores(qid: str, window: Sequence[str], grades: dict[str, int], noise: float, seed: int) -> list[float]:
    """score(d) = g(d) + noise * z, z from sha256("acurank-sim|seed|qid|window|d")."""
    joined = ",".join(window)
    scores = []
    for d in window:
        key = f"acurank-sim|{seed}|{qid}|{joined}|{d}"
        u = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16) / 2**64
        z = _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))
        scores.append(grades.get(d, 0) + noise * z)
    return scores


def simulated_order(qid: str, window: Sequence[str], grades: dict[str, int], noise: float, seed: int) -> tuple[int, ...]:
    """Positions by score descending, ties by smaller position."""
    scores = simulated_scores(qid, window, grades, noise, seed)
    return tuple(sorted(range(len(window)), key=lambda i: (-scores[i], i)))


@dataclass
class SimulatedReranker(RerankerBase):
    """A research device: orders a window by noisy qrels grades (needs ``--qrels``)."""

    qrels: dict[str, dict[str, int]]
    noise: float = 1.0
    seed: int = 0
    name: str = field(default="simulated")
    needs_texts: bool = False

    def fingerprint(self) -> dict[str, Any]:
        """The oracle's settings and its qrels (a run with other noise, seed or qrels is another run)."""
        grades = json.dumps(self.qrels, sort_keys=True).encode("utf-8")
        return {"backend": "simulated", "noise": self.noise, "seed": self.seed,
                "qrels": hashlib.sha256(grades).hexdigest()}

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        """Order every window by its simulated scores."""
        return [
            RerankResult(simulated_order(r.qid, r.docids, self.qrels.get(r.qid, {}), self.noise, self.seed))
            for r in requests
        ]


@dataclass(frozen=True)
class SimulatedOptions:
    qrels: Optional[dict] = option(None, "the grades (from --qrels)", cli=False)
    sim_noise: float = option(1.0, "noise of the grades (Gaussian sd)", domain=at_least(0.0, integer=False))
    sim_seed: int = option(0, "seed of the noise", domain=ANY_INT)


@register("simulated", takes_arg=False, help="noisy qrels oracle (needs --qrels)", needs_texts=False,
          options=SimulatedOptions)
def _factory(arg: str, options: SimulatedOptions) -> SimulatedReranker:
    if not options.qrels:
        raise InputError("the simulated reranker needs qrels: it orders windows by noisy grades "
                         "(CLI: --qrels FILE; API: qrels={qid: {docid: grade}})")
    return SimulatedReranker(
        options.qrels, noise=options.sim_noise, seed=options.sim_seed,
        name=f"simulated(noise={options.sim_noise},seed={options.sim_seed})",
    )
