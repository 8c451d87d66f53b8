"""The paper: strategies that decide which windows to rerank, and the maths they rest on.

    acurank_params  the parameters in the paper's names and their choices (no numpy)
    registry      method name -> strategy (METHODS; the built-in families in families: acurank, acurank-H, acurank-9, sw-x, tourrank-x, ts-c1-..., blitz-kW)
    strategy      the Strategy protocol (a plan yields Steps of windows, receives permutations)
    trueskill     ratings N(mu, sigma^2): init from first-stage scores, the update per reranked window
    trueskill_fast  the same update, compiled (numba) and bit-identical
    uncertainty   t with sum_i P(x_i > t) = k, s_i, and the exact / entropy rules
    acurank       Algorithm 1
    baselines     sliding windows, TourRank, TrueSkill-Static
    blitz         BlitzRank: a tournament graph, one window per round, until the top k is certified

This package imports only :mod:`acurank_cli.records`, the two leaf modules ``errors`` and ``params`` and ``plugins``;
importing it loads nothing (the registry and the modules below load on first use).
"""
