"""The published AcuRank prompt, byte for byte: every case and format of ``prompt-vectors.json``.

Vectors: ``$ACURANK_PROMPT_VECTORS`` when set, else the spec's ``shared/spec/prompt-vectors.json``
when present, else the copy bundled in ``tests/data`` (so the test runs in every clone). Counts use
the spec's stand-in counter, so no model is needed; ``llama3`` goes through a real transformers
tokenizer's ``apply_chat_template`` (the ``chat`` format), the others through our fixed templates.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from acurank_cli.records import Doc
from acurank_cli.rerankers.listwise.prompt_builder import PromptBuilder
from acurank_cli.rerankers.listwise.prompts import CHAT_MESSAGES, RegexTokenCounter, get_format

from conftest import DATA, SHARED


def _vector_file() -> Path:
    if os.environ.get("ACURANK_PROMPT_VECTORS"):
        return Path(os.environ["ACURANK_PROMPT_VECTORS"])
    shared = SHARED / "spec" / "prompt-vectors.json"
    return shared if shared.exists() else DATA / "prompt-vectors.json.gz"


def _load() -> dict:
    path = _vector_file()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


VECTORS = _load()
CASES = [(case, fmt) for case in VECTORS["cases"] for fmt in case["expected"]]


def _chat_tokenizer(spec: dict):
    """A real transformers tokenizer carrying the vector's chat template and special tokens."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {spec["bos_token"]: 0, spec["eos_token"]: 1, "[UNK]": 2}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")),
                                  bos_token=spec["bos_token"], eos_token=spec["eos_token"], unk_token="[UNK]")
    tok.chat_template = spec["chat_template"]
    return tok


def _builder(fmt: str, context_size: int) -> PromptBuilder:
    counter = RegexTokenCounter()
    if fmt == "openai":
        return PromptBuilder(CHAT_MESSAGES, counter, context_size, fix_rendered=False)
    if fmt in ("rankzephyr", "rankvicuna"):
        ours = get_format(fmt)
        assert ours.render([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], None) == \
            _chat_tokenizer(VECTORS["templates"][fmt]).apply_chat_template(
                [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], tokenize=False,
                add_generation_prompt=True)  # our fixed template renders as transformers renders the spec's
        return PromptBuilder(ours, counter, context_size)
    return PromptBuilder(get_format("chat"), counter, context_size, tokenizer=_chat_tokenizer(VECTORS["templates"][fmt]))


@pytest.mark.parametrize("case, fmt", CASES, ids=[f"{c['name']}-{f}" for c, f in CASES])
def test_prompt_vector(case, fmt):
    assert case["counter"] == "regex"
    expected = case["expected"][fmt]
    docs = [Doc(d["docid"], d["text"], d["title"]) for d in case["docs"]]
    prompt = _builder(fmt, case["context_size"]).build(case["query"], docs)
    if fmt == "openai":
        assert [dict(m) for m in prompt.messages] == expected["messages"]
    else:
        assert prompt.messages[1]["content"] == expected["user"]
        assert prompt.text == expected["text"]
        assert prompt.answer_tokens == expected["max_new_tokens"]
    assert prompt.max_length == expected["max_length"]
    assert prompt.tokens == expected["tokens"]


def test_vectors_cover_every_format():
    assert {f for _, f in CASES} == {"rankzephyr", "rankvicuna", "llama3", "openai"}
    assert len(CASES) >= 40
