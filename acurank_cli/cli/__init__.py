"""The ``acurank`` command line.

    app       the Typer app, the one error/signal/missing-extra handler (``main(argv) -> exit code``, ``run``)
    options   options shared by several commands (``-m`` is ``--measure`` everywhere), the stderr console
    rerank    rerank, baseline
    eval      eval
    retrieve  index, retrieve, convert
    report    report table | pareto | allocation | trace
"""

from .app import app, main, run

__all__ = ["app", "main", "run"]
