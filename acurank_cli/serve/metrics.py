"""``GET /metrics``: the server's counters in Prometheus' text format (prometheus-client, a registry of the
server's own so that two servers in one process do not share counts)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE  # noqa: F401 - the /metrics response's type


#: the counters of the server's work: attribute, metric name, help, labels. Calls and tokens are counted as each
#: window is answered, whether its request is answered or not: a request withdrawn (a client gone, a timeout) or
#: stopped at --max-calls paid for the windows it had sent (they were answered, and went into the cache)
COUNTERS = (
    ("calls", "acurank_reranker_calls", "Reranker calls (windows) made, cached ones included, for every request: "
     "those answered, and those withdrawn, timed out or stopped at --max-calls", ()),
    ("cached_calls", "acurank_reranker_cached_calls", "Of those, answered from the call cache", ()),
    ("tokens", "acurank_tokens", "Tokens of those calls (kind input, output, and reasoning: a "
     "thought's, apart from its answer)", ("kind",)),
    ("thinking_calls", "acurank_thinking_calls", "Of the calls, those made thinking", ()),
    ("thought_cut", "acurank_thought_cut", "Of the calls, those whose thought the token limit cut (parse status "
     "thought-cut: the window kept its order)", ()),
    ("batches", "acurank_backend_batches", "Calls of the backend: each a batch of windows (one window a request for "
     "openai:)", ()),
    ("windows", "acurank_backend_windows", "Windows sent to the backend", ()),
    ("withdrawn", "acurank_requests_withdrawn", "Requests whose caller left (disconnect, timeout)", ()),
    ("backend_failures", "acurank_backend_failures", "Backend failures (the requests in flight failed with 502)", ()),
    ("cut_off", "acurank_requests_cut_off", "Requests in flight when a forced stop cut them off (answered 503)", ()),
)


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("acurank_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
                                registry=r)
        self.latency = Histogram("acurank_request_seconds", "Rerank requests' wall time", ["endpoint"], registry=r,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        for attr, name, about, labels in COUNTERS:
            setattr(self, attr, Counter(name, about, list(labels), registry=r))
        self.queued = Gauge("acurank_queue_depth", "Requests admitted and waiting for a place in flight", registry=r)
        self.in_flight = Gauge("acurank_in_flight", "Requests admitted and not yet answered, queued ones included",
                               registry=r)
        self.windows_out = Gauge("acurank_backend_windows_out", "Windows sent to the backend and not yet answered, "
                                 "a withdrawn request's included (they hold the backend until they finish)", registry=r)
        self.shifted = Gauge("acurank_calibration_shifted", "1: the requests' first-stage scores differ from the "
                             "calibration map's fitting queries' (its P(relevant) may not hold here); 0: they do not; "
                             "-1: not compared (no map, or fewer than 20 requests whose documents carry scores)",
                             registry=r)

    def by_status(self, endpoints: tuple[str, ...] = ("/v1/rerank", "/v2/rerank", "mcp:rerank")) -> dict[str, int]:
        """The rerank requests (HTTP and MCP calls, or those of ``endpoints``) answered so far, by HTTP status."""
        out: dict[str, int] = {}
        for metric in self.requests.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.labels["endpoint"] in endpoints:
                    status = sample.labels["status"]
                    out[status] = out.get(status, 0) + int(sample.value)
        return out

    @staticmethod
    def total(counter: Counter) -> int:
        """A counter's count so far (its ``_total`` sample, read as /metrics reads it)."""
        return int(sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total")))

    def watch(self, service: Any) -> None:
        """The gauges read the service when scraped."""
        self.queued.set_function(lambda: service.queued)
        self.in_flight.set_function(lambda: service.open)
        self.windows_out.set_function(lambda: service.windows_out)
        self.shifted.set_function(lambda: getattr(service, "shifted", -1))

    def text(self) -> bytes:
        return generate_latest(self.registry)
