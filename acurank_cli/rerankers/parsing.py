"""Turning a listwise model's answer (``[2] > [1] > [3]``) into a permutation, as the published code does.

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
from dataclasses import dataclass

from ..records import ParseStatus

_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class ParsedRanking:
    """A parsed answer: ``order`` (0-based window positions, best first) and what it took."""

    order: tuple[int, ...]
    status: ParseStatus
    mentioned: int  # distinct valid identifiers the answer named
    dropped: int  # out-of-range or repeated mentions ignored


def parse_ranking(text: str | None, n: int) -> ParsedRanking:
    """Parse ``text`` for a window of ``n`` passages (identifiers 1..n) into a full permutation."""
    seen: set[int] = set()
    order: list[int] = []
    dropped = 0
    for digits in _DIGITS.findall(text or ""):
        k = int(digits) - 1
        if 0 <= k < n and k not in seen:
            seen.add(k)
            order.append(k)
        else:
            dropped += 1
    mentioned = len(order)
    order.extend(i for i in range(n) if i not in seen)
    if n <= 1 or (mentioned == n and dropped == 0):
        status = ParseStatus.ok
    elif mentioned == 0:
        status = ParseStatus.unparseable
    else:
        status = ParseStatus.repaired
    return ParsedRanking(tuple(order), status, mentioned, dropped)


__all__ = ["ParsedRanking", "parse_ranking"]
