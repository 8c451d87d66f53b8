"""What a command reads and what it writes, checked before anything is opened for writing.

Every command that writes files names them here first, with the flag that names each (``FilePlan``): the
inputs it reads and the outputs it will write. :meth:`FilePlan.check` refuses, in one line naming both
flags, an output that is the same file as an input or as another output ("the same file" is the same inode
after links are followed, so ``./x``, a symbolic link and a hard link to ``x`` are all ``x``; an output that
does not exist yet is compared by its resolved path), an output inside an input folder (a Lucene index), and
an existing output without ``--overwrite``, unless the command continues that very file (a resumed run).
Devices and FIFOs (``/dev/null``, ``/dev/stdout``) are written as they are and never replaced.

Whole files are written through :func:`replacing`: a temporary file in the same folder, renamed over the
target when complete, so a crash leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator

from ..errors import InputError, WriteFailed
from .stores import usable


@dataclass(frozen=True)
class Named:
    """A file as the command line names it: the flag (``--qrels``, ``RUN``) and the path given."""

    flag: str
    path: str

    def __str__(self) -> str:
        if self.flag.startswith("("):  # a file the command finds itself: "x/topics.tsv (the topics beside RUN)"
            return f"{self.path} {self.flag}"
        return f"{self.flag} {self.path}"  # a flag, or an argument by its name (RUN)


@dataclass(frozen=True)
class Output(Named):
    """A file the command writes; ``may_exist``: an existing one is continued or is the command's own (a resumed
    run's stats, the call cache, a run's meta file), not replaced by surprise."""

    may_exist: bool = False
    #: a store its own code opens and reports on (the call cache, the embedding store): the clash checks, and where
    #: the command will open it (``opened_as``: what a refusal calls it), that it can be opened (:func:`.stores.usable`)
    store: bool = False
    #: a folder the command fills (a Lucene index): what it holds is replaced, so no input may be in it
    folder: bool = False
    #: a log the command appends to, restarted (emptied) with --overwrite when the plan is made (a prompt log)
    log: bool = False
    opened_as: str | None = None


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _identity(path: str) -> tuple:
    """The file a path denotes: its inode when it exists (links followed), else its resolved path."""
    found = _stat(path)
    if found is not None:
        return ("inode", found.st_dev, found.st_ino)
    return ("path", os.path.realpath(os.path.expanduser(path)))


def is_regular_or_absent(path: str) -> bool:
    """A path that names a regular file or nothing yet (not a device, a FIFO or a folder)."""
    found = _stat(path)
    return found is None or stat.S_ISREG(found.st_mode)


def _special(path: str) -> bool:
    """A device or FIFO: written as it is, never a clash (``/dev/null`` twice is harmless)."""
    found = _stat(path)
    return found is not None and not stat.S_ISREG(found.st_mode) and not stat.S_ISDIR(found.st_mode)


def _inside(path: str, folder: str) -> bool:
    root = os.path.realpath(os.path.expanduser(folder))
    return os.path.realpath(os.path.expanduser(path)).startswith(root.rstrip(os.sep) + os.sep)


@dataclass
class FilePlan:
    """The files one command reads and writes (``None`` and ``-``, stdin or stdout, are left out)."""

    reads: list[Named] = field(default_factory=list)
    writes: list[Output] = field(default_factory=list)

    def read(self, flag: str, path: str | Path | None) -> "FilePlan":
        if path is not None and str(path) != "-":
            self.reads.append(Named(flag, str(path)))
        return self

    def write(self, flag: str, path: str | Path | None, may_exist: bool = False, *, store: bool = False,
              folder: bool = False, log: bool = False, opened_as: str | None = None) -> "FilePlan":
        if path is not None and str(path) != "-":
            self.writes.append(Output(flag, str(path), may_exist or store, store, folder, log, opened_as=opened_as))
        return self

    def check(self, overwrite: bool = False, make: bool = True) -> None:
        """One line (an InputError) for the first write that would clobber what the command reads or writes, or for
        ``--overwrite`` when the command writes no file here (stdout only: nothing it could replace). ``make``: a
        missing folder is made (a dry run, which writes none of these, only checks that it could be)."""
        if overwrite and not any(not out.store for out in self.writes):
            raise InputError("--overwrite replaces output files, and this command writes none here (its output goes to "
                             "stdout): drop it, or give --output FILE")
        seen: dict[tuple, Output] = {}
        for out in self.writes:
            if _special(out.path):
                continue
            me = _identity(out.path)
            if out.folder:
                self._folder(out, overwrite)
                continue
            if str(out.path).endswith(("/", os.sep)):  # a folder's name: the file was written as the folder's name
                raise InputError(f"{out} names a folder (it ends in '/'): give a file's name")
            for source in self.reads:
                if _special(source.path):
                    continue
                if me == _identity(source.path):
                    raise InputError(f"{out} is the same file as {source}, which the command reads; write elsewhere")
                if os.path.isdir(source.path) and _inside(out.path, source.path):
                    raise InputError(f"{out} is inside {source}, which the command reads; write elsewhere")
            if me in seen:
                raise InputError(f"{out} and {seen[me]} are the same file: give each output its own")
            seen[me] = out
            if out.store:
                continue
            found = _stat(out.path)
            if found is not None and stat.S_ISDIR(found.st_mode):
                raise InputError(f"{out} is a directory, expected a file name")
            if found is not None and found.st_size > 0 and not out.may_exist and not overwrite:
                raise InputError(f"{out} exists: pass --overwrite to replace it, or write elsewhere")
        for out in self.writes:
            if not out.store and not out.folder:
                _writable(out, make)
        for out in self.writes:  # last, as the run checked them where its backend loaded: a clash says so first
            if out.opened_as is not None:
                usable(Path(out.path), out.opened_as)

    def make(self, overwrite: bool = False) -> None:
        """Make each output file's missing folder (as ``mkdir -p``) and, with ``overwrite``, restart each log (emptied:
        it is continued otherwise), once :meth:`check` (with ``make`` False) and every other check of the command
        held: a command refused makes and restarts nothing."""
        for out in self.writes:
            if not out.store and not out.folder:
                _writable(out, True)
            if out.log and overwrite and Path(out.path).is_file():
                Path(out.path).write_bytes(b"")

    def _folder(self, out: Output, overwrite: bool) -> None:
        """An output folder: no input is it or inside it, and one that holds something is replaced only with
        ``--overwrite``."""
        for source in self.reads:
            if _identity(source.path) == _identity(out.path) or _inside(source.path, out.path):
                raise InputError(f"{source} is inside {out}, which the command replaces; write elsewhere")
        found = _stat(out.path)
        if found is not None and not stat.S_ISDIR(found.st_mode):
            raise InputError(f"{out} exists and is not a folder")
        if found is not None and any(Path(out.path).iterdir()) and not overwrite:
            raise InputError(f"{out} holds files: pass --overwrite to replace the index in it, or write elsewhere")


def _writable(out: Output, make: bool = True) -> None:
    """One line now, not a traceback later, for an output that cannot be written; a missing folder is made (as
    ``mkdir -p``), or with ``make`` False only checked: its nearest existing folder writable."""
    if _special(out.path):
        return
    path = Path(out.path).expanduser()
    folder = path.parent
    if not folder.is_dir() and not make:
        nearest = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
        if not nearest.is_dir() or not os.access(nearest, os.W_OK):
            why = "is a file, not a folder" if not nearest.is_dir() else "is not writable"
            raise InputError(f"{out}: cannot make folder {str(folder)!r} ({str(nearest)!r} {why})")
        return
    if not folder.is_dir():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{out}: cannot make folder {str(folder)!r} ({exc.strerror or exc})") from None
    if (path.exists() and not os.access(path, os.W_OK)) or not os.access(folder, os.W_OK):
        raise InputError(f"{out} is not writable")


def _mode() -> int:
    """The permissions a new file gets (0666 less the umask), as ``open`` would give it."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def writing(name: str | Path) -> Iterator[None]:
    """Writes to ``name`` whose system errors (ENOSPC, EDQUOT, EROFS, EIO, ...) become one line naming it
    (:class:`~acurank_cli.errors.WriteFailed`); a closed pipe stays a BrokenPipeError (a reader that stopped)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise WriteFailed(str(name), exc) from None


def compressed(path: str | Path) -> bool:
    """An output written gzip-compressed: its name ends in ``.gz``, as an input's does (inputs are recognised by
    their first bytes, so a ``.gz`` output reads back either way)."""
    return str(path).endswith(".gz")


@contextlib.contextmanager
def _encoded(raw: IO[bytes], name: str, binary: bool, gz: bool) -> Iterator[IO]:
    """``raw`` as the caller writes it: bytes or UTF-8 text, through gzip (reproducible: no time stamp) when ``gz``."""
    inner = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename=name) if gz else raw
    fh = inner if binary else io.TextIOWrapper(inner, encoding="utf-8", newline="")
    try:
        yield fh
    finally:
        fh.flush()
        if fh is not raw:
            if not binary:
                fh.detach()
            if inner is not raw:
                inner.close()


@contextlib.contextmanager
def replacing(path: str | Path, binary: bool = False) -> Iterator[IO]:
    """Write a whole file: into a temporary file beside it, renamed over ``path`` once complete (links are
    followed: the file a link names is replaced, not the link); gzip-compressed when the name ends in ``.gz``. A
    device or FIFO is written directly."""
    given = os.path.expanduser(str(path))
    if not is_regular_or_absent(given):  # by the name given: /dev/stdout on a pipe resolves to no path at all
        with writing(path), open(given, "wb") as raw, _encoded(raw, os.path.basename(given), binary,
                                                                compressed(given)) as fh:
            yield fh
        return
    target = os.path.realpath(given)
    gz = compressed(path) or compressed(target)
    folder, name = os.path.split(target)
    with writing(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder or ".")
    try:
        with writing(path):
            with os.fdopen(fd, "wb") as raw:
                with _encoded(raw, name, binary, gz) as fh:
                    yield fh
                raw.flush()
                os.fsync(raw.fileno())
            os.chmod(tmp, _mode())
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_whole(path: str | Path, text: str) -> None:
    """``text`` as the whole content of ``path`` (see :func:`replacing`)."""
    with replacing(path) as fh:
        fh.write(text)
