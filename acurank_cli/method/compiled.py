"""The one way the engine compiles its kernels: numba's ``njit`` with an on-disk cache where numba can write one.

numba caches a compiled function beside its source (``__pycache__``) or in the user's cache folder; in a read-only
install (a service user, a container: neither writable) ``cache=True`` raises at import ("cannot cache function:
no locator available"). :func:`jit` then compiles without a cache: the same machine code, compiled again at each
start (a second or two), never a traceback. Intel's SVML is turned off before numba is imported (its vectorised
``pow``/``exp`` are not libm's, and the TrueSkill port must be bit-identical to the library).

numba itself is imported when a kernel is first called, not when the modules that declare kernels are imported: its
import and its cached code's loading take about 0.25 s and 0.4 s of a start, and a run's first windows (the initial
pass) are planned and sent without a kernel, so both are done while those windows are out (BENCHMARKS.md 21). At
that first call every kernel declared so far becomes numba's dispatcher in its module (a kernel calling another
finds the dispatcher there when it compiles); a kernel declared after that is numba's at once.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable

os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")

#: kernels declared and not yet numba's (see :func:`load`)
_DEFERRED: list["_Kernel"] = []
_LOCK = threading.Lock()
_njit: Callable | None = None


def jit(**options) -> Callable:
    """``@jit(...)``: ``njit(cache=True, ...)``, or ``njit(...)`` where numba finds no writable cache location;
    made at the first call of any kernel (:func:`load`)."""

    def declare(fn: Callable) -> Callable:
        with _LOCK:
            if _njit is not None:
                return _compiled(fn, options)
            kernel = _Kernel(fn, options)
            _DEFERRED.append(kernel)
            return kernel

    return declare


def loaded() -> bool:
    """Whether numba has been imported for the kernels (the provenance records its version either way)."""
    return _njit is not None


def load() -> None:
    """Import numba and make every kernel declared so far its dispatcher, in the kernel's own module."""
    global _njit
    with _LOCK:
        if _njit is None:
            from numba import njit

            _njit = njit
        while _DEFERRED:
            kernel = _DEFERRED.pop(0)
            kernel.dispatcher = _compiled(kernel.fn, kernel.options)
            if kernel.fn.__globals__.get(kernel.fn.__name__) is kernel:
                kernel.fn.__globals__[kernel.fn.__name__] = kernel.dispatcher


def _compiled(fn: Callable, options: dict) -> Callable:
    assert _njit is not None
    try:
        return _njit(cache=True, **options)(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available for file ..."
        return _njit(**options)(fn)


class _Kernel:
    """A declared kernel before numba is imported: its first call loads every kernel (:func:`load`), later calls go
    straight to its dispatcher."""

    def __init__(self, fn: Callable, options: dict):
        self.fn, self.options = fn, options
        self.dispatcher: Callable | None = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.dispatcher is None:
            load()
        return self.dispatcher(*args, **kwargs)
