"""``acurank report``: effectiveness/efficiency tables, significance, Pareto plots, adaptive-allocation
analysis and rating traces over finished runs.

Modules: ``collection`` (finding and loading runs, stats and qrels), ``significance`` (paired t-test,
sign-flip randomisation test, Spearman), ``tables`` (the method x dataset table), ``render`` (terminal,
Markdown, CSV, LaTeX, JSON), ``pareto``, ``allocation`` (WIG, easy/hard split), ``trace_plot`` and
the commands themselves are in :mod:`acurank_cli.cli.report`.
"""
