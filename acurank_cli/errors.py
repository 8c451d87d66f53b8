"""User-facing errors: one line naming file and line; the CLI turns them into exit code 2."""

from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """Bad input: reported as ``file:line: message`` without a traceback (a ``ValueError`` for API callers).

    ``field``: the setting the message is about, as the entrance that raised it names it (a flag, an API keyword, a
    request field), where an entrance reports it apart from the message (serve's 400 names its field)."""

    #: the refusal is about a call's documents, as a list or as the tasks they make (a server says it of its request's
    #: ``documents``): set where a call is admitted (:func:`acurank_cli.run.request.admit`)
    of_documents = False
    #: the (query id, document id) a refusal about one first-stage candidate is of, so that a reader that knows the
    #: file finds its line (:func:`acurank_cli.io.runs.placed`); None: about no one candidate
    about: tuple[str, str] | None = None
    #: the query (its id) of a call's several that a refusal of one request is about, for an entrance that names it
    #: (:meth:`acurank_cli.api.Reranker.rerank_batch`: ``query b: ...``); None: about the call
    query: str | None = None

    def __init__(self, message: str, source: str | None = None, line: int | None = None, *, field: str | None = None):
        self.message = message
        self.source = source
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}" if where else self.message

    def cli(self) -> str:
        """The message as the command line shows it (subclasses name flags where the API names keywords)."""
        return str(self)

    def said_to(self, fields: Any = ()) -> str:
        """The message without its file, as a server says it: its own settings as the flags it was started with, a
        request's ``fields`` by their names (a plain message as it is)."""
        return self.message


class WriteFailed(InputError):
    """An output that could not be written (a full disk, a quota, a read-only file system, an I/O error): one line
    naming the file and the system's reason, exit 74 (``EX_IOERR``); what was finished before stays written."""

    exit_code = 74

    def __init__(self, name: str, exc: OSError):
        import errno

        code = errno.errorcode.get(exc.errno or 0)
        reason = exc.strerror or str(exc) or type(exc).__name__
        super().__init__(f"cannot write: {reason}{f' ({code})' if code else ''}", name)


class Stopped(Exception):
    """A CLI job stopped and has printed its one line (why, and where its finished work is): the command exits
    with ``exit_code`` (2: bad input; 128 + N: signal N) and prints nothing more."""

    def __init__(self, exit_code: int):
        super().__init__(exit_code)
        self.exit_code = exit_code


class OptionError(InputError):
    """A message that names options: ``str()`` (what API callers see) names the keywords, :meth:`cli` the flags.

    ``template`` writes each option as ``{keyword}``; ``options`` gives its flag (``budget_total="--budget-total"``
    -> ``budget_total`` / ``--budget-total``) or its flag and the value given (``tokenizer=("--tokenizer", "x")``
    -> ``tokenizer='x'`` / ``--tokenizer x``), or both spellings (``{"api": "cache=None", "cli": "--no-cache"}``).
    Other braces in the template are doubled, as in ``str.format``.
    """

    def __init__(self, template: str, source: str | None = None, line: int | None = None, **options: Any):
        self.template, self.options = template, options
        super().__init__(self._text(api=True), source, line)

    def _text(self, api: bool) -> str:
        return name_options(self.template, self.options, api)

    def cli(self) -> str:
        return str(InputError(self._text(api=False), self.source, self.line))

    def said_to(self, fields: Any = ()) -> str:
        return name_options(self.template, self.options, False, api_keys=frozenset(fields))

    @staticmethod
    def literal(text: str) -> str:
        """``text`` to put in a template as it is (its braces doubled)."""
        return str(text).replace("{", "{{").replace("}", "}}")


_UNSET = object()


def name_options(template: str, options: dict[str, Any], api: bool, api_keys: frozenset = frozenset()) -> str:
    """``template`` with each ``{keyword}`` written as the API names it (``api``, or a keyword of ``api_keys``: a
    request's own fields) or as the CLI does (its flag)."""
    if not options:
        return template
    names = {}
    for keyword, spec in options.items():
        named = api or keyword in api_keys
        if isinstance(spec, dict):  # spelt out both ways: {"api": "cache=None", "cli": "--no-cache"}
            names[keyword] = spec["api" if named else "cli"]
            continue
        flag, value = spec if isinstance(spec, tuple) else (spec, _UNSET)
        if named:
            names[keyword] = keyword if value is _UNSET else f"{keyword}={value!r}"
        else:
            names[keyword] = flag if value is _UNSET else f"{flag} {value}"
    return template.format(**names)
