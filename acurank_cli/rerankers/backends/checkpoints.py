"""Where a local LLM's weights and tokenizer come from, and what the local backends share.

``hf:`` and ``vllm:`` take a model folder, a hub id, or a ``.gguf`` file. transformers reads a GGUF
file itself (``gguf_file=``, dequantised to float32); an engine that cannot (vLLM's CPU build) gets a
folder converted once from it and kept under ``$XDG_CACHE_HOME/acurank/gguf/<sha256>`` (said on
stderr when it is made). Both backends build prompts with the same :func:`prompt_builder`, so the
same window gives the same text and the same token ids in either engine.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError

DTYPES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "float16": "float16", "half": "float16",
    "fp32": "float32", "float32": "float32", "float": "float32",
}


def dtype_name(given: str | None, on_gpu: bool, bf16_ok: bool = True) -> str:
    """The torch dtype name for ``--dtype`` (None/auto: bf16 on a GPU that has it, fp16 on other GPUs, fp32 on CPU)."""
    if given in (None, "", "auto"):
        return ("bfloat16" if bf16_ok else "float16") if on_gpu else "float32"
    name = DTYPES.get(str(given).lower())
    if name is None:
        raise InputError(f"unknown dtype {given!r}; known: {', '.join(sorted(DTYPES))}")
    return name


def dtype_kwarg(dtype: Any) -> dict[str, Any]:
    """``dtype=`` for transformers >= 4.56 (5.x), ``torch_dtype=`` before (pyproject allows >= 4.44)."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def one_line(exc: BaseException) -> str:
    """An exception's first line (library errors can run to pages)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class quiet_loading:
    """Silence transformers' weight-loading progress bar (stderr noise in a CLI), then restore it."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self._logging = hf_logging
        self._was = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        if self._was:
            self._logging.enable_progress_bar()
        return False


@functools.lru_cache(maxsize=1)
def hub_unreachable() -> str | None:
    """Why the model hub cannot be reached (its offline mode is set, or its host does not resolve), else None.
    Asked once a process, before a hub id loads: on a machine without a network the model is then read from the
    local cache at once, instead of after the hub library's five retries a file (about 50 s, and a page of
    "Retrying in 8s" lines). A resolving host is not a promise: a download can still fail, and says why."""
    try:
        from huggingface_hub import constants
    except ImportError:  # pragma: no cover - a dependency of transformers
        return None
    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    from urllib.parse import urlparse

    host = urlparse(constants.ENDPOINT).hostname or constants.ENDPOINT
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return f"{host} does not resolve"
    return None


def hub_kwargs(location: str) -> dict[str, Any]:
    """``from_pretrained`` keywords for a folder or hub id: ``local_files_only`` for a hub id the hub cannot serve."""
    return {"local_files_only": True} if not Path(location).exists() and hub_unreachable() else {}


def offline_note(location: str) -> str:
    """What a load error adds for a hub id read from the local cache only (nothing otherwise)."""
    return f" (no network: {hub_unreachable()}; only the local cache was read)" if hub_kwargs(location) else ""


#: the files a model's weights are saved in (safetensors, PyTorch's pickles, TensorFlow's and Flax's, GGUF); a sharded
#: checkpoint's index is ``*.index.json``
WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".gguf"})


@dataclass(frozen=True)
class ModelSource:
    """A model as named on the command line: ``location`` (folder or hub id) and, for GGUF, the file."""

    spec: str
    location: str
    gguf_file: str | None = None

    @property
    def is_gguf(self) -> bool:
        return self.gguf_file is not None

    @property
    def gguf_path(self) -> Path:
        return Path(self.location) / str(self.gguf_file)

    def load_kwargs(self) -> dict[str, Any]:
        """``from_pretrained`` keywords beyond the location: ``gguf_file`` for a GGUF file; ``local_files_only``
        for a hub id when the hub cannot be reached."""
        return {"gguf_file": self.gguf_file} if self.gguf_file else hub_kwargs(self.location)

    def check_weights(self, backend: str) -> None:
        """A local model folder holds weights, in any form a loader reads (refused in one line before any load, by
        the run and by its dry run alike: the dry run reads only the tokenizer and config, and passed a folder
        without them, which the run then refused in transformers' words); a hub id or a GGUF file: nothing here."""
        folder = Path(self.location)
        if self.gguf_file or not folder.is_dir():
            return
        if not any(p.suffix in WEIGHT_SUFFIXES or p.name.endswith(".index.json") for p in folder.iterdir()):
            raise InputError(f"{backend}: model folder {self.spec!r} holds no weights (no "
                             f"{', '.join(sorted(WEIGHT_SUFFIXES))} file): give the folder the model was saved to")

    def not_loaded(self, backend: str, exc: BaseException) -> InputError:
        """The one-line error for weights that did not load (saying when only the local cache was read)."""
        where = "" if self.gguf_file else offline_note(self.location)
        return InputError(f"{backend}: cannot load model {self.spec!r}{where}: {one_line(exc)}")

    def identity(self) -> dict[str, Any]:
        """What names these weights in a cache identity (a GGUF file by its content digest)."""
        if self.gguf_file:
            return {"model": str(self.gguf_path), "gguf_sha256": file_sha256(self.gguf_path)}
        return {"model": self.location}

    def weights_sha256(self) -> str | None:
        """The local weights' sha256 (a GGUF file's, or over a folder's weight files in name order, each memoised
        per size and mtime); None for a hub id, whose revision names its weights."""
        if self.gguf_file:
            return file_sha256(self.gguf_path)
        folder = Path(self.location)
        if not folder.is_dir():
            return None
        files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf", ".pt"))
        if not files:
            return None
        h = hashlib.sha256()
        for f in files:
            h.update(f"{f.name}:{file_sha256(f)}\n".encode())
        return h.hexdigest()

    def counter_name(self, tokenizer: Any) -> str:
        """The token counter's name: the tokenizer's folder, or the GGUF file's name (either engine)."""
        if self.gguf_file:
            return f"hf:gguf:{self.gguf_file}"
        return f"hf:{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__}"


def resolve_model(spec: str, backend: str) -> ModelSource:
    """``spec`` as a local folder, a local ``.gguf`` file, or (otherwise) a hub id."""
    local = Path(spec).expanduser()
    if spec.lower().endswith(".gguf"):
        if not local.is_file():
            raise InputError(f"{backend}: no GGUF file {spec!r}")
        local = local.resolve()
        missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
        if missing:  # transformers' own words were "an installed package is broken"
            raise InputError(f"{backend}: reading a GGUF file needs the Python package{'s' if len(missing) > 1 else ''} "
                             f"{' and '.join(missing)}: pip install 'acurank[gguf]' (after torch==2.13.0)")
        return ModelSource(spec, str(local.parent), local.name)
    if local.exists():
        return ModelSource(spec, str(local.resolve()))
    if spec.startswith(("/", "./", "../", "~")) or spec in (".", ".."):  # a path (a hub id never starts so)
        raise InputError(f"{backend}: no model folder {spec!r}")
    return ModelSource(spec, spec)


_DIGESTS: dict[str, str] = {}


def _digests_file() -> Path:
    """Where file digests are remembered between runs (beside the GGUF conversions): a model's weights are read
    once per version of the file, not at every run's start."""
    return gguf_cache_root().parent / "sha256.json"


def file_sha256(path: Path) -> str:
    """A file's sha256, memoised per path, size and mtime (in this process and in :func:`_digests_file`)."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    if not _DIGESTS:
        with contextlib.suppress(OSError, ValueError):
            _DIGESTS.update(json.loads(_digests_file().read_text(encoding="utf-8")))
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
        with contextlib.suppress(OSError):  # a cache: a read-only home only means hashing again next time
            from ...io.plan import write_whole

            _digests_file().parent.mkdir(parents=True, exist_ok=True)
            write_whole(_digests_file(), json.dumps(_DIGESTS, indent=0, sort_keys=True))
    return _DIGESTS[key]


def gguf_cache_root() -> Path:
    """``$ACURANK_GGUF_CACHE``, else ``$XDG_CACHE_HOME/acurank/gguf`` (``~/.cache`` by default)."""
    if os.environ.get("ACURANK_GGUF_CACHE"):
        return Path(os.environ["ACURANK_GGUF_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "acurank" / "gguf"


def converted_folder(source: ModelSource) -> Path:
    """A transformers folder (float32 safetensors + tokenizer) made once from a GGUF file.

    Named by the file's sha256, written to a temporary folder and renamed into place, so a crash
    mid-conversion leaves nothing half-written and two processes never read a partial folder.
    """
    digest = file_sha256(source.gguf_path)
    target = gguf_cache_root() / digest[:32]
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"acurank: converting {source.gguf_path.name} once into {target} (float32; reused from then on)",
          file=sys.stderr)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        with quiet_loading():
            tok = AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file)
            model = AutoModelForCausalLM.from_pretrained(source.location, gguf_file=source.gguf_file,
                                                         **dtype_kwarg(torch.float32))
        model.hf_quantizer = None  # the weights are dequantised: save them as plain tensors
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process finished first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def config_parameters(config) -> int | None:
    """A causal LM's parameter count from its config alone: the model built on the meta device (no memory,
    no weights read), counted as ``num_parameters()`` counts a loaded one (tied weights once)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return int(model.num_parameters())
    except Exception:  # noqa: BLE001 - an architecture transformers cannot build: no estimate
        return None


__all__ = ["DTYPES", "ModelSource", "config_parameters", "converted_folder", "dtype_kwarg", "dtype_name", "file_sha256", "gguf_cache_root",
           "hub_kwargs", "hub_unreachable", "offline_note", "one_line", "quiet_loading", "resolve_model"]
