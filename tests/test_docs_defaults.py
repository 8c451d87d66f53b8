"""Every default a doc states by hand is the code's: each claim below is read from its page and compared with the
constant or declaration it states (a default changed in one place only fails here). Defaults the docs do not state
by hand come from the code itself: --help renders the records' defaults, docs/cli-reference.md and the support
matrix are generated (tests/cli/test_cli_reference.py)."""

import dataclasses
import re
from pathlib import Path

import pytest

from acurank_cli.method.acurank_params import AcuRankParams
from acurank_cli.method.thinking_gate import DEFAULT_THINK_ABOVE
from acurank_cli.rerankers.backends import hf, openai, vllm
from acurank_cli.rerankers.backends.simulated import SimulatedOptions
from acurank_cli.rerankers.listwise.thinking import DEFAULT_LOCAL_BUDGET
from acurank_cli.rerankers.option_groups import TorchOptions
from acurank_cli.run.lanes import QUERIES_PER_LANE
from acurank_cli.run.passages import DEFAULT_WORDS, MAX_PER_DOC
from acurank_cli.run.pipeline import BATCH_QUERIES_DEFAULT, DEFAULTS
from acurank_cli.serve.limits import DEFAULT_LIMITS
from tests.conftest import acurank

ROOT = Path(__file__).resolve().parents[1]


def default(record, name):
    return next(f.default for f in dataclasses.fields(record) if f.name == name)


#: (page, pattern whose group is the stated default, the code's value)
CLAIMS = [
    ("docs/thinking.md", r"`--think-above X` \| [^|]*?\(default ([0-9.]+)", DEFAULT_THINK_ABOVE),
    ("docs/thinking.md", r"at least `--think-above` \(default ([0-9.]+)\)", DEFAULT_THINK_ABOVE),
    ("docs/thinking.md", r"default ([0-9,]+) when thinking", DEFAULT_LOCAL_BUDGET),
    ("docs/thinking.md", r"`--sim-think-noise` \(default ([0-9.]+)", default(SimulatedOptions, "sim_think_noise")),
    ("docs/thinking.md", r"`--sim-think-tokens` thought tokens \(default ([0-9,]+)\)",
     default(SimulatedOptions, "sim_think_tokens")),
    ("docs/rerankers.md", r"`--batch-tokens` \(default ([0-9]+) there\)", hf.CUDA_BATCH_TOKENS),
    ("docs/rerankers.md", r"`--top-logprobs` alternatives \(default ([0-9]+)", default(openai.OpenAIOptions, "top_logprobs")),
    ("docs/rerankers.md", r"`--batch-size 1` with `hf:`\*\*; the default ([0-9]+) is", default(TorchOptions, "batch_size")),
    ("docs/serve.md", r"\(default ([0-9]+), as Cohere cuts", DEFAULT_LIMITS.max_tokens_per_doc),
    ("docs/api.md", r"`out\.k`, default ([0-9]+)\)", default(AcuRankParams, "k")),
    ("docs/api.md", r"backend spec \(default `([a-z]+)`", DEFAULTS.backend),
    ("docs/api.md", r"`method=`, default `([a-z-]+)`", DEFAULTS.method),
    ("README.md", r"\| `([a-z]+)` \(default\) \|", DEFAULTS.backend),
    ("docs/rerank.md", r"`--depth N`, default ([0-9]+)\)", DEFAULTS.depth),
    ("docs/long-documents.md", r"`--max-passages` passages per document are made \(default ([0-9]+)", MAX_PER_DOC),
    ("docs/long-documents.md", r"split into passages of ([0-9]+) words \(stride", DEFAULT_WORDS),
    ("docs/rerank.md", r"at most `--max-passages` \(([0-9]+)\) a document", MAX_PER_DOC),
]


def value(text: str, like):
    text = text.replace(",", "")
    return type(like)(float(text)) if isinstance(like, (int, float)) else text


@pytest.mark.parametrize("page, pattern, code", CLAIMS, ids=[f"{p}:{c!r}" for p, _, c in CLAIMS])
def test_a_default_the_docs_state_is_the_codes(page, pattern, code):
    found = re.findall(pattern, (ROOT / page).read_text(encoding="utf-8"))
    assert found, f"{page} no longer states it ({pattern}): update this claim"
    assert {value(v, code) for v in found} == {code}, (page, found, code)


def flat(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def test_the_batch_queries_default_is_said_once_and_is_the_backends():
    said = BATCH_QUERIES_DEFAULT
    # what the sentence says, against the code that decides it
    assert f"{vllm.VLLMReranker.batch_queries} for vllm:" in said
    assert f"at least {openai.OpenAIReranker.batch_queries} for openai: ({QUERIES_PER_LANE} x" in said
    assert f"{hf.CUDA_QUERIES_IN_FLIGHT} for hf: on a GPU" in said and f"{QUERIES_PER_LANE} x the actors" in said
    # every place that states it states this sentence
    for page in ("docs/api.md", "docs/design.md", "acurank_cli/api.py"):
        assert flat(said) in flat((ROOT / page).read_text(encoding="utf-8")), page
    assert flat(said) in flat(acurank("rerank", "--help").stdout.replace("-\n", "-"))


def test_the_depth_default_is_one_constant():
    for command, flag in (("rerank", "--depth"), ("retrieve", "--hits"), ("convert", "--depth")):
        helped = " ".join(acurank(command, "--help").stdout.split())
        said = re.search(re.escape(flag) + r"[ ,].*?\[default: (\d+)", helped)
        assert said and int(said.group(1)) == DEFAULTS.depth, command
