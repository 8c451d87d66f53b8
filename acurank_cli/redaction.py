"""The one redaction of secrets: whatever acurank prints or records (stderr, the meta file, stats, traces,
provenance, the prompt log, serve's logs and answers) passes a URL, a command line or a text through here first.

What counts as a secret:

* a URL's user information (``user:password@``, or a token given as the user): the whole of it becomes ``***``;
* the value of a URL query parameter whose name looks like a key or a token (``key``, ``api_key``, ``token``,
  ``access_token``, ``secret``, ``password``, ``sig``, ``signature``, ``auth``, ``credential``, ``session``, ...),
  also in a path without a scheme (``/v1/chat/completions?api_key=...``, a request line in serve's log);
* the value of a flag that carries one (``--api-key X``, ``--api-key=X``);
* any value of an environment variable whose name says it holds one (``OPENAI_API_KEY``, ``..._API_KEY``,
  ``..._TOKEN``, ``..._SECRET``, ``..._PASSWORD``; ``ACURANK_API_KEYS``, comma-separated).

Redaction is by value too: every secret the command was given (its flags, its environment, the user information
and secret query values of every URL in them, and every URL that passes :func:`url`) is remembered with its
encodings (URL-encoded, JSON-escaped, and ``base64(user:password)``, which is what an ``Authorization: Basic``
header carries), and masked wherever it appears in a text: so a server that echoes a key, a path with its query or
an ``Authorization`` header back in an error is printed without it. A bare value is masked when it has 8
characters or more, so that a short value cannot blank ordinary words.

The standard library parses the URLs (:mod:`urllib.parse`); the names above are the rule, written once here.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Iterable, Sequence
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit, urlunsplit

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


#: ``name=value`` where the name looks like a secret's, after ``?``, ``&`` or ``;`` (a query string, with or
#: without the URL around it)
_QUERY_SECRET = re.compile(r"(?<=[?&;])([^=&;\s?#'\"<>]*(?:" + SECRET_PARAM.pattern + r")[^=&;\s?#'\"<>]*)=([^&;\s#'\"<>]+)",
                           re.IGNORECASE)


def encodings(value: str) -> set[str]:
    """``value`` as a text may carry it: itself, URL-encoded (both ways), URL-decoded, JSON-escaped."""
    forms = {value, quote(value, safe=""), quote_plus(value, safe=""), unquote(value), json.dumps(value)[1:-1]}
    return {f for f in forms if f}


def remember(values: Iterable[str]) -> None:
    """Values to mask from now on wherever they appear (keys given on the command line), in every encoding."""
    for value in values:
        if value:
            _remembered.update(f for f in encodings(value) if len(f) >= MIN_SECRET)


def _userinfo_secrets(userinfo: str) -> list[str]:
    """The secrets of a URL's user information: the user (a token given as the user), the password, the pair, and
    the pair in base64 (an ``Authorization: Basic`` header), each also URL-decoded."""
    user, _, password = userinfo.partition(":")
    out = [userinfo, user, password]
    for pair in {userinfo, f"{unquote(user)}:{unquote(password)}"}:
        if ":" in pair:
            encoded = base64.b64encode(pair.encode("utf-8")).decode("ascii")
            out += [encoded, encoded.rstrip("=")]
    return [v for v in out if v]


def url_secrets(text: str) -> list[str]:
    """The secret values a URL carries: its user information (and its encodings) and secret query values."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return []
    found = _userinfo_secrets(parts.netloc.rpartition("@")[0]) if "@" in parts.netloc else []
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if SECRET_PARAM.search(k) and v]
    return found


def remember_given(argv: Sequence[str], environ: dict[str, str] | None = None) -> None:
    """Remember every secret a command was given: its secret flags' values, and the secrets of every URL in its
    arguments and its environment (``--base-url``, ``OPENAI_BASE_URL``, a list of replicas)."""
    values = flag_values(argv)
    env = os.environ if environ is None else environ
    for text in (*map(str, argv), *env.values()):
        if "://" in text:
            for found in _URL.finditer(text):
                values += url_secrets(found.group(0))
    remember(values)


def _known() -> tuple[str, ...]:
    """Every secret value to mask, longest first: the remembered ones and the secret environment variables' values,
    each in its encodings. Made again only when either changes (a model's every answer is masked)."""
    env = _secret_environment()
    key = (env, len(_remembered))
    if _cache.get("key") != key:
        found = set(_remembered)
        for value in env:
            for v in value.split(","):
                if len(v.strip()) >= MIN_SECRET:
                    found.update(f for f in encodings(v.strip()) if len(f) >= MIN_SECRET)
        _cache.update(key=key, secrets=tuple(sorted(found, key=len, reverse=True)))
    return _cache["secrets"]


_cache: dict = {}
#: the environment's names (as the process holds them) -> those of them that name a secret
_secret_names: dict[frozenset, tuple] = {}


def _secret_environment() -> tuple[str, ...]:
    """The values of the environment variables whose names say they are secrets. The names are read as the process
    holds them (bytes, not decoded) and matched once for each set of names; only the secret ones' values are read:
    masking runs on every answer, and decoding and matching every variable each time cost 0.3 ms a line."""
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):  # not CPython's os._Environ: read it all
        return tuple(value for name, value in os.environ.items() if SECRET_ENV.search(name))
    names = frozenset(raw)
    secret = _secret_names.get(names)
    if secret is None:
        _secret_names.clear()
        secret = _secret_names[names] = tuple(n for n in raw if SECRET_ENV.search(os.environ.decodekey(n)))
    return tuple(os.environ.decodevalue(raw[n]) for n in secret)


def url(text: str) -> str:
    """``text`` (a URL) without its secrets: user information and the values of secret-looking parameters (which
    are remembered: wherever else they appear, a server's echo of them included, they are masked too)."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return _values(text)
    remember(url_secrets(text))
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAM.search(k) for k, _ in pairs):
            query = urlencode([(k, MASK if SECRET_PARAM.search(k) else v) for k, v in pairs], safe="*")
    return _values(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def values(text: str) -> str:
    """``text`` with every known secret value masked (nothing else changed: a model's answer, a server's echo)."""
    return _values(text) if text else text


def _values(text: str) -> str:
    for secret in _known():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def text(message: str) -> str:
    """A message or a line with every URL in it redacted, every secret-looking query value masked (a path's, a
    request line's) and every known secret value masked."""
    if "://" in message:
        message = _URL.sub(lambda m: url(m.group(0)), message)
    if "=" in message:
        message = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}={MASK}" if m.group(2) != MASK else m.group(0), message)
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
