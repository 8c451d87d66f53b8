"""The one maker of rich consoles: text printed as text.

What the package shows (file names, ids, queries, passages, table cells) is the user's text, so no console
interprets it: no markup (``[b]``), no emoji codes (``:fire:`` stays ``:fire:``, ``l100.run:100:`` stays as it
is), no highlighting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def text_console(**options) -> "Console":
    """A rich console (``options`` as rich's: ``stderr``, ``file``, ``width``, ``soft_wrap``, ``quiet``) that
    interprets nothing it prints, and redacts secrets in every text it prints (:mod:`acurank_cli.redaction`)."""
    from rich.console import Console

    from .redaction import text as redacted

    class RedactingConsole(Console):
        def print(self, *objects, **kwargs) -> None:  # noqa: A003 - rich's name
            super().print(*(redacted(o) if isinstance(o, str) else o for o in objects), **kwargs)

    return RedactingConsole(markup=False, emoji=False, highlight=False, **options)
