"""docs/support-matrix.md is generated from the registries (a fresh generation equals the committed page), and
every cell it marks "works" runs here: each method family with each backend (hf: and ce: on tiny local models
built at test time, openai: against a loopback server), and each prompt format x answer mode of the LLM backends.
A run works when it returns every document once, in a permutation, having made its calls."""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import support_matrix  # noqa: E402

pytest.importorskip("transformers", reason="the llm extra is not installed")

from fake_chat_server import FakeServer  # noqa: E402
from tiny_models import CHAT_TEMPLATE, build_cross_encoder_dir, build_model_dir  # noqa: E402

from acurank_cli.api import Reranker  # noqa: E402

DOCS = [{"id": f"d{i}", "text": f"passage {i} about fleas and their life cycle {'and cats ' * (i % 3)}",
         "score": 20.0 - i * 0.7} for i in range(12)]
GRADES = {"q": {"d3": 2, "d7": 1, "d10": 3}}


def test_the_committed_matrix_equals_a_fresh_generation():
    """In a fresh interpreter: no plug-in another test registered."""
    import subprocess

    from conftest import ENV

    env = {k: v for k, v in ENV.items() if k not in ("ACURANK_METHODS", "ACURANK_BACKENDS")}
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "support_matrix.py"), "--check"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, f"docs/support-matrix.md is stale: run python scripts/support_matrix.py\n{check.stderr}"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {"hf": build_model_dir(tmp_path_factory.mktemp("tiny-llama"), CHAT_TEMPLATE),
            "ce": build_cross_encoder_dir(tmp_path_factory.mktemp("tiny-ce"))}


@pytest.fixture(scope="module")
def server():
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        yield srv


def _reranker(backend: str, method: str, models, server, **extra) -> Reranker:
    options = {"cache": None, **extra}
    spec = {"simulated": "simulated", "minilm": "minilm", "ce": f"ce:{models['ce']}", "hf": f"hf:{models['hf']}",
            "openai": "openai:test-model"}[backend]
    if backend == "simulated":
        options.update(qrels=GRADES, sim_noise=0.5)
    if backend == "hf":
        options.update(device="cpu", context_size=1024, temperature=0)
    if backend == "openai":
        options.update(base_url=server.base_url, retries=0, timeout=10.0)
    return Reranker(spec, method=method, **options)


def _works(rr: Reranker, method: str) -> None:
    with rr:
        out = rr.rerank("how long is the life cycle of a flea", DOCS, qid="q")
    ids = [d.id for d in out.docs]
    kept = len(DOCS)  # every document once (the API keeps BlitzRank's uncertified ones below its top k)
    assert len(ids) == len(set(ids)) == kept and set(ids) <= {d["id"] for d in DOCS}, ids
    assert [d.rank for d in out.docs] == list(range(1, kept + 1)) and out.calls >= 1


@pytest.mark.parametrize("method, backend", [(m, b) for m, b, s in support_matrix.method_cells() if s == "works"])
def test_every_method_runs_with_every_backend(method, backend, models, server):
    _works(_reranker(backend, method, models, server), method)


@pytest.mark.parametrize("backend, fmt, answer", [c[:3] for c in support_matrix.llm_cells() if c[3] == "works"])
def test_every_prompt_format_and_answer_mode_runs(backend, fmt, answer, models, server):
    extra = {"answer": answer}
    if backend != "openai":
        extra["prompt_format"] = fmt
    _works(_reranker(backend, "sw-1", models, server, **extra), "sw-1")
