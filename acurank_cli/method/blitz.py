"""BlitzRank (Agrawal, Nguyen, Kiela; ICML 2026): tournament-graph reranking that certifies the top k.

Semantics: ``shared/spec/blitzrank-semantics.md`` (the published code at 076018c, where it differs from the
paper). Names here follow acurank's: ``m`` is the window (the paper's and the spec's w; "Blitz-k20" has
m = 20) and ``k`` the number of documents to certify (the spec's m).

Each answer adds the edges pi[0] -> pi[1] -> ... of its order to a directed graph G over the n candidates.
After every call, over all candidates: D(u) and A(u) (reachable from u, reaching u; u itself never
counted), s(u) = |A(u) & D(u)| (the rest of u's strongly connected component), in(u) = |A(u)| - s(u),
out(u) = |D(u)| - s(u); u is resolved when |A(u) | D(u)| >= n - 1. L sorts the candidates by
(in, out, first-stage position), all ascending. The query stops when the first k of L are resolved;
otherwise the next window walks L, skipping resolved candidates and every candidate whose component
already has a member in the window, until m are taken (that is also the next presentation order).

One window per round: every call depends on the previous answer. First-stage scores are never used, only
the first-stage order. The output is all of L: its first k are BlitzRank's certified top k (the published
code outputs only those); the rest follow in L's order (acurank's choice, so that a run keeps all n
candidates). The published code raises after 50 rounds or when it would present the same set twice; here
the query stops with L as it stands and the stop reason says why (``round-cap``, ``repeated-window``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ..params import at_least, check_domains, param
from ..records import Phase, Ranked, RankingTask, Step, StopReason
from .base import Plan


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

    def view(self) -> GraphView:
        n = len(self.reach)
        off_diagonal = ~np.eye(n, dtype=bool)
        below = self.reach & off_diagonal  # D(u) per row
        above = below.T  # A(u) per row
        same = below & above  # u's component without u
        s = same.sum(axis=1)
        n_in = above.sum(axis=1) - s
        n_out = below.sum(axis=1) - s
        resolved = (below | above).sum(axis=1) >= n - 1
        component = np.argmax(same | ~off_diagonal, axis=1)  # first True: the earliest member
        order = np.lexsort((np.arange(n), n_out, n_in))
        return GraphView(tuple(int(i) for i in order), resolved, component)


@dataclass(frozen=True)
class BlitzRank:
    """blitz-kM: windows of m, one per round, until the top k of L are resolved (at most max_rounds calls)."""

    init: ClassVar[None] = None  # first-stage scores only order the input

    name: str
    m: int = param(20, at_least(2), flag="--window")
    k: int = param(10, at_least(1))
    max_rounds: int = param(50, at_least(1), flag="--max-rounds")

    def __post_init__(self) -> None:
        check_domains(self)

    def check(self, task: RankingTask) -> None:
        """Any list can be reranked (k > n certifies all n)."""

    def plan(self, task: RankingTask) -> Plan:
        docids = [c.docid for c in task.candidates]
        n = len(docids)
        if n == 0:
            return ()
        graph = TournamentGraph(n)
        k = min(self.k, n)
        window = list(range(min(self.m, n)))
        rounds = 0
        while True:
            rounds += 1
            (perm,) = yield Step((tuple(docids[i] for i in window),), Phase.round, rounds)
            graph.add_order([window[j] for j in perm])
            view = graph.view()
            if view.certified(k):
                stop = StopReason.certified
                break
            following = view.schedule(self.m)
            if set(following) == set(window):
                stop = StopReason.repeated_window
                break
            if rounds >= self.max_rounds:
                stop = StopReason.round_cap
                break
            window = following
        yield Step((), Phase.done, rounds, None, stop)
        return tuple(Ranked(docids[i], None) for i in view.order)
