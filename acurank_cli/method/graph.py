"""The tournament graph of a query's answers: an edge u -> v for "u was ranked directly above v", kept as
its transitive closure, and what follows from it for every candidate (BlitzRank's in/out-reach; acurank-auto's
transitive evidence). Semantics: ``shared/spec/blitzrank-semantics.md``.

For a candidate u (paths of length >= 1; u itself never counted): D(u) reachable from u, A(u) reaching u,
s(u) = |A(u) & D(u)| (the rest of u's strongly connected component: the answers contradicted each other
around u), in(u) = |A(u)| - s(u) (candidates provably above u's component), out(u) = |D(u)| - s(u);
u is resolved when |A(u) | D(u)| >= n - 1 (its relation to every other candidate is known).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Levels:
    """Per candidate: in(u), out(u), s(u), whether u is resolved, and its component's earliest member."""

    n_in: np.ndarray
    n_out: np.ndarray
    s: np.ndarray
    resolved: np.ndarray
    component: np.ndarray


@dataclass(frozen=True)
class GraphView:
    """What BlitzRank reads off its graph after a call: L, who is resolved, and each component's representative."""

    #: candidate positions sorted by (in, out, position) ascending: the order L
    order: tuple[int, ...]
    resolved: np.ndarray
    #: per candidate, its component's member earliest in first-stage order
    component: np.ndarray

    def certified(self, k: int) -> bool:
        """The first k of L are all resolved."""
        return bool(self.resolved[list(self.order[:k])].all())

    def schedule(self, m: int) -> list[int]:
        """The next window: walking L, unresolved candidates of components not yet taken, at most m."""
        taken: list[int] = []
        components: set[int] = set()
        for u in self.order:
            if self.resolved[u] or int(self.component[u]) in components:
                continue
            taken.append(u)
            components.add(int(self.component[u]))
            if len(taken) == m:
                break
        return taken


class TournamentGraph:
    """The directed graph of "ranked directly above" edges, kept as its transitive closure."""

    def __init__(self, n: int):
        #: reach[u, v]: v is reachable from u by a path of length >= 1 (u itself only on a cycle)
        self.reach = np.zeros((n, n), dtype=bool)

    def add_edge(self, u: int, v: int) -> None:
        """Add u -> v: everything reaching u (and u) now reaches v and everything v reaches."""
        if self.reach[u, v]:
            return  # already implied: the closure is unchanged
        sources = self.reach[:, u].copy()
        sources[u] = True
        targets = self.reach[v].copy()
        targets[v] = True
        self.reach[sources] |= targets

    def add_order(self, order: Sequence[int]) -> None:
        """An answer, best first: its adjacent pairs as edges (the closure implies every other pair)."""
        for a, b in zip(order, order[1:]):
            self.add_edge(a, b)

    def levels(self) -> Levels:
        """in, out, component size and resolution of every candidate (from the closure)."""
        n = len(self.reach)
        off_diagonal = ~np.eye(n, dtype=bool)
        below = self.reach & off_diagonal  # D(u) per row
        above = below.T  # A(u) per row
        same = below & above  # u's component without u
        s = same.sum(axis=1)
        component = np.argmax(same | ~off_diagonal, axis=1)  # first True: the earliest member
        return Levels(above.sum(axis=1) - s, below.sum(axis=1) - s, s, (below | above).sum(axis=1) >= n - 1, component)

    def view(self) -> GraphView:
        """BlitzRank's reading: L by (in, out, first-stage position), who is resolved, the components."""
        lv = self.levels()
        order = np.lexsort((np.arange(len(self.reach)), lv.n_out, lv.n_in))
        return GraphView(tuple(int(i) for i in order), lv.resolved, lv.component)
