"""The ``acurank`` command line.

    app       the Typer app, the one error/signal/missing-extra handler (``main(argv) -> exit code``, ``run``)
    options   options shared by several commands (``-m`` is ``--measure`` everywhere), the stderr console
    rerank    rerank, baseline
    eval      eval
    retrieve  index, retrieve, convert
    report    report table | pareto | allocation | trace

``main`` and ``run`` are loaded on first use, so that importing one command's module does not import
every other command's (a command line mounts only the command it names: :data:`app.COMMANDS`).
"""

__all__ = ["main", "run"]


def __getattr__(name: str):
    if name in __all__:
        from . import app as module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
