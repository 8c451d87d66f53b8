"""The tournament graph of a query's answers: an edge u -> v for "u was ranked directly above v", kept as
its transitive closure, and what follows from it for every candidate (BlitzRank's in/out-reach; acurank-auto's
transitive evidence). Semantics: docs/methods.md ("Baselines", BlitzRank).

For a candidate u (paths of length >= 1; u itself never counted): D(u) reachable from u, A(u) reaching u,
s(u) = |A(u) & D(u)| (the rest of u's strongly connected component: the answers contradicted each other
around u), in(u) = |A(u)| - s(u) (candidates provably above u's component), out(u) = |D(u)| - s(u);
u is resolved when |A(u) | D(u)| >= n - 1 (its relation to every other candidate is known).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from .compiled import jit


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


#: The rows of :attr:`TournamentGraph.tally`, per candidate u: |A(u)|, |D(u)|, s(u), |A(u) | D(u)|.
ABOVE, BELOW, SAME, KNOWN = range(4)


class TournamentGraph:
    """The directed graph of "ranked directly above" edges, kept as its transitive closure, and per candidate the
    counts the closure implies, kept as edges arrive."""

    def __init__(self, n: int):
        #: reach[u, v]: v is reachable from u by a path of length >= 1 (u itself only on a cycle)
        self.reach = np.zeros((n, n), dtype=bool)
        #: per candidate u (u itself never counted): |A(u)|, |D(u)|, s(u) = |A(u) & D(u)|, |A(u) | D(u)|; counted
        #: as each entry of ``reach`` turns true, so reading them costs nothing (a pass over the n x n closure each
        #: iteration did)
        self.tally = np.zeros((4, n), dtype=np.int64)

    def add_order(self, order: Sequence[int]) -> None:
        """An answer, best first: its adjacent pairs as edges (the closure implies every other pair)."""
        _add_chain(self.reach, self.tally, np.asarray(order, dtype=np.intp))

    def levels(self) -> Levels:
        """in, out, component size and resolution of every candidate (from the closure)."""
        above, below, same, known = self.tally
        n = len(self.reach)
        return Levels(above - same, below - same, same.copy(), known >= n - 1, _components(self.reach))

    def view(self) -> GraphView:
        """BlitzRank's reading: L by (in, out, first-stage position), who is resolved, the components."""
        lv = self.levels()
        order = np.lexsort((np.arange(len(self.reach)), lv.n_out, lv.n_in))
        return GraphView(tuple(int(i) for i in order), lv.resolved, lv.component)


# The closure's operations, compiled (booleans and counts: exact, whatever the compiler does). One answer adds
# n - 1 edges to an n x n closure; in Python each edge was a numpy call or more, the largest cost of
# acurank-auto's engine after its rating updates.
@jit()
def _add_chain(reach, tally, order):  # pragma: no cover - compiled (tested through TournamentGraph)
    """For each adjacent pair u, v of ``order`` in turn, the edge u -> v: every s reaching u (and u) now reaches v
    and everything v reaches (nothing to do when u already reaches v). Each entry reach[s, c] that turns true
    (s != c) puts s in A(c) and c in D(s); if c already reached s the two are now on a cycle (each in the other's
    s), else they are newly related (each in the other's A | D)."""
    n = reach.shape[0]
    targets = np.empty(n, dtype=np.intp)
    for j in range(order.size - 1):
        u = order[j]
        v = order[j + 1]
        if reach[u, v]:
            continue
        t = 0
        for c in range(n):  # v and everything v reaches
            if reach[v, c] or c == v:
                targets[t] = c
                t += 1
        for s in range(n):
            if s == u or reach[s, u]:
                for i in range(t):
                    c = targets[i]
                    if not reach[s, c]:
                        reach[s, c] = True
                        if s != c:
                            tally[ABOVE, c] += 1
                            tally[BELOW, s] += 1
                            row = SAME if reach[c, s] else KNOWN
                            tally[row, s] += 1
                            tally[row, c] += 1


@jit()
def _components(reach):  # pragma: no cover - compiled
    """The earliest member of every candidate's component: itself, or the first w on a cycle with it."""
    n = reach.shape[0]
    component = np.empty(n, dtype=np.int64)
    for u in range(n):
        component[u] = u
        for w in range(u):
            if reach[u, w] and reach[w, u]:
                component[u] = w
                break
    return component
