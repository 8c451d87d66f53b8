"""Turning a listwise model's answer (``[2] > [1] > [3]``) into a permutation; never fatal.

Rules: read the identifiers in order, drop those outside ``1..n`` and repeats, then append the
ones never mentioned in presented order. Status:

* ``ok`` - the answer named every identifier exactly once, in ``[i]`` form, nothing out of range;
* ``repaired`` - something was usable but had to be fixed (missing, repeated or out-of-range
  identifiers, or bare numbers ``2 > 1`` instead of ``[2] > [1]``);
* ``unparseable`` - no usable identifier at all; the presented order is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OK = "ok"
REPAIRED = "repaired"
UNPARSEABLE = "unparseable"

_BRACKETED = re.compile(r"\[\s*(\d+)\s*\]")
_BARE = re.compile(r"(?<![\w.])(\d+)(?!\w|\.\d)")


@dataclass(frozen=True)
class ParsedRanking:
    """A parsed answer: ``order`` (0-based window positions, best first) and what it took."""

    order: tuple[int, ...]
    status: str
    mentioned: int  # distinct valid identifiers the answer named
    dropped: int  # out-of-range or repeated mentions ignored


def parse_ranking(text: str | None, n: int) -> ParsedRanking:
    """Parse ``text`` for a window of ``n`` passages (identifiers 1..n) into a full permutation."""
    text = text or ""
    numbers = [int(x) for x in _BRACKETED.findall(text)]
    bracketed = bool(numbers)
    if not bracketed:
        numbers = [int(x) for x in _BARE.findall(text)]
    seen: set[int] = set()
    order: list[int] = []
    dropped = 0
    for k in numbers:
        if 1 <= k <= n and (k - 1) not in seen:
            seen.add(k - 1)
            order.append(k - 1)
        else:
            dropped += 1
    mentioned = len(order)
    order.extend(i for i in range(n) if i not in seen)
    if n <= 1:
        status = OK  # nothing to rank
    elif mentioned == 0:
        status = UNPARSEABLE
    elif mentioned == n and dropped == 0 and bracketed:
        status = OK
    else:
        status = REPAIRED
    return ParsedRanking(tuple(order), status, mentioned, dropped)


def parse_order(text: str | None, n: int) -> tuple[tuple[int, ...], str]:
    """Shorthand: ``(order, status)``."""
    p = parse_ranking(text, n)
    return p.order, p.status


__all__ = ["OK", "REPAIRED", "UNPARSEABLE", "ParsedRanking", "parse_order", "parse_ranking"]
