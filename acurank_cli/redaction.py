"""The one redaction of secrets: whatever acurank prints or records (stderr, the meta file, stats, traces,
provenance, serve's logs and answers) passes a URL or a command line through here first.

What counts as a secret:

* a URL's user information (``user:password@``, or a token given as the user): the whole of it becomes ``***``;
* the value of a URL query parameter whose name looks like a key or a token (``key``, ``api_key``, ``token``,
  ``access_token``, ``secret``, ``password``, ``sig``, ``signature``, ``auth``, ``credential``, ``session``, ...);
* the value of a flag that carries one (``--api-key X``, ``--api-key=X``);
* any value of an environment variable whose name says it holds one (``OPENAI_API_KEY``, ``..._API_KEY``,
  ``..._TOKEN``, ``..._SECRET``, ``..._PASSWORD``; ``ACURANK_API_KEYS``, comma-separated) and any value given to
  :func:`remember` (serve's ``--api-key``), wherever it appears in a text: 8 characters or more, so that a short
  value cannot blank ordinary words.

The standard library parses the URLs (:mod:`urllib.parse`); the names above are the rule, written once here.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
#: query parameter names that hold a secret (matched anywhere in the name, any case)
SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session|cookie", re.IGNORECASE)
#: environment variables whose values are secrets
SECRET_ENV = re.compile(r"(^|_)(API_KEYS?|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
#: flags whose value is a secret
SECRET_FLAGS = ("--api-key",)
#: a secret value this long or longer is masked wherever it appears in a text
MIN_SECRET = 8
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>()\[\]]+", re.IGNORECASE)
_remembered: set[str] = set()


def remember(values: Iterable[str]) -> None:
    """Values to mask from now on wherever they appear (keys given on the command line)."""
    _remembered.update(v for v in values if v and len(v) >= MIN_SECRET)


def _known() -> set[str]:
    found = set(_remembered)
    for name, value in os.environ.items():
        if SECRET_ENV.search(name):
            found.update(v.strip() for v in value.split(",") if len(v.strip()) >= MIN_SECRET)
    return found


def url(text: str) -> str:
    """``text`` (a URL) without its secrets: user information and the values of secret-looking parameters."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return _values(text)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAM.search(k) for k, _ in pairs):
            query = urlencode([(k, MASK if SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*")
    return _values(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def _values(text: str) -> str:
    for secret in sorted(_known(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def text(message: str) -> str:
    """A message or a line with every URL in it redacted and every known secret value masked."""
    if "://" in message:
        message = _URL.sub(lambda m: url(m.group(0)), message)
    return _values(message)


def command(argv: Sequence[str]) -> list[str]:
    """A command line to record or show: the values of secret flags masked, every argument redacted."""
    out: list[str] = []
    masked = False
    for arg in argv:
        arg = str(arg)
        if masked:
            out.append(MASK)
            masked = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            masked = True
        elif arg.startswith(tuple(f + "=" for f in SECRET_FLAGS)):
            out.append(arg.partition("=")[0] + "=" + MASK)
        else:
            out.append(text(arg))
    return out


def flag_values(argv: Sequence[str]) -> list[str]:
    """The values the secret flags of ``argv`` carry (to :func:`remember` them)."""
    values = []
    for i, arg in enumerate(map(str, argv)):
        if arg in SECRET_FLAGS and i + 1 < len(argv):
            values.append(str(argv[i + 1]))
        elif arg.startswith(tuple(f + "=" for f in SECRET_FLAGS)):
            values.append(arg.partition("=")[2])
    return values
