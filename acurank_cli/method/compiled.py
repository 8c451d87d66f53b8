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

**Before numba, the kernels' own Python.** A kernel is Python source that numba compiles, and the interpreter runs
the same source to the same bits: IEEE double arithmetic in the order written, no fused multiply-adds, and the same
libm ``exp`` and ``pow`` (the TrueSkill update's tests compare the two on thousands of windows). Where Python
raises (a division by a zero float, an overflowing ``pow``) the compiled code returns a status or an infinity
instead, so a caller that meets an exception runs the compiled kernel. Interpreted, a window of 20 takes about 3 ms
against numba's 20 us, and numba's import and cached code take about 0.7 s of a process: a run of a few queries
(a RAG pipeline's call, ``acurank-9`` on a handful) is done before numba would have loaded. So each process may
run :data:`INTERPRETED` units of kernel work (a window rated for one noise model) from the source first
(:func:`interpreted`); a run that expects more (:func:`expect`: its queries' most calls, which the session gives
before the first call) loads numba at its first kernel call, as every run did before.
"""

from __future__ import annotations

import functools
import os
import threading
import types
from typing import Any, Callable

os.environ.setdefault("NUMBA_DISABLE_INTEL_SVML", "1")

#: kernels declared and not yet numba's (see :func:`load`)
_DEFERRED: list["_Kernel"] = []
_LOCK = threading.Lock()
_njit: Callable | None = None
#: units of kernel work (one window rated for one noise model) a process may run from the kernels' Python source
#: before numba is loaded: about 0.4 s interpreted, against numba's 0.7 s to load
INTERPRETED = 128
_interpretable = INTERPRETED
#: units of kernel work run from the source so far in this process
_interpreted = 0


def jit(**options) -> Callable:
    """``@jit(...)``: ``njit(cache=True, ...)``, or ``njit(...)`` where numba finds no writable cache location;
    made at the first call of any kernel (:func:`load`)."""

    def declare(fn: Callable) -> Callable:
        with _LOCK:
            _FUNCTIONS.setdefault(id(fn.__globals__), []).append(fn)
            if _njit is not None:
                return _compiled(fn, options)
            kernel = _Kernel(fn, options)
            _DEFERRED.append(kernel)
            return kernel

    return declare


def expect(work: int | None) -> None:
    """What a run expects of the kernels (units of :data:`INTERPRETED`; None: it cannot say): more than the
    allowance left and numba is loaded at the first kernel call, the interpreted kernels left unused."""
    global _interpretable
    with _LOCK:
        if work is None or work > _interpretable:
            _interpretable = 0


def interpreted(kernel: Any, work: int = 1) -> Callable | None:
    """``kernel``'s Python source (the kernels it calls likewise) while numba is not loaded and the allowance
    covers ``work`` units, which it spends; else None: the caller runs the compiled kernel."""
    global _interpretable, _interpreted
    with _LOCK:
        if _njit is not None or not isinstance(kernel, _Kernel) or work > _interpretable:
            _interpretable = 0
            return None
        _interpretable -= work
        _interpreted += work
        return _source(kernel.fn)


def interpreted_work() -> int:
    """Units of kernel work this process has run from the kernels' source."""
    return _interpreted


def python_source(kernel: Any) -> Callable:
    """A kernel (as declared, or numba's dispatcher of it) as the interpreter runs it."""
    fn = kernel.fn if isinstance(kernel, _Kernel) else getattr(kernel, "py_func", kernel)
    with _LOCK:
        return _source(fn)


def dispatcher(kernel: Any) -> Callable:
    """numba's dispatcher of a kernel (numba loaded where it was not)."""
    if isinstance(kernel, _Kernel):
        if kernel.dispatcher is None:
            load()
        return kernel.dispatcher
    return kernel


#: id(a module's globals) -> the functions declared there as kernels
_FUNCTIONS: dict[int, list[Callable]] = {}
#: id(a module's globals) -> the namespace its kernels' Python source runs in
_NAMESPACES: dict[int, dict[str, Any]] = {}


def _source(fn: Callable) -> Callable:
    """``fn`` in a copy of its module's namespace where the module's kernels are their functions too (a kernel of
    another module stays compiled); called with :data:`_LOCK` held."""
    module = fn.__globals__
    namespace = _NAMESPACES.get(id(module))
    if namespace is None:
        namespace = _NAMESPACES[id(module)] = dict(module)
        for declared in _FUNCTIONS.get(id(module), ()):
            namespace[declared.__name__] = types.FunctionType(declared.__code__, namespace, declared.__name__,
                                                              declared.__defaults__, declared.__closure__)
    return namespace[fn.__name__]


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
