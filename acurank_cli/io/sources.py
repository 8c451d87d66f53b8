"""Where every reader starts: a path, a text stream or ``-`` (stdin), opened once and gunzipped when its first
bytes are gzip's (:func:`open_text`), named in messages (:func:`source_name`), and the checks every reader applies
to an id, a tag, a score and a JSON field."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import math
import os
import shlex
import sys
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator, Sequence, TextIO, Union

from ..errors import InputError

Source = Union[str, Path, TextIO]


def looks_like_path(text: str) -> bool:
    """Whether a name is meant as a path (a separator, ``.``/``~`` prefix, or empty), not a dataset, topic
    or prebuilt index name."""
    return any(sep in text for sep in ("/", os.sep)) or text.startswith((".", "~")) or text == ""


def source_name(src: Source) -> str:
    """A printable name for a source: its path, ``<stdin>`` or the stream's name."""
    if isinstance(src, (str, Path)):
        return "<stdin>" if str(src) == "-" else str(src)
    return getattr(src, "name", "<stream>")


def one_stdin(named: Sequence[tuple[str, object]]) -> None:
    """Standard input can feed one input of a command: an InputError naming the inputs (e.g. ``RUN and --qrels``)
    when ``named`` ((name, source) pairs, None for not given) gives ``-`` to more than one."""
    readers = [name for name, src in named if isinstance(src, str) and src == "-"]
    if len(readers) > 1:
        who = " and ".join(readers) if len(set(readers)) == len(readers) else f"{len(readers)} inputs"
        raise InputError(f"'-' (standard input) can be only one input, and {who} name it: give the others as files")


class _Prefixed(io.RawIOBase):
    """A stream's first bytes, already read to sniff its kind, put back in front of the rest of it."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n], self._head = self._head[:n], self._head[n:]
            return n
        return self._rest.readinto(buffer)


def _sniffed(raw: BinaryIO) -> tuple[BinaryIO, bool]:
    """The stream, still at its first byte, and whether it is gzip: its first two bytes are looked at without
    being consumed (a peek, or a read put back in front), so a pipe, a FIFO or ``/dev/stdin`` loses nothing."""
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if len(head) < 2:  # no look-ahead, or a pipe that delivered one byte so far: read two, put them back
        first = raw.read(2) or b""
        while 0 < len(first) < 2 and (more := raw.read(2 - len(first))):
            first += more
        head, raw = first, io.BufferedReader(_Prefixed(first, raw))
    return raw, head == b"\x1f\x8b"


def _stdin_bytes() -> BinaryIO:
    stdin = sys.stdin
    if stdin is None:
        raise InputError("no standard input to read ('-')", "<stdin>")
    return getattr(stdin, "buffer", None) or io.BytesIO(stdin.read().encode("utf-8"))  # a text-only stream: its text


@contextlib.contextmanager
def open_text(src: Source) -> Iterator[TextIO]:
    """The one way in: a path, ``-`` (stdin) or an open text stream (passed through). A path is opened once
    (a FIFO, ``/dev/stdin`` or a process substitution ``<(...)`` has no second reading) and, like stdin, is
    gunzipped when its first bytes are gzip's, whatever its name; text is UTF-8 (a byte-order mark dropped)."""
    if not isinstance(src, (str, Path)):
        yield src
        return
    name = source_name(src)
    with contextlib.ExitStack() as stack:
        if str(src) == "-":
            raw = _stdin_bytes()
        else:
            path = Path(src)
            if path.is_dir():
                raise InputError("is a directory, expected a file", name)
            try:
                raw = stack.enter_context(path.open("rb"))
            except FileNotFoundError:
                raise InputError("no such file", name) from None
            except OSError as exc:
                raise InputError(f"cannot read ({exc.strerror or exc})", name) from None
        try:
            raw, gz = _sniffed(raw)
            binary = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
            text = io.TextIOWrapper(binary, encoding="utf-8-sig")
            try:
                yield text
            finally:
                text.detach()  # the file itself is closed by the stack; stdin stays open
        except UnicodeDecodeError:
            raise _not_utf8(src, name) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"corrupt or truncated gzip file ({exc})", name) from None
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror or exc})", name) from None


def streamed(src: Source) -> bool:
    """Whether ``src`` is read as a stream rather than a file: ``-``, a pipe, a FIFO, ``<(...)`` (``/dev/fd/63``), or a
    name that is no regular file. A stream cannot be read again, and its name (a descriptor's number) says nothing."""
    return str(src) == "-" or not Path(src).is_file()


def _not_utf8(src, name: str) -> InputError:
    """Where a file stops being UTF-8: its line and byte, and the remedy (a file in another encoding is converted
    with iconv); a file with NUL bytes is said to be binary. Standard input, a pipe or a FIFO cannot be read again:
    said without the place."""
    if streamed(src):  # cannot be read again
        return InputError("not UTF-8 text (a binary file, or another encoding: convert it with iconv -t UTF-8)", name)
    opener = gzip.open if Path(src).open("rb").read(2) == b"\x1f\x8b" else open
    offset = 0
    with opener(src, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                if b"\0" in line:
                    return InputError("not UTF-8 text: a binary file? (a NUL byte on this line)", name, number)
                byte, given = line[exc.start], str(src)
                convert = "iconv -f WINDOWS-1252 -t UTF-8"
                convert = (f"zcat {shlex.quote(given)} | {convert} > {shlex.quote(given.removesuffix('.gz') + '.utf8')}"
                           if opener is gzip.open else f"{convert} {shlex.quote(given)} > {shlex.quote(given + '.utf8')}")
                return InputError(f"not UTF-8 text: byte 0x{byte:02x} at byte {offset + exc.start} of the "
                                  f"{'uncompressed ' if opener is gzip.open else ''}file; in another encoding "
                                  f"(Windows-1252, Latin-1)? convert it: {convert}", name, number)
            offset += len(line)
    return InputError("not UTF-8 text (a binary file?)", name)


def check_id(value: str, what: str, name: str, line: int | None = None) -> str:
    """A qid or docid: non-empty, printable, no whitespace (it must survive a TREC line). Every whitespace
    character but the ASCII space is non-printable to ``str.isprintable``, so the check runs in C."""
    if not value or not value.isprintable() or " " in value:
        raise InputError(f"{what} {value!r} is empty or holds whitespace or control characters", name, line)
    return value


def check_tag(tag: str, flag: str = "--tag") -> str:
    """A run tag, the sixth column of every TREC line: non-empty, printable, no whitespace."""
    if not tag or not tag.isprintable() or " " in tag:
        raise InputError(f"{flag} {tag!r}: a run tag must be non-empty, without whitespace or control characters "
                         "(it is a column of every TREC run line)")
    return tag


def check_score(value: float, name: str, line: int | None = None, where: str = "", text: str | None = None) -> float:
    """A first-stage score: a finite number (``text``: as written, which the message quotes: ``1e999`` reads as inf)."""
    if not math.isfinite(value):
        shown = value if text is None or text.strip().lower() in ("inf", "+inf", "-inf", "nan", "infinity") else (
            f"{text.strip()} ({'beyond the range of a 64-bit float' if math.isinf(value) else value})")
        raise InputError(f"{where}score {shown} is not a finite number", name, line)
    return value


def numbered(fh: TextIO) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their numbers; line ends are left to the parsers, which split or strip."""
    for lineno, line in enumerate(fh, start=1):
        if line.strip():
            yield lineno, line


#: a JSON escape of a surrogate (half of a pair, as an emoji's, or a lone one, which no UTF-8 encodes)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class LoneSurrogate(ValueError):
    """JSON text that escapes a lone surrogate in a string (:func:`parse_json`)."""


def parse_json(text: str):
    """``json.loads`` (its errors are ValueError, or RecursionError for absurd nesting), refusing a lone surrogate
    escaped in a string (``"\\ud800"``): JSON decodes it to text no UTF-8 encodes, which failed later, in a digest or
    a tokenizer, with a traceback. Only a text that escapes a surrogate is checked."""
    value = json.loads(text)
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LoneSurrogate(f"not valid Unicode text: a lone surrogate, {exc.object[exc.start]!r}, escaped in "
                                "a string") from None
    return value


def json_reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def json_str(value, what: str) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise TypeError(f"{what} {value!r} is not a string")
    return str(value)
