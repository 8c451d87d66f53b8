"""What one request may ask for and how many requests the server holds: the defaults of ``acurank serve``'s
``--max-*`` flags and ``--request-timeout``, declared here once (light: the command line reads them at start)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one request may ask for, and how many the server holds."""

    max_documents: int = 1000
    max_request_bytes: int = 8 * 1024 * 1024
    #: documents are cut to this many whitespace-separated tokens (as Cohere cuts to max_tokens_per_doc)
    max_tokens_per_doc: int = 4096
    max_in_flight: int = 32
    max_queued: int = 64
    timeout: float = 300.0
    #: reranker calls one request may make (a method such as sw-99999 or tourrank-1000 would otherwise ask for
    #: any number); past it the request is stopped (at most one step beyond) and answered 422
    max_calls: int = 1000


DEFAULT_LIMITS = Limits()
