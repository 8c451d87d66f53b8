"""The closed sets of choices a method parameter takes (rating init, updater, partition, stop rule,
uncertainty rule): str enums, so a flag, a config value or a keyword may give them as their plain values."""

from __future__ import annotations

import enum


class Init(str, enum.Enum):
    """How ratings start: first-stage score (mu = score, sigma = mu/3), z-scored, or uniform."""

    score = "score"
    zscore = "zscore"
    uniform = "uniform"


class Updater(str, enum.Enum):
    """Which implementation of the multiplayer TrueSkill update to use (bit-identical results)."""

    library = "library"
    fast = "fast"


class Partition(str, enum.Enum):
    """How the uncertain set C is cut into groups of m: in s_i order, or shuffled (ablation)."""

    sequential = "sequential"
    random = "random"


class StopRule(str, enum.Enum):
    """When to stop: |C| < tau (then one final pass), or top-k unchanged after an iteration."""

    uncertain = "uncertain"
    topk_stable = "topk-stable"


class Uncertainty(str, enum.Enum):
    """How AcuRank picks the uncertain set C each iteration (see :mod:`acurank_cli.method.uncertainty`)."""

    threshold = "threshold"
    exact = "exact"
    entropy = "entropy"


class Pool(str, enum.Enum):
    """Whose answers acurank-auto learns the reranker's noise from: the whole run's, or each query's alone."""

    run = "run"
    query = "query"


class Outcome(str, enum.Enum):
    """What a window's answer tells the ratings: its order (the paper), or its order graded by how sure the
    reranker was (answers that carry scores: --answer logits, the simulated reranker)."""

    order = "order"
    graded = "graded"
