"""BlitzRank (Agrawal, Nguyen, Kiela; ICML 2026): tournament-graph reranking that certifies the top k.

Semantics: docs/methods.md, "Baselines" (the published code at 076018c, where it differs from the paper).
Names here follow acurank's: ``m`` is the window (the paper's w; "Blitz-k20" has m = 20) and ``k`` the number
of documents to certify (the paper's m).

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

from ..params import Option, at_least
from .shared_options import K, MAX_ROUNDS
from ..records import Phase, Ranked, RankingTask, Step, StopReason
from .strategy import Plan, Strategy


@dataclass(frozen=True)
class BlitzRank(Strategy):
    """blitz-kM: windows of m, one per round, until the top k of L are resolved (at most max_rounds calls); first-stage
    scores only order the input, and any list can be reranked (k > n certifies all n)."""

    name: str
    #: the window (from the name: blitz-k20 has m = 20; not an option)
    m: int = Option(domain=at_least(2), flag="--window", cli=False)(20)
    k: int = K(10)
    max_rounds: int = MAX_ROUNDS(50)

    def plan(self, task: RankingTask) -> Plan:
        from .graph import TournamentGraph

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
            (perm,) = yield Step(windows=(tuple(docids[i] for i in window),), phase=Phase.round, iteration=rounds)
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
        yield Step(windows=(), phase=Phase.done, iteration=rounds, uncertain=None, stop=stop)
        return tuple(Ranked(docids[i], None) for i in view.order)
