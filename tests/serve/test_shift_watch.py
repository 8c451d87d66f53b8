"""A server with a calibration map watches its requests' first-stage scores as the API watches its calls (issue 83:
"serve says so in meta and /metrics"): the first 20 requests whose documents carry scores are compared once with
the map's fitting queries; from then on every answer's meta holds the comparison, /metrics' gauge says it, and a
shift is said once in the server's log. Requests without scores are not counted (a Cohere client sends none)."""

from __future__ import annotations

import asyncio
import json

from acurank_cli.relevance import CalibrationMap
from acurank_cli.serve.exchange import exchange
from acurank_cli.serve.limits import Limits
from acurank_cli.serve.service import start_service


def _ask(service, documents, query: str = "what do cats eat") -> dict:
    body = json.dumps({"query": query, "documents": documents}).encode()

    async def read() -> bytes:
        return body

    return asyncio.run(exchange(service, "acurank", read, "v2", "/v2/rerank"))


def _gauge(service) -> float:
    line = next(l for l in service.metrics.text().decode().splitlines() if l.startswith("acurank_calibration_shifted "))
    return float(line.split()[1])


def _served(tmp_path):
    """A server of a map whose 25 fitting queries had 20 candidates each, first-stage top 15 and median 9 (BM25 on
    MS MARCO's scale)."""
    signals = {"top": [15.0 + 0.1 * i for i in range(25)], "median": [9.0 + 0.05 * i for i in range(25)],
               "candidates": [20] * 25}
    path = tmp_path / "map.json"
    CalibrationMap(2, (0.0,) * 3, (1.0,) * 3, (0.8, 1.5, -0.3), -1.0, {"k": 10, "signals": signals}).save(path)
    return start_service("minilm", "acurank-9", {"init": "zscore"}, Limits(), None, calibration=str(path))


def test_a_server_compares_its_scored_requests_with_the_maps_queries_once(tmp_path, capsys):
    service = _served(tmp_path)
    try:
        texts = [f"cats eat food number {i}" for i in range(20)]
        plain = _ask(service, texts)  # no scores: not counted
        assert "calibration_shift" not in plain["meta"]["acurank"] and _gauge(service) == -1
        for n in range(20):  # 20 queries with cosine-like scores, far below the map's: a shift
            scored = [{"text": t, "score": round(0.9 - 0.03 * i - 0.001 * n, 4)} for i, t in enumerate(texts)]
            answer = _ask(service, scored, f"what do cats eat, question {n}")
            said = answer["meta"]["acurank"].get("calibration_shift")
            assert (said is None) == (n < 19), n  # compared at the 20th scored request, then in every answer
        assert said["shifted"] is True and said["queries"] == 20 and said["fitted"] == 25 and said["p"] < 0.01
        assert _gauge(service) == 1
        again = _ask(service, texts)
        assert again["meta"]["acurank"]["calibration_shift"] == said
    finally:
        service.close()
    log = [line for line in capsys.readouterr().err.splitlines() if "warning: --calibration" in line]
    assert len(log) == 1 and "these 20 queries' first-stage scores differ from the 25 the map was fit on" in log[0]


def test_one_query_asked_again_and_again_is_one_query_not_a_sample(tmp_path):
    """A request repeated (a client's retries, a popular question) is one query of the collection: 25 copies of one
    query, on the map's own scale, are never compared as 20 (their one value against the map's spread was a false
    alarm, held for the server's life)."""
    service = _served(tmp_path)
    try:
        scored = [{"text": f"cats eat food number {i}", "score": 16.0 - 0.3 * i} for i in range(20)]
        for n in range(25):  # the same question, sent again with other spacing and case
            answer = _ask(service, scored, "What do cats eat" + " " * n if n % 2 else "what  do cats eat")
        assert "calibration_shift" not in answer["meta"]["acurank"] and _gauge(service) == -1
        assert service.watch.rows and len(service.watch.rows) == 1
    finally:
        service.close()
