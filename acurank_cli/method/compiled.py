"""The one way the engine compiles its kernels: numba's ``njit`` with an on-disk cache where numba can write one.

numba caches a compiled function beside its source (``__pycache__``) or in the user's cache folder; in a read-only
install (a service user, a container: neither writable) ``cache=True`` raises at import ("cannot cache function:
no locator available"). :func:`jit` then compiles without a cache: the same machine code, compiled again at each
start (a second or two), never a traceback. Intel's SVML is turned off before numba is imported (its vectorised
``pow``/``exp`` are not libm's, and the TrueSkill port must be bit-identical to the library).
"""

from __future__ import annotations

import os
from typing import Callable

os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")
from numba import njit  # noqa: E402


def jit(**options) -> Callable:
    """``@jit(...)``: ``njit(cache=True, ...)``, or ``njit(...)`` where numba finds no writable cache location."""

    def compile_(fn: Callable) -> Callable:
        try:
            return njit(cache=True, **options)(fn)
        except RuntimeError:  # numba: "cannot cache function ...: no locator available for file ..."
            return njit(**options)(fn)

    return compile_
