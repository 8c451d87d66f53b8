"""User-facing errors: one line naming file and line; the CLI turns them into exit code 2."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: reported as ``file:line: message`` without a traceback (a ``ValueError`` for API callers)."""

    def __init__(self, message: str, source: str | None = None, line: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source or ""
        if where and self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}" if where else self.message

    def cli(self) -> str:
        """The message as the command line shows it (subclasses name flags where the API names keywords)."""
        return str(self)
