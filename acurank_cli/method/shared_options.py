"""Method options, each declared once: its keyword, flag, help, value kind and domain.

A method family's parameters record (``AcuRankParams``, ``SlidingWindows``, ...) makes each option field
with the declaration (``K(10)``: the option ``k`` with this family's default 10). From those records alone
come the ``rerank``/``baseline`` flags, the API's keywords, the defaults shown in help, and the check that
refuses an option a method does not use (:mod:`acurank_cli.method.registry`, through the one options table of
:class:`~acurank_cli.plugins.Registry`). Two families that take the
same option share its one declaration, so a flag never means two things; a plug-in method declares its
own options here the same way (:class:`Option`). No numpy: the CLI reads these to build its flags.
"""

from __future__ import annotations

from ..params import ANY_INT, Option, at_least, between
from .choices import Init, Outcome, Partition, StopRule, Uncertainty, Updater


# -- the options several built-in families share (an option of one family alone is declared in its record,
# -- one line: ``name: kind = Option("name", kind, "help", domain)(default)``) ------------------------------

K = Option("k", int, "cutoff k: AcuRank's top k (s_i sums to k), BlitzRank's certified top k", at_least(1))
EPS = Option("eps", float, "AcuRank tolerance eps: C = {eps < s_i < 1 - eps}",
             between(0.0, 0.5, lo_open=True, hi_open=True))
TAU = Option("tau", int, "AcuRank stop threshold tau: |C| < tau ends with a final pass (0: never)", at_least(0))
WINDOW = Option("m", int, "window size m (a window of one document is never sent)", at_least(2), "--window")
BUDGET = Option("budget", int, "AcuRank cap B on adaptive groups", at_least(0))
MAX_ROUNDS = Option("max_rounds", int, "cap R on sequential reranker rounds (AcuRank: the initial pass is round 1, "
                    "each iteration one more, the last a final pass; BlitzRank: one call a round)", at_least(1),
                    "--max-rounds")
INIT = Option("init", Init, "rating init: score (mu = score, sigma = mu/3), zscore, uniform; a run file's scores "
              "start as the default says, documents (the API, serve, mcp) from zscore; with a calibration map, as the "
              "map's did")
SIGMA = Option("sigma", str, "initial sigma: mu/3 (the paper), mu/2, mu/D or fixed:V (the variance ablation)")
PARTITION = Option("partition", Partition, "cut C into groups in s_i order or shuffled")
STOP = Option("stop", StopRule, "stop rule: uncertain (|C| < tau) or topk-stable")
UNCERTAINTY = Option("uncertainty", Uncertainty, "AcuRank's uncertain set: threshold (the paper's s_i = P(x_i > t)), "
                     "exact (p_i = P(rank <= k)) or entropy (of the rank distribution truncated at k)")
SEED = Option("seed", int, "seed for shuffles (TourRank, random partition)", ANY_INT)
UPDATER = Option("updater", Updater, "TrueSkill update: fast (compiled, bit-identical) or library (trueskill.rate)")
BUDGET_TOTAL = Option("budget_total", str, "query-set budget: Bx (B calls per query on average over the run, e.g. 9x) "
                      "or a total; after every query's initial pass, optional iterations go to the queries whose top "
                      "k is most uncertain, --budget-wave at a time (every query is in memory at once: the run's memory grows with "
                      "it)", flag="--budget-total")
BUDGET_WAVE = Option("budget_wave", int, "with --budget-total: iterations granted per allocation wave", at_least(1),
                     "--budget-wave")
OUTCOME = Option("outcome", Outcome, "what an answer tells the ratings: its order (the paper), or graded: each adjacent "
                 "pair's TrueSkill factor softened by the reranker's confidence sigmoid(s_i - s_j) when the answer "
                 "carries scores (--answer logits, the simulated reranker); needs --updater fast")
