"""Money: ``--price-in``/``--price-out`` (a million tokens' price) and the cap ``--max-cost X``.

With prices, each query's stats record holds ``money``: its calls' input and output tokens at those prices (a call
taken from the call cache counts at what it cost when it was made: the figure is what the query's answers cost).

The cap is a query-set budget in money beside ``--budget-total`` in calls. A query starts only when what is spent
(the finished queries of this output, resumed ones included), what the queries in flight may still spend (each one's
bound), and the next query's bound together stay within X; a query that does not fit waits for the queries in
flight, and with none in flight, one that does not fit starts nothing more and the summary says how many were left. A query's bound is the most it can cost whatever the
answers: the method's most calls (:meth:`~acurank_cli.method.strategy.Strategy.most_calls`) times the most a call
can cost (the context's tokens at the input price, the answer's budget and the thought's at the output price), so
the cap holds across kills and resumes: a killed query's paid calls are in the call cache, and its bound, reserved
again when it restarts, covers them. The bound is far above what a query usually spends (a call's prompt is rarely
the whole context): a tight cap leaves queries for a resume under a higher one. How many queries start does not
depend on the order answers arrive in: an answer releases a bound and spends at most that bound, so what a waiting
query is held against only falls, to its least once the queries before it have finished (:meth:`Cap.gate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import InputError
from ..params import ParameterError, at_least
from ..method.strategy import Strategy
from ..records import CallTally, QueryOutcome, RankingTask


@dataclass(frozen=True)
class Prices:
    """A million input tokens' price and a million output tokens'."""

    per_million_in: float
    per_million_out: float

    @classmethod
    def of(cls, price_in: float | None, price_out: float | None) -> "Prices | None":
        check_money("price_in", price_in, "--price-in")
        check_money("price_out", price_out, "--price-out")
        if price_in is None and price_out is None:
            return None
        if price_in is None or price_out is None:
            raise InputError("--price-in and --price-out go together (a million input tokens, a million output tokens)")
        return cls(float(price_in), float(price_out))

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.per_million_in + output_tokens * self.per_million_out) / 1e6

    def of_tally(self, tally: CallTally) -> float | None:
        """What a query's calls cost (thought tokens are output tokens); None where it made calls and counted no
        token (a reranker that counts none, as the dry run's bill says: no money, not a money of 0)."""
        if tally.calls and not (tally.input_tokens or tally.output_tokens or tally.reasoning_tokens):
            return None
        return self.cost(tally.input_tokens, tally.output_tokens + tally.reasoning_tokens)


def call_bound(backend: Any, strategy: Strategy, named: str | None = None) -> tuple[int, int]:
    """The most tokens a call can take, in and out: the backend's context, and its answer's budget for a window of
    the method's size m (20 where it has none) plus its thought's (a backend that counts no prompt tokens: refused;
    the run's backend, or a dry run's prompts), the backend held to it (:meth:`~..rerankers.backend.RerankerBase.
    bind_calls`: a server's completions capped there, a thought with no budget refused); ``named``: the reranker as the
    command named it (the run's and its dry run's refusal say it alike)."""
    m = int(getattr(strategy.parameters(), "m", 20) or 20)
    from ..rerankers.backend import innermost

    counting = innermost(backend, lambda b: getattr(b, "builder", None) is not None)
    if counting is None:
        from ..rerankers.backend import counts_tokens

        said = "bounds no call's tokens (no context)" if innermost(backend, counts_tokens) is not None else "counts none"
        raise InputError(f"--max-cost prices tokens, and reranker {named or backend.name} {said} (a listwise LLM bounds them: "
                         "hf:, vllm:, openai:; the simulated reranker with --sim-tokens)")
    counting.bind_calls()  # the bound is what each call may take: a backend whose server would take more caps it
    builder = counting.builder
    allowance = counting.answer_allowance(m) if hasattr(counting, "answer_allowance") else builder.answer_tokens(m)
    return int(builder.context_size), int(allowance) + int(builder.thought_budget)


@dataclass
class Cap:
    """``--max-cost``: which queries may start (see the module's doc)."""

    limit: float
    prices: Prices
    strategy: Strategy
    per_call: tuple[int, int]
    spent: float = 0.0
    reserved: dict[str, float] = field(default_factory=dict)
    left: int = 0
    #: the queries that cost more than their bound (a server that reported more tokens than a call may take: one that
    #: ignores max_tokens, or counts a prompt otherwise than the backend): from the first, none starts (no bound holds)
    over: list = field(default_factory=list)
    #: the least cap that starts the first query left (what was spent and its bound; None: none left, or one cost past
    #: its bound): the summary says it, so a rerun that goes on needs no --dry-run to find it
    least: float | None = None

    def bound(self, task: RankingTask) -> float:
        most = self.strategy.most_calls(task)
        if most is None:  # checked before the run; a plug-in that says nothing of a task is refused here
            raise InputError(f"--max-cost: method {self.strategy.name!r} does not say the most calls it makes")
        return most * self.prices.cost(*self.per_call)

    def gate(self, tasks: Iterable[RankingTask], count: int) -> Iterator[Any]:
        """The tasks that may start, in order. The next starts when what is spent, what the queries in flight may
        still spend and its bound stay within the cap; while some query is in flight it waits for them
        (:data:`~.driver.WAIT`: the driver takes it again once an answer came), and with none in flight the first
        that would pass the cap ends them (``left``: the rest). (It ended at the first that did not fit beside the
        queries in flight: with eight in flight, a run stopped after its first wave.) Once a query has cost more
        than its bound (:attr:`over`), none starts: the queries in flight finish, and the rest are left."""
        from .driver import WAIT

        for started, task in enumerate(tasks):
            bound = self.bound(task)
            while self.over or self.spent + sum(self.reserved.values()) + bound > self.limit + 1e-12:
                if not self.reserved:
                    self.left = count - started
                    self.least = None if self.over else self.spent + bound
                    return
                yield WAIT
            self.reserved[task.qid] = bound
            yield task

    def finished(self, outcome: QueryOutcome) -> float:
        """A query's outcome: its reservation released, its cost spent; returns the cost."""
        cost = self.prices.of_tally(outcome.tally) or 0.0  # under a cap every call counts its tokens
        bound = self.reserved.pop(outcome.qid, None)
        if bound is not None and cost > bound * (1 + 1e-9) + 1e-12:
            self.over.append(outcome.qid)
        self.spent += cost
        return cost


def spent_before(prices: Prices, stats: str | None, done: Iterable[str]) -> float:
    """What an output's finished queries ``done`` cost already, at ``prices``, from their stats records (``stats``:
    the file; None or missing: nothing recorded), so that a resume continues under the cap (the run's :class:`Cap`)
    and its dry run predicts what the cap leaves from the same figure."""
    done = set(done)
    if not done or not stats or not Path(stats).is_file():
        return 0.0
    from ..io.run_files import read_stats

    return sum(prices.cost(rec.input_tokens or 0, (rec.output_tokens or 0) + (rec.reasoning_tokens or 0))
               for qid, rec in read_stats(stats).items() if qid in done)


def check_money(name: str, value: float | None, flag: str) -> None:
    """A price, a cap or a noise: a number >= 0, finite as every :class:`~..params.Domain` (NaN passes a bound, as
    every comparison with it is false: ``--max-cost nan`` capped nothing and ``--price-in nan`` billed NaN)."""
    domain = at_least(0.0, integer=False)
    if value is not None and not domain.contains(value):
        raise ParameterError(name, value, domain.describe(), flag=flag)


def check_cap(strategy: Strategy, prices: Prices | None, limit: float | None) -> None:
    """``--max-cost`` needs prices and a method that says its most calls (before anything is read)."""
    check_money("max_cost", limit, "--max-cost")
    if limit is None:
        return
    if prices is None:
        raise InputError("--max-cost is money: give --price-in and --price-out (a million tokens' price)")
    if type(strategy).most_calls is Strategy.most_calls:
        raise InputError(f"--max-cost: method {strategy.name!r} does not say the most calls it makes on a query "
                         "(acurank, acurank-N and acurank-H, sliding windows, TourRank and the static TrueSkill methods "
                         "do), so no query's cost can be bounded")
    if strategy.lockstep:
        raise InputError(f"--max-cost: method {strategy.name!r} advances every query together, so no query can be "
                         "left unstarted; give a per-query budget")


__all__ = ["Cap", "Prices", "call_bound", "check_cap", "check_money"]
