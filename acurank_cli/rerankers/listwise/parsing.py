"""Turning a listwise model's answer (``[2] > [1] > [3]``) into a permutation, as the published code does.

Identifiers written with other digits are read as the digits they are (:func:`ascii_digits`): full-width and
other scripts' decimal digits (``［１］``), superscripts and subscripts (``[¹²]`` is 12), and numbers that are one
character (circled ``⑫``, negative circled ``⓬``, parenthesised ``⑿``, ``⒓``), each a number of its own.

The published rule: every non-digit character is a separator; the digit runs are identifiers
(1-based); a repeated identifier keeps its first place; identifiers outside ``1..n`` are dropped;
identifiers never mentioned are appended in presented order; an empty answer keeps the presented
order. Never fatal. Each answer is also counted as

* ``ok``: the identifiers read were exactly ``1..n``, each once;
* ``repaired``: something usable, but repeats, out-of-range or missing identifiers were fixed;
* ``unparseable``: no identifier in range at all; the presented order is kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from ...records import ParseStatus

_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class ParsedRanking:
    """A parsed answer: ``order`` (0-based window positions, best first) and what it took."""

    order: tuple[int, ...]
    status: ParseStatus
    mentioned: int  # distinct valid identifiers the answer named
    dropped: int  # out-of-range or repeated mentions ignored


def _as_digits(ch: str) -> str:
    """One non-ASCII character as ASCII: a decimal digit of any script, a superscript or subscript digit (they run
    together into a number), a one-character number (circled, parenthesised: a number of its own, so set apart),
    or the character itself."""
    if unicodedata.category(ch) == "Nd":
        return str(unicodedata.digit(ch))
    if unicodedata.category(ch) != "No":
        return ch
    value = unicodedata.numeric(ch, None)
    if value is None or value != int(value) or value < 0:
        return ch
    if unicodedata.decomposition(ch).startswith(("<super>", "<sub>")):
        return str(int(value))
    return f" {int(value)} "


def ascii_digits(text: str) -> str:
    """``text`` with every digit-like character as ASCII digits (ASCII text is returned as it is)."""
    if text.isascii():
        return text
    return "".join(ch if ch.isascii() else _as_digits(ch) for ch in text)


def parse_ranking(text: str | None, n: int) -> ParsedRanking:
    """Parse ``text`` for a window of ``n`` passages (identifiers 1..n) into a full permutation."""
    return ranking_of((int(digits) for digits in _DIGITS.findall(ascii_digits(text or ""))), n)


def ranking_of(identifiers: Iterable[int], n: int, well_formed: bool = True) -> ParsedRanking:
    """The published repair of the identifiers an answer names (1-based, in its order): a repeat keeps its first
    place, one outside ``1..n`` is dropped, one never named is appended in presented order. ``well_formed``:
    the answer had the form it was asked for (a template's validation regex); otherwise it is never ``ok``."""
    seen: set[int] = set()
    order: list[int] = []
    dropped = 0
    for identifier in identifiers:
        k = identifier - 1
        if 0 <= k < n and k not in seen:
            seen.add(k)
            order.append(k)
        else:
            dropped += 1
    mentioned = len(order)
    order.extend(i for i in range(n) if i not in seen)
    if n <= 1 or (mentioned == n and dropped == 0 and well_formed):
        status = ParseStatus.ok
    elif mentioned == 0:
        status = ParseStatus.unparseable
    else:
        status = ParseStatus.repaired
    return ParsedRanking(tuple(order), status, mentioned, dropped)


__all__ = ["ParsedRanking", "ascii_digits", "parse_ranking", "ranking_of"]
