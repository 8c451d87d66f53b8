"""The hf: backend on a tiny random Llama built at test time (no hub, no downloads)."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from acurank_cli.errors import InputError
from acurank_cli.records import Doc, RerankRequest
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.rerankers.listwise.prompts import SYSTEM_MESSAGE

from tiny_models import CHAT_TEMPLATE, build_model_dir as _build_model_dir

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return _build_model_dir(tmp_path_factory.mktemp("tiny-llama"), CHAT_TEMPLATE)


@pytest.fixture(scope="module")
def plain_model_dir(tmp_path_factory):
    return _build_model_dir(tmp_path_factory.mktemp("tiny-llama-plain"), None)


def _requests():
    texts = [
        "Paris is the capital and most populous city of France.",
        "The quick brown fox jumps over the lazy dog [3] again.",
        "Paris is the capital of France.",
        "lazy dog",
        "relevance of passages " * 40,
    ]
    reqs = []
    for k in range(1, 6):  # windows of different sizes -> prompts of different lengths
        docs = texts[:k] if k > 1 else texts[:2]
        ids = tuple(f"d{i}" for i in range(len(docs)))
        titled = tuple(Doc(d, t, "France" if i == 2 else "") for i, (d, t) in enumerate(zip(ids, docs)))
        reqs.append(RerankRequest(f"q{k}", "what is the capital of France" + "?" * k, ids, titled))
    return reqs


def _opts(**kw):
    base = {"device": "cpu", "dtype": None, "batch_size": 8, "context_size": 1024, "prompt_format": None,
            "temperature": 0}
    base.update(kw)
    return base


def test_chat_prompt_renders_through_template(model_dir):
    rr = build_reranker(f"hf:{model_dir}", **_opts())
    assert rr.format.name == "chat"
    req = _requests()[2]
    text = rr.prompt_key(req)
    assert text.startswith("<s><|system|>\n" + SYSTEM_MESSAGE + "</s>\n<|user|>\n")
    assert text.endswith("<|assistant|>\n")
    assert "[1] Paris is the capital" in text and "[3] Title: France Content:" in text
    assert "Search Query: what is the capital of France???." in text
    assert "(3) again" in text  # marker inside a passage neutralised
    ident = rr.cache_identity()
    assert ident["backend"] == "hf" and ident["prompt_format"] == "chat" and ident["dtype"] == "float32"
    assert ident["context_size"] == 1024 and ident["bos"] == "single"


def test_batched_generation_equals_unbatched(model_dir):
    reqs = _requests()
    one = build_reranker(f"hf:{model_dir}", **_opts(batch_size=1)).rerank(reqs)
    many = build_reranker(f"hf:{model_dir}", **_opts(batch_size=4)).rerank(reqs)
    assert [r.raw for r in one] == [r.raw for r in many]
    assert [r.order for r in one] == [r.order for r in many]
    assert [(r.input_tokens, r.output_tokens) for r in one] == [(r.input_tokens, r.output_tokens) for r in many]
    for req, res in zip(reqs, many):
        assert sorted(res.order) == list(range(len(req.docids)))
        n = len(req.docids)  # exactly out(n) new tokens: tokens of "[1] > ... > [n]" minus 1
        assert res.output_tokens == len(rr_tok(model_dir)(" > ".join(f"[{i}]" for i in range(1, n + 1)))["input_ids"]) - 1
        assert res.input_tokens > 50
        assert res.latency > 0 and res.backend.startswith("hf:")


def rr_tok(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def test_garbage_output_is_repaired_not_fatal(model_dir):
    rr = build_reranker(f"hf:{model_dir}", **_opts())
    results = rr.rerank(_requests())
    for res in results:
        assert res.parse in ("ok", "repaired", "unparseable")
    # A random model does not write a clean full ranking.
    assert any(r.parse != "ok" for r in results)


def _program_loop(src, dst, loop_text: str):
    """Copy the tiny model so that greedy decoding after the prompt writes ``loop_text`` forever.

    Attention and MLP outputs are zeroed, so the last hidden state is the (normalised) embedding
    of the current token; chain tokens get orthogonal embeddings and each token's output row
    points at its predecessor's: a first-order "next token" table, decoded by the real code path.
    """
    from transformers import AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(src)
    model = LlamaForCausalLM.from_pretrained(src)
    loop = tok(loop_text, add_special_tokens=False)["input_ids"]
    assert len(set(loop)) == len(loop), loop
    start = tok("\n", add_special_tokens=False)["input_ids"][-1]  # the prompt ends with "<|assistant|>\n"
    assert start not in loop
    hidden = model.config.hidden_size
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        head = model.lm_head.weight
        chain = [start, *loop]
        for k, t in enumerate(chain):
            emb[t] = 0.0
            emb[t, k] = 1.0
        for k, t in enumerate(loop):
            head[t] = 0.0
        preds = {loop[0]: [start, loop[-1]]}
        preds.update({loop[k]: [loop[k - 1]] for k in range(1, len(loop))})
        for t, ps in preds.items():
            for p in ps:
                head[t, chain.index(p)] = 30.0 / hidden**0.5 * 8
    model.save_pretrained(dst)
    tok.save_pretrained(dst)
    return dst


def test_model_garbage_with_identifiers_is_repaired(model_dir, tmp_path):
    looped = _program_loop(model_dir, tmp_path / "looped", " > [2]")
    rr = build_reranker(f"hf:{looped}", **_opts())
    req = _requests()[3]  # a window of 4
    res = rr.rerank([req])[0]
    assert res.raw.startswith(" > [2] > [2]")  # repeats: the model never stops
    assert res.output_tokens == rr.prompt(req).answer_tokens
    assert res.parse == "repaired" and res.order == (1, 0, 2, 3)


def test_prompt_shrinks_to_context(model_dir):
    long_texts = tuple(Doc(d, f"word{i} relevance " * 400) for i, d in enumerate("abcd"))
    req = RerankRequest("q", "capital", tuple("abcd"), long_texts)
    rr = build_reranker(f"hf:{model_dir}", **_opts(context_size=512))
    p = rr.prompt(req)
    assert p.clipped and p.tokens + p.answer_tokens <= 512 and p.max_length >= 1
    res = rr.rerank([req])[0]
    assert res.input_tokens == p.tokens and sorted(res.order) == [0, 1, 2, 3]


def test_plain_tokenizer_defaults_to_rankvicuna(plain_model_dir):
    rr = build_reranker(f"hf:{plain_model_dir}", **_opts())
    assert rr.format.name == "rankvicuna"
    text = rr.prompt_key(_requests()[1])
    assert text.startswith("<s>[INST] <<SYS>>\n" + SYSTEM_MESSAGE + "\n<</SYS>>\n\nI will provide you with 2 passages")
    assert text.endswith("do not say any word or explain. [/INST]")
    zephyr = build_reranker(f"hf:{plain_model_dir}", **_opts(prompt_format="rankzephyr"))
    assert zephyr.prompt_key(_requests()[1]).startswith("<|system|>\n" + SYSTEM_MESSAGE + "</s>\n<|user|>\n")
    with pytest.raises(InputError, match="chat template"):
        build_reranker(f"hf:{plain_model_dir}", **_opts(prompt_format="chat"))


def test_missing_model_is_an_input_error(tmp_path, monkeypatch):
    """A path that is not there says so (not the hub's "Repo id must be in the form ..."); a hub id is left to the
    hub (offline here: "cannot load model"); an existing folder is used as a folder."""
    from acurank_cli.rerankers.backends.checkpoints import resolve_model

    monkeypatch.chdir(tmp_path)
    for path in (str(tmp_path / "nope"), "./nope", "../nope", "~/surely-not-a-model-folder"):
        with pytest.raises(InputError, match=rf"^hf: no model folder '{re.escape(path)}'$"):
            build_reranker(f"hf:{path}", **_opts())
    assert resolve_model("castorini/rank_zephyr_7b_v1_full", "hf").location == "castorini/rank_zephyr_7b_v1_full"
    assert resolve_model(".", "hf").location == str(tmp_path.resolve())


@pytest.fixture()
def hub(monkeypatch):
    """The hub's endpoint and offline switch, as huggingface_hub read them at import, set per test (and the
    memoised reachability forgotten before and after)."""
    from huggingface_hub import constants

    from acurank_cli.rerankers.backends.checkpoints import hub_unreachable

    hub_unreachable.cache_clear()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    yield lambda endpoint: monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    hub_unreachable.cache_clear()


def test_a_hub_id_without_a_network_reads_the_local_cache_at_once(hub, model_dir, monkeypatch):
    """No network (the hub's host does not resolve, or HF_HUB_OFFLINE): a hub id loads with local_files_only, so
    a missing model fails at once (not after the hub library's retries, ~50 s) and the error says why; a folder
    is never affected, and a host that resolves leaves loading to the hub library."""
    from huggingface_hub import constants

    from acurank_cli.rerankers.backends.checkpoints import hub_kwargs, hub_unreachable, offline_note

    hub("https://no-such-host.invalid")
    assert hub_unreachable() == "no-such-host.invalid does not resolve"
    assert hub_kwargs("no-such-org/no-such-model") == {"local_files_only": True} and hub_kwargs(str(model_dir)) == {}
    with pytest.raises(InputError, match=r"^hf: cannot load model 'no-such-org/no-such-model' \(no network: "
                                         r"no-such-host.invalid does not resolve; only the local cache was read\): "):
        build_reranker("hf:no-such-org/no-such-model", **_opts())
    assert build_reranker(f"hf:{model_dir}", **_opts()).model is not None  # a folder loads as before
    hub_unreachable.cache_clear()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert hub_unreachable() == "HF_HUB_OFFLINE is set"
    hub_unreachable.cache_clear()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hub("http://127.0.0.1:9")  # resolves: the hub library decides (and may retry), as with a network
    assert hub_unreachable() is None and hub_kwargs("no-such-org/no-such-model") == {} and offline_note("x/y") == ""


def test_bos_once_by_default_twice_with_double_bos(model_dir):
    """The template writes <s>; by default the tokenizer does not add a second one (--double-bos does,
    as the published code did). Counting and generation read the same ids."""
    req = _requests()[1]
    single = build_reranker(f"hf:{model_dir}", **_opts())
    double = build_reranker(f"hf:{model_dir}", **_opts(double_bos=True))
    bos = single.tokenizer.bos_token_id
    text = single.prompt(req).text
    assert text.startswith("<s>") and text == double.prompt(req).text
    ids1, ids2 = single.builder.counter.ids(text), double.builder.counter.ids(text)
    assert ids1[0] == bos and ids1[1] != bos
    assert ids2[:2] == [bos, bos] and ids2[1:] == ids1
    assert double.prompt(req).tokens == single.prompt(req).tokens + 1
    assert single.rerank([req])[0].input_tokens + 1 == double.rerank([req])[0].input_tokens
    assert single.cache_identity()["bos"] == "single" and double.cache_identity()["bos"] == "double"


def test_logits_answers_are_the_full_rows_letter_scores(model_dir):
    """--answer logits: the backend cuts the last position's logits to the letters' columns on the device; each
    letter's score must still be the log-sum-exp over its token variants of the full row that one unbatched forward
    pass of the prompt gives (checked here with the model called directly), in batches of 1 and 4 alike."""
    import math

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    vocab = tok.get_vocab()
    reqs = _requests()
    for batch_size in (1, 4):
        rr = build_reranker(f"hf:{model_dir}", **_opts(batch_size=batch_size, answer="logits"))
        for req, res in zip(reqs, rr.rerank(reqs)):
            ids = tok(rr.prompt(req).text, add_special_tokens=False)["input_ids"]
            with torch.inference_mode():
                row = model(input_ids=torch.tensor([ids])).logits[0, -1].tolist()
            expected = []
            for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:len(req.docids)]:
                variants = [row[vocab[t]] for t in (letter, "Ġ" + letter, "▁" + letter) if t in vocab]
                top = max(variants)
                expected.append(top + math.log(sum(math.exp(v - top) for v in variants)))
            assert res.scores == pytest.approx(expected, abs=1e-4)
            assert list(res.order) == sorted(range(len(expected)), key=lambda i: (-expected[i], i))


def _three_passage_requests():
    """Six windows of three passages each (one answer length, so one group), of six prompt lengths."""
    words = "Paris is the capital and most populous city of France the quick brown fox".split()
    reqs = []
    for q in range(6):
        texts = [" ".join(words[: 3 + (q * 5 + j) % len(words)]) * (1 + q) for j in range(3)]
        ids = tuple(f"d{j}" for j in range(3))
        reqs.append(RerankRequest(f"q{q}", "what is the capital of France", ids,
                                  tuple(Doc(d, t) for d, t in zip(ids, texts))))
    return reqs


def test_batches_by_tokens_hold_at_most_the_budget_and_answer_as_one_by_one(model_dir):
    """--batch-tokens: a batch is cut where its padded size (rows x its longest prompt, the prompts sorted by
    length) would pass the budget; the answers are those of one window at a time."""
    reqs = _three_passage_requests()
    one = build_reranker(f"hf:{model_dir}", **_opts(batch_size=1)).rerank(reqs)
    probe = build_reranker(f"hf:{model_dir}", **_opts())
    lengths = sorted(len(probe.builder.counter.ids(probe.prompt(r).text)) for r in reqs)
    assert len(set(lengths)) == 6
    budget = 3 * lengths[2]  # the three shortest fit, exactly; a fourth never does
    rr = build_reranker(f"hf:{model_dir}", **_opts(batch_size=1, batch_tokens=budget))
    prompts = [rr.prompt(r) for r in reqs]
    ids = [rr.builder.counter.ids(p.text) for p in prompts]
    batches = rr._batches(prompts, ids)
    by_length = sorted(range(6), key=lambda i: len(ids[i]))
    # by hand: rows x the longest so far <= budget; 3 x lengths[2] == budget: the first three together; then
    # lengths[3] alone or with lengths[4] (2 x lengths[4] <= budget?), and so on
    expected, current = [], []
    for i in by_length:
        if current and (len(current) + 1) * len(ids[i]) <= budget:
            current.append(i)
        else:
            if current:
                expected.append(current)
            current = [i]
    expected.append(current)
    assert batches == expected and batches[0] == by_length[:3]
    many = rr.rerank(reqs)
    assert [r.raw for r in many] == [r.raw for r in one] and [r.order for r in many] == [r.order for r in one]


def test_the_device_grammar_allows_what_the_token_grammar_allows(model_dir):
    """Constrained decoding's grammar runs on the model's device: at every step of random answers (rows of 2, 3, 10,
    12 and 20 passages, every token chosen among those the reference grammar allows), the tokens its mask leaves open
    are exactly :meth:`TokenGrammar.allowed` (the end token alone once an answer is complete; every token for a
    row that has ended), with no read-back to the host."""
    import random

    import torch
    from transformers import AutoTokenizer

    from acurank_cli.rerankers.listwise.answers import AnswerDecoding, AnswerMode, DeviceGrammar, PermutationGrammar

    tok = AutoTokenizer.from_pretrained(model_dir)
    tokens = AnswerDecoding(tok, AnswerMode.constrained, "hf").grammar
    vocab = len(tok)
    nums, width = [2, 3, 10, 12, 12, 20], 5
    for seed in range(12):
        rng = random.Random(seed)
        run = DeviceGrammar(torch, tokens).start(nums, width)
        grammars = [PermutationGrammar(n) for n in nums]
        states = [g.start() for g in grammars]
        input_ids = torch.zeros((len(nums), width), dtype=torch.long)
        completed = 0
        for _ in range(200):
            masked = run.step(input_ids, torch.zeros((len(nums), vocab)))
            chosen = []
            for row, state in enumerate(states):
                open_ = set(torch.isfinite(masked[row]).nonzero().flatten().tolist())
                expected = set(range(vocab)) if state is None else set(tokens.allowed(grammars[row], state))
                assert open_ == expected, (seed, row, state)
                chosen.append(rng.choice(sorted(expected)) if state is not None else tok.pad_token_id)
            for row, tid in enumerate(chosen):
                state = states[row]
                if state is not None and state.complete:
                    completed += 1
                states[row] = None if state is None or state.complete else tokens.advance(grammars[row], state, tid)
            input_ids = torch.cat([input_ids, torch.tensor(chosen)[:, None]], dim=1)
            if all(s is None for s in states):
                break
        assert completed == len(nums)  # every row wrote a whole permutation and its end


def test_constrained_answers_are_permutations_in_the_format(model_dir):
    """hf: --answer constrained on the tiny model: every answer of a batch (windows of 3 and 12) is a permutation
    written in the published format, ended by the end token."""
    from acurank_cli.rerankers.backend import build_reranker

    rr = build_reranker(f"hf:{model_dir}", answer="constrained", device="cpu", context_size=1024)
    try:
        reqs = [RerankRequest("q", "capital of France", tuple(f"d{i}" for i in range(n)),
                              tuple(Doc(f"d{i}", f"Paris passage {i}") for i in range(n))) for n in (3, 12)]
        for req, r in zip(reqs, rr.rerank(reqs)):
            n = len(req.docids)
            assert r.parse == "ok" and sorted(r.order) == list(range(n))
            assert r.raw.strip() == " > ".join(f"[{i + 1}]" for i in r.order), r.raw
    finally:
        rr.close()


def test_a_prompt_is_tokenised_once(model_dir):
    """A prompt's ids are read when it is built (to fit the context) and kept for the forward pass: each window
    of a call is tokenised once, and the answers are those of a reranker that tokenises everything afresh."""
    reqs = _requests()
    fresh = build_reranker(f"hf:{model_dir}", **_opts(answer="logits"))
    fresh.builder.counter.KEPT = 0  # keeps nothing: tokenises at build and again to run
    expected = [(r.order, r.scores) for r in fresh.rerank(reqs)]
    rr = build_reranker(f"hf:{model_dir}", **_opts(answer="logits"))
    tokenizer, calls = rr.builder.counter.tokenizer, []

    class Counting:
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, text, **kw):
            calls.append(text)
            return tokenizer(text, **kw)

    rr.builder.counter.tokenizer = Counting()
    assert [(r.order, r.scores) for r in rr.rerank(reqs)] == expected
    assert sorted(calls) == sorted(rr.prompt(r).text for r in reqs)  # once each, the prompts themselves
