"""Rerankers that think: the answer is read, never the thought, from every form a server emits; thinking's
controls reach the request; thoughts are counted apart; gated thinking thinks where the method is uncertain."""

from __future__ import annotations

import json

import numpy as np
import pytest

from acurank_cli.errors import InputError
from acurank_cli.method.thinking_gate import ThinkingGate, unsettled
from acurank_cli.records import Doc, ParseStatus, RerankRequest
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.rerankers.listwise.parsing import ascii_digits, parse_ranking
from acurank_cli.rerankers.listwise.thoughts import opens_thought, read_thought
from fake_chat_server import FakeServer


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# -- the one reader -----------------------------------------------------------------------------------------------

REAL, DECOY = "[3] > [1] > [2]", "[2] > [3] > [1]"


@pytest.mark.parametrize("text", [
    f"<think>at first glance {DECOY}, but no</think>\n\n{REAL}",
    f"at first glance {DECOY}</think>{REAL}",  # the opening tag was in the template (R1's distills)
    f"<THINK>{DECOY}</THINK> {REAL}",
    f"<thinking>{DECOY}</thinking>{REAL}",
    f"<thought>{DECOY}</thought>{REAL}",
    f"<reasoning>{DECOY}</reasoning>{REAL}",
    f"<seed:think>{DECOY}</seed:think>{REAL}",
    f"◁think▷{DECOY}◁/think▷{REAL}",
    f"<|begin_of_thought|>{DECOY}<|end_of_thought|><|begin_of_solution|>{REAL}<|end_of_solution|>",
    f"<|START_THINKING|>{DECOY}<|END_THINKING|>{REAL}",
    f"[THINK]{DECOY}[/THINK]{REAL}",
    f"<think>{DECOY}</think><answer>{REAL}</answer>",
    f"<think>one {DECOY}</think><think>two {DECOY}</think>{REAL}",  # the answer follows the last thought
    f"<|channel|>analysis<|message|>{DECOY}<|end|><|start|>assistant<|channel|>final<|message|>{REAL}<|return|>",
])
def test_the_ranking_is_read_from_the_answer_never_the_thought(text):
    thought = read_thought(text)
    assert not thought.cut and DECOY in thought.thought
    assert parse_ranking(thought.answer, 3).order == (2, 0, 1)


@pytest.mark.parametrize("text,opened", [
    (f"<think>at first {DECOY} and then", False),  # cut inside the thought
    (f"at first {DECOY}", True),  # the prompt opened the thought, which never closed
    (f"<|channel|>analysis<|message|>{DECOY}", False),  # gpt-oss: no final message
])
def test_a_thought_that_never_ended_is_cut(text, opened):
    thought = read_thought(text, opened=opened)
    assert thought.cut and thought.answer == ""


def test_the_answer_runs_to_a_new_thought_that_never_ended():
    assert read_thought(f"<think>x</think>{REAL}<think>again {DECOY}").answer == REAL


def test_a_servers_reasoning_field_is_kept_apart_and_a_plain_answer_is_untouched():
    thought = read_thought(REAL, reasoning=f"first {DECOY}")
    assert thought.answer == REAL and thought.thought == f"first {DECOY}"
    assert read_thought("  [1] > [2]\n").answer == "  [1] > [2]\n"  # byte for byte, as the published parser reads it


def test_a_prompt_that_opens_a_thought():
    assert opens_thought("<|assistant|>\n<think>\n")
    assert not opens_thought("<|assistant|>\n<think>\n\n</think>\n\n")
    assert not opens_thought("<|assistant|>\n")


def test_identifiers_in_other_digits_are_read_as_digits():
    assert ascii_digits("[¹²] > [３] > ⑫ > ⓬") == "[12] > [3] >  12  >  12 "
    assert parse_ranking("[²] > [¹] > [³]", 3).order == (1, 0, 2)
    assert parse_ranking("② > ③ > ①", 3).order == (1, 2, 0)
    assert parse_ranking("［３］ > ［１］ > ［２］", 3).order == (2, 0, 1)
    assert parse_ranking("[1] > [2]", 2).status == ParseStatus.ok


# -- openai: against loopback servers that answer as each family does ---------------------------------------------


def _reqs(queries=("alpha", "beta", "gamma"), n=4):
    return [RerankRequest(f"q{i}", q, tuple(f"d{j}" for j in range(n)),
                          tuple(Doc(f"d{j}", f"passage {j} about {q}") for j in range(n))) for i, q in enumerate(queries)]


def _answer(n):
    return " > ".join(f"[{i}]" for i in (2, 1, *range(n, 2, -1)))  # a final answer no decoy equals


def _message(n, style):
    real, decoy = _answer(n), " > ".join(f"[{i}]" for i in range(n, 0, -1))
    if style == "plain":
        return {"content": real}, {}
    if style == "inline":
        return {"content": f"<think>\nAt first glance {decoy}. Let me check.\n</think>\n\n{real}"}, {}
    if style == "close-only":
        return {"content": f"At first glance {decoy}.\n</think>\n\n{real}"}, {}
    if style == "field":
        return {"content": real, "reasoning_content": f"At first glance {decoy}."}, {}
    if style == "hidden":
        return {"content": real}, {"completion_tokens_details": {"reasoning_tokens": 50}}
    if style == "cut":
        return {"content": f"<think>\nAt first glance {decoy}. Hmm"}, {}
    if style == "cut-untagged":  # the template opened the thought: no tag at all, and the limit came first
        return {"content": f"At first glance {decoy}. Hmm"}, {}
    if style == "cut-field":  # the server kept the thought apart, and no content came
        return {"content": "", "reasoning_content": f"At first glance {decoy}. Hmm"}, {}
    if style == "cut-answer":  # the answer itself ran into the limit: read as an answer, never as a cut thought
        return {"content": real[:-1]}, {}
    raise AssertionError(style)


def _server(style, refuse=False):
    def respond(n, body):
        if refuse and "temperature" in body:
            return 400, {"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model. "
                                              "Only the default (1) value is supported.", "param": "temperature"}}
        if refuse and "max_tokens" in body:
            return 400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this "
                                              "model. Use 'max_completion_tokens' instead.", "param": "max_tokens"}}
        message, details = _message(n, style)
        usage = {"prompt_tokens": 100, "completion_tokens": 57 if style == "hidden" else 9, **details}
        finish = "length" if style.startswith("cut") else "stop"
        return 200, {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
                     "usage": usage}

    return FakeServer(lambda q, a: ("ok", 0.0), respond)


def _rerank(style, refuse=False, **kw):
    with _server(style, refuse) as srv:
        rr = build_reranker("openai:qwen3", base_url=srv.base_url, concurrency=2, timeout=5.0, retries=0, **kw)
        results = rr.rerank(_reqs())
        rr.close()
    return results, srv


@pytest.mark.parametrize("answer", ["text", "constrained"])
@pytest.mark.parametrize("style", ["inline", "close-only", "field", "hidden"])
def test_a_thinking_servers_run_equals_a_plain_servers(style, answer):
    plain, _ = _rerank("plain", answer=answer)
    thought, _ = _rerank(style, answer=answer)
    assert [r.order for r in thought] == [r.order for r in plain] == [(1, 0, 3, 2)] * 3
    assert all(r.parse == ParseStatus.ok and r.raw == _answer(4) for r in thought)
    assert all(r.reasoning_tokens > 0 and r.thinking for r in thought)
    if style == "hidden":  # the usage's count; the answer's tokens are the rest of the completion
        assert [(r.reasoning_tokens, r.output_tokens) for r in thought] == [(50, 7)] * 3


def test_a_cut_thought_is_counted_and_its_decoy_never_read():
    results, _ = _rerank("cut", thinking="on", thinking_budget=64)
    assert all(r.parse == ParseStatus.thought_cut and r.order == (0, 1, 2, 3) for r in results)
    assert all(r.raw == "" and "At first glance" in r.thought for r in results)


@pytest.mark.parametrize("style", ["cut-untagged", "cut-field"])
def test_a_thought_the_limit_cut_without_a_tag_is_cut_too(style):
    results, _ = _rerank(style, thinking="on", thinking_budget=64)
    assert all(r.parse == ParseStatus.thought_cut and r.order == (0, 1, 2, 3) for r in results)


def test_a_truncated_answer_without_thinking_is_read_as_an_answer():
    """finish_reason length on a call that was not asked to think, with no thought kept apart: the answer is read
    (and repaired as published), not taken for a thought."""
    results, _ = _rerank("cut-answer")
    assert all(r.parse != ParseStatus.thought_cut for r in results)
    assert [r.order for r in results] == [(1, 0, 3, 2)] * 3
    answered, _ = _rerank("plain", thinking="on")  # asked to think, answered at once and in full: an answer
    assert [(r.order, r.parse) for r in answered] == [((1, 0, 3, 2), ParseStatus.ok)] * 3


def test_a_reasoning_model_that_refuses_temperature_and_max_tokens_is_answered():
    plain, _ = _rerank("plain")
    results, srv = _rerank("hidden", refuse=True, thinking="on", thinking_budget=200)
    assert [r.order for r in results] == [r.order for r in plain]
    last = srv.bodies[-1]
    assert "temperature" not in last and "max_tokens" not in last
    assert last["max_completion_tokens"] > 200  # the budget plus the answer's tokens
    assert last["chat_template_kwargs"] == {"enable_thinking": True}
    refused = [b for b in srv.bodies if "temperature" in b or "max_tokens" in b]
    assert len(refused) <= 2 * len(results)  # each request revised at most once per parameter, never a failed run


def test_the_controls_reach_the_request():
    _, srv = _rerank("hidden", reasoning_effort="high")
    body = srv.bodies[0]
    assert body["reasoning_effort"] == "high" and "temperature" not in body and "chat_template_kwargs" not in body
    _, srv = _rerank("plain", thinking="off")
    assert srv.bodies[0]["chat_template_kwargs"] == {"enable_thinking": False} and "max_tokens" not in srv.bodies[0]
    _, srv = _rerank("plain")
    assert set(srv.bodies[0]) == {"model", "messages", "temperature"}  # no flag: nothing sent, as published


def test_impossible_combinations_are_refused_in_one_line():
    with pytest.raises(InputError, match="think_above goes with thinking='gated'"):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", think_above=0.5)
    with pytest.raises(InputError, match="thinking='sometimes': must be one of off, on, gated"):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", thinking="sometimes")
    with pytest.raises(InputError, match="reasoning_effort"):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", thinking="off", reasoning_effort="high")


# -- the gate -------------------------------------------------------------------------------------------------------


def test_unsettled_by_hand():
    """max over the window of sigma_i / prior_i; a document with no prior spread counts as unsettled (1); capped at 1."""
    prior = np.array([3.0, 3.0, 3.0, 3.0, 0.0, 2.0, 1.0])
    sigma = np.array([3.0, 1.5, 0.3, 0.6, 0.5, 1.0, 1.2])
    groups = [[0, 1], [1, 2], [2, 3], [4, 5], [], [5, 6]]
    assert unsettled(sigma, prior, groups) == pytest.approx((1.0, 0.5, 0.2, 1.0, 0.0, 1.0))
    assert unsettled(sigma, prior, [[2], [1, 3, 5]]) == pytest.approx((0.1, 0.5))
    assert ThinkingGate(0.6).decide((0.6, 0.59, 1.0)) == (True, False, True)


def _cli(tmp_path, *args, check=True):
    from conftest import acurank

    return acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "simulated", "--qrels",
                   "sample_runs/dl19/qrels.txt", "--no-cache", "--quiet", "--qids", "264014,1110199",
                   "-o", tmp_path / "x.run", "--overwrite", *args, check=check)


def test_gated_thinking_needs_a_method_with_an_uncertainty(tmp_path):
    _cli(tmp_path, "--method", "acurank", "--thinking", "gated")
    for method in ("sw-1", "tourrank-1"):
        refused = _cli(tmp_path, "--method", method, "--thinking", "gated", check=False)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
        assert "--thinking gated" in refused.stderr and repr(method) in refused.stderr


def test_at_think_above_one_only_the_first_judgements_think(tmp_path):
    """Every initial window holds only unjudged documents (sigma = its prior: measure 1); an answer shrinks the sigma
    of every document it ranks, so no later window reaches 1."""
    _cli(tmp_path, "--method", "acurank", "--thinking", "gated", "--think-above", "1.0",
         "--sim-think-tokens", "100", "--trace", tmp_path / "t.jsonl")
    stats = [json.loads(line) for line in open(tmp_path / "x.stats.jsonl")]
    for rec in stats:
        initial = [it for it in rec["iterations"] if it["phase"] == "initial"]
        assert [it["thinking"] for it in initial] == [it["groups"] for it in initial] == [5]
        assert all(it["thinking"] == 0 for it in rec["iterations"] if it["phase"] != "initial")
        assert rec["thinking_calls"] == 5 and rec["reasoning_tokens"] == 500
    traced = [json.loads(line) for line in open(tmp_path / "t.jsonl")]
    steps = [t for t in traced if t["phase"] in ("adaptive", "final")]  # the steps a trace holds with windows
    assert steps and all(t["think"] and not any(t["think"]) for t in steps)
    assert all("think" not in t for t in traced if t["phase"] == "done")


def test_thinking_lowers_the_simulated_noise_and_costs_its_tokens():
    qrels = {"q": {"a": 3, "b": 2, "c": 1, "d": 0}}
    req = RerankRequest("q", "query", ("d", "c", "b", "a"))
    noisy = build_reranker("simulated", qrels=qrels, sim_noise=50.0, thinking="off").rerank([req])[0]
    thinking = build_reranker("simulated", qrels=qrels, sim_noise=50.0, thinking="on", sim_think_noise=0.0,
                              sim_think_tokens=321).rerank([req])[0]
    assert thinking.order == (3, 2, 1, 0) and thinking.reasoning_tokens == 321 and thinking.thinking
    assert noisy.reasoning_tokens == 0 and not noisy.thinking


# -- hf: a tiny model whose chat template can think -----------------------------------------------------------------

#: Qwen3's switch, as its template has it: with enable_thinking false, an empty thought is written for the model
THINKING_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory):
    from tiny_models import build_model_dir

    return build_model_dir(tmp_path_factory.mktemp("tiny-thinking"), THINKING_TEMPLATE)


def _hf(path, **kw):
    return build_reranker(f"hf:{path}", device="cpu", context_size=1024, batch_size=4, **kw)


def test_hf_thinking_off_shows_in_the_prompt_bytes(thinking_model):
    req = _reqs(("alpha",))[0]
    off = _hf(thinking_model, thinking="off").prompt_key(req)
    default = _hf(thinking_model).prompt_key(req)
    assert off.endswith("<|assistant|>\n<think>\n\n</think>\n\n") and default.endswith("<|assistant|>\n")
    assert off == default + "<think>\n\n</think>\n\n"


def test_hf_every_window_answers_at_exactly_the_budget(thinking_model):
    """The random model never closes its thought: budget forcing ends it at 6 tokens, and the answer follows."""
    rr = _hf(thinking_model, thinking="on", thinking_budget=6)
    reqs = _reqs(("alpha", "beta", "gamma", "delta", "epsilon"))
    assert rr.prompt_key(reqs[0]).endswith("<|assistant|>\n<think>\n")  # the thought opened for it
    results = rr.rerank(reqs)
    assert [r.reasoning_tokens for r in results] == [6] * 5
    assert all(r.thinking and r.parse != ParseStatus.thought_cut for r in results)
    answers = _hf(thinking_model, thinking="off").rerank(reqs)
    assert all(r.output_tokens == a.output_tokens for r, a in zip(results, answers))  # out(num) after the thought


def test_hf_refuses_what_cannot_work(thinking_model):
    with pytest.raises(InputError, match="thinking_budget"):
        _hf(thinking_model, thinking_budget=8)
    with pytest.raises(InputError, match="answer='logits'"):
        _hf(thinking_model, thinking="on", answer="logits")


def test_report_efficiency_shows_thinking_tokens_beside_answer_tokens(tmp_path):
    from conftest import acurank

    runs = tmp_path / "runs" / "dl19"
    runs.mkdir(parents=True)
    (runs / "qrels.txt").write_text(open("sample_runs/dl19/qrels.txt").read())
    for name, flags in (("off", ()), ("on", ("--thinking", "on", "--sim-think-tokens", "250"))):
        _cli(tmp_path, "--method", "acurank", *flags)
        (tmp_path / "x.run").rename(runs / f"acurank-{name}.run")
        (tmp_path / "x.stats.jsonl").rename(runs / f"acurank-{name}.stats.jsonl")
    shown = acurank("report", "efficiency", "--runs", tmp_path / "runs", "--format", "csv").stdout
    header, *rows = [line.split(",") for line in shown.strip().splitlines() if line]
    assert header.index("thinking_tokens") == header.index("output_tokens") + 1  # beside the answer's tokens
    by = {r[1]: dict(zip(header, r)) for r in rows}
    assert float(by["acurank-off"]["thinking_tokens"]) == 0
    assert float(by["acurank-on"]["thinking_tokens"]) == pytest.approx(250 * float(by["acurank-on"]["calls"]))


def test_hf_keeps_a_pad_token_the_model_wrote_inside_its_thought(tmp_path):
    """The tiny model's greedy thought on the second window writes the pad id (0, a token of its vocabulary) as
    its second token: hf: used to cut the thought there, as if it were the padding ``generate`` adds after a
    stopped row, and answered after a 1-token thought where vLLM thinks for the whole budget. The thought is cut
    only at the model's end token, or after its own ``</think>``."""
    import torch
    from tiny_models import CHAT_TEMPLATE, build_model_dir

    path = build_model_dir(tmp_path / "tiny32", CHAT_TEMPLATE, head_dim=32)
    texts = ["Paris is the capital of France.", "The fox jumps over the dog.", "lazy dog", "France [2] Paris"]
    reqs = [RerankRequest(f"q{k}", f"capital of France {'?' * k}", tuple(f"d{i}" for i in range(k)),
                          tuple(Doc(f"d{i}", texts[i]) for i in range(k))) for k in range(2, 5)]
    rr = build_reranker(f"hf:{path}", dtype="fp32", context_size=1024, thinking="on", thinking_budget=5)
    results = rr.rerank(reqs)
    written = []
    for req in reqs:  # the model's own greedy thought, one window at a time (no batch, so no padding)
        ids = rr.builder.counter.ids(rr.prompt(req).text)
        out = rr.model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                max_new_tokens=5, do_sample=False, pad_token_id=rr.pad_id, temperature=None,
                                top_p=None, top_k=None)
        tokens = out[0, len(ids):].tolist()
        eos = rr.tokenizer.eos_token_id
        written.append(tokens[: tokens.index(eos)] if eos in tokens else tokens)
    assert any(rr.pad_id in w for w in written)  # the case this test is about: the model wrote the pad id
    assert [r.reasoning_tokens for r in results] == [len(w) for w in written] == [5, 5, 5]
    assert [r.thought for r in results] == [rr.tokenizer.decode(w, skip_special_tokens=True).strip() for w in written]


# -- the shapes a new user hit (issue 71): read by the reply's structure, never by the first tag met --------------

#: a thought that mentions its own closing tag, the way thoughts and answers quote one
QUOTED_CLOSES = ("`</think>`", "``</think>``", '"</think>"', "'</think>'", "“</think>”", "\\</think>",
                 "```\n</think>\n```", "<code></think></code>", "«</think>»")


@pytest.mark.parametrize("text", [
    # gpt-oss served with its special tokens stripped (no harmony parser, skip_special_tokens)
    f"analysisWe need to rank. At first glance {DECOY}.assistantfinal{REAL}",
    f"analysis We need to rank. At first glance {DECOY}. assistant final {REAL}",  # spaces between special tokens
    f"assistantanalysisAt first {DECOY}assistantcommentaryStill {DECOY}assistantfinal{REAL}",
    f"ANALYSIS{DECOY}ASSISTANTFINAL{REAL}",
    # white space inside the tags
    f"<think >at first {DECOY}</think >{REAL}",
    f"< think>at first {DECOY}< / think>\n{REAL}",
    f"<THINKING >{DECOY}</ THINKING>{REAL}",
    f"[ THINK ]{DECOY}[ /THINK ]{REAL}",
    f"<| begin_of_thought |>{DECOY}<| end_of_thought |>{REAL}",
    f"<think>{DECOY}</think>< answer >{REAL}</ answer >",
    # a closing tag quoted inside the thought
    *(f"<think>I will close with {q} later; at first {DECOY}</think>{REAL}" for q in QUOTED_CLOSES),
    *(f"at first {DECOY}, then {q}.</think>{REAL}" for q in QUOTED_CLOSES[:3]),  # the template opened it
    # the answer quotes the tag after the real ranking
    *(f"<think>at first {DECOY}</think>{REAL}\n(I ended my thought with {q}.)" for q in QUOTED_CLOSES),
])
def test_a_tag_is_read_by_the_replys_structure(text):
    thought = read_thought(text)
    assert not thought.cut and DECOY in thought.thought and DECOY not in thought.answer
    assert parse_ranking(thought.answer, 3).order == (2, 0, 1)


@pytest.mark.parametrize("text", [
    *(f"<think>The thought closes with {q} later. So the ranking is {DECOY} and" for q in QUOTED_CLOSES),
    f"<think >at first {DECOY} and",
    f"analysisWe need to rank. At first glance {DECOY} and",
    f"analysis We need. {DECOY} assistant commentary still {DECOY}",
    f"<think>at first {DECOY}</think>",  # the thought ended as the limit came: no answer
])
def test_text_the_limit_cut_inside_a_thought_is_never_read(text):
    thought = read_thought(text, truncated=True)
    assert thought.cut and thought.answer == ""


def test_a_plain_answer_that_quotes_a_tag_is_an_answer():
    for text in (f"{REAL} (no `<think>` was needed)", f"{REAL}\nI wrote no '</think>'."):
        thought = read_thought(text)
        assert not thought.cut and parse_ranking(thought.answer, 3).order == (2, 0, 1) and thought.thought == ""
    assert read_thought(f"Analysis done: {REAL}").answer == f"Analysis done: {REAL}"  # the word alone is no channel


def _shapes_server(content, finish="stop"):
    def respond(n, body):
        return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content(n)},
                                  "finish_reason": finish}], "usage": {"prompt_tokens": 100, "completion_tokens": 194}}

    return FakeServer(lambda q, a: ("ok", 0.0), respond)


def _served(content, finish="stop", **kw):
    with _shapes_server(content, finish) as srv:
        rr = build_reranker("openai:m", base_url=srv.base_url, concurrency=2, timeout=5.0, retries=0, **kw)
        results = rr.rerank(_reqs())
        rr.close()
    return results, srv


def _decoy(n):
    return " > ".join(f"[{i}]" for i in (*range(2, n + 1), 1))  # a rotation: no real answer equals it


@pytest.mark.parametrize("kw", [{}, {"reasoning_effort": "low"}])
def test_gpt_oss_stripped_of_its_special_tokens_is_read_and_counted_as_thinking(kw):
    results, _ = _served(lambda n: f"analysisWe need to rank. At first glance {_decoy(n)}.assistantfinal{_answer(n)}",
                         **kw)
    assert [(r.order, r.parse) for r in results] == [((1, 0, 3, 2), ParseStatus.ok)] * 3
    assert all(r.thinking and r.reasoning_tokens > 0 and r.output_tokens < 194 for r in results)


@pytest.mark.parametrize("kw", [{}, {"thinking": "on"}])
def test_a_cut_thought_that_quotes_its_tag_in_a_code_span_is_cut(kw):
    results, _ = _served(lambda n: f"<think>The thought closes with `</think>` later. So the ranking is {_decoy(n)} and",
                         finish="length", **kw)
    assert all(r.parse == ParseStatus.thought_cut and r.order == (0, 1, 2, 3) for r in results)
    assert all(r.reasoning_tokens == 194 and r.output_tokens == 0 for r in results)


def test_a_cut_thought_the_template_opened_counts_its_tokens_as_thinking():
    """No tag at all (the chat template opened the thought) and --thinking on: the whole completion was thought."""
    results, _ = _served(lambda n: f"At first glance {_decoy(n)}. Hmm", finish="length", thinking="on")
    assert all(r.parse == ParseStatus.thought_cut and r.order == (0, 1, 2, 3) for r in results)
    assert all((r.reasoning_tokens, r.output_tokens) == (194, 0) and r.thinking for r in results)


def test_text_the_limit_cut_with_no_marker_is_read_but_never_called_whole():
    """Without --thinking and with no tag, a template-opened thought cannot be told from a long answer: the text is
    read as an answer (the published rule reads what the model wrote) and counted ``truncated``, never ok."""
    results, _ = _served(lambda n: f"At first glance {_decoy(n)}. Hmm", finish="length")
    assert all(r.parse == ParseStatus.truncated for r in results)
    whole, _ = _served(lambda n: _answer(n), finish="length")  # a whole ranking the limit ended: still not ok
    assert all(r.parse == ParseStatus.truncated and r.order == (1, 0, 3, 2) for r in whole)


@pytest.mark.parametrize("flags,expected", [
    ({"thinking_budget": 256}, "thinking_budget"),  # a budget needs a window that thinks
    ({"thinking": "on", "answer": "logits"}, "answer='logits'"),
    ({"reasoning_effort": "low", "answer": "logits"}, "answer='logits'"),
    ({"thinking": "off", "reasoning_effort": "low"}, "reasoning_effort"),
])
def test_every_thinking_rule_holds_on_openai(flags, expected):
    with pytest.raises(InputError, match=expected):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", **flags)


@pytest.mark.parametrize("flags,expected", [
    ({"thinking_budget": 256}, "thinking_budget"),
    ({"thinking": "off", "reasoning_effort": "low"}, "reasoning_effort"),
    ({"reasoning_effort": "low"}, "reasoning_effort"),  # the simulated model has no effort to set
])
def test_every_thinking_rule_holds_on_the_simulated_reranker(flags, expected):
    with pytest.raises(InputError, match=expected):
        build_reranker("simulated", qrels={"q": {"a": 1}}, **flags)


def test_a_budget_caps_every_call_that_thinks():
    """--reasoning-effort alone: a reasoning model thinks on every call, so the budget caps each completion."""
    _, srv = _rerank("hidden", reasoning_effort="low", thinking_budget=256)
    assert all(b["max_completion_tokens"] > 256 and "max_tokens" not in b for b in srv.bodies)
    _, srv = _rerank("inline", thinking="on", thinking_budget=256)
    assert all(b["max_tokens"] > 256 for b in srv.bodies)
    req = RerankRequest("q", "query", ("d", "c", "b", "a"))
    capped = build_reranker("simulated", qrels={"q": {"a": 3}}, thinking="on", thinking_budget=40).rerank([req])[0]
    assert capped.reasoning_tokens == 40


# -- a per-query thinking budget (--think-share, --think-tokens): the most unsettled windows first ---------------


def test_a_budget_decides_by_hand():
    """Measures (0.9, 0.3, 0.9, 0.6), no threshold: ranked 0, 2, 3, 1 (ties: the step's order). share 0.5 with 4 sent
    and 1 thought before: floor(0.5 * 8) - 1 = 3 may think; tokens 2500 left of 4000 at 1000 a thought: 2; a window of
    one never thinks."""
    measures = (0.9, 0.3, 0.9, 0.6)
    assert ThinkingGate(0.0, share=0.5).decide(measures, (20,) * 4, sent=4, thought=1) == (True, False, True, True)
    assert ThinkingGate(0.0, tokens=4000, cost=1000).decide(measures, (20,) * 4, spent=1500) == (True, False, True, False)
    assert ThinkingGate(0.0, share=1.0).decide(measures, (20, 20, 1, 20)) == (True, True, False, True)
    assert ThinkingGate(0.7, share=1.0).decide(measures, (20,) * 4) == (True, False, True, False)  # with a threshold
    assert ThinkingGate(0.0, share=0.5).decide((1.0,) * 5, (20,) * 5) == (True, True, False, False, False)


@pytest.mark.parametrize("method", ["acurank", "acurank-9", "acurank-H", "acurank-auto-9"])
def test_a_per_query_budget_is_never_exceeded(tmp_path, method):
    _cli(tmp_path, "--method", method, "--thinking", "gated", "--think-share", "0.4", "--sim-noise", "2")
    for rec in (json.loads(line) for line in open(tmp_path / "x.stats.jsonl")):
        assert 0 < rec["thinking_calls"] <= int(0.4 * rec["calls"] + 1e-9), rec
        sent = thought = 0
        for it in rec["iterations"]:  # at every step, not only at the end
            sent, thought = sent + it["groups"], thought + (it["thinking"] or 0)
            assert thought <= 0.4 * sent + 1e-9, rec["iterations"]
    _cli(tmp_path, "--method", method, "--thinking", "gated", "--think-tokens", "2500", "--sim-think-tokens", "700")
    spent = [json.loads(line)["reasoning_tokens"] for line in open(tmp_path / "x.stats.jsonl")]
    assert max(spent) <= 2500 and min(spent) == 2100  # three thoughts of 700 fit, a fourth would not


@pytest.mark.parametrize("flags,words", [
    (("--think-share", "0"), "--think-share 0 lets no window think: give a share above 0, or --thinking off"),
    (("--think-tokens", "699", "--sim-think-tokens", "700"),
     "--think-tokens 699 is below one thought (each thinking window is counted at the most its thought may take, 700 "
     "tokens"),
    (("--think-tokens", "299", "--thinking-budget", "300"), "give at least 300, or a smaller --thinking-budget"),
])
def test_a_budget_that_no_thought_fits_is_refused_not_silent(tmp_path, flags, words):
    """Before: these thought nothing and said nothing. Now one line and exit 2 before any call; at the thought's
    cost exactly, one thought fits and it runs."""
    refused = _cli(tmp_path, "--method", "acurank", "--thinking", "gated", *flags, check=False)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert words in refused.stderr, refused.stderr
    _cli(tmp_path, "--method", "acurank", "--thinking", "gated", "--think-tokens", "700", "--sim-think-tokens", "700")


def test_a_token_budget_is_refused_where_a_thought_has_no_known_end():
    with pytest.raises(InputError, match="think_tokens"):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", thinking="gated", think_tokens=1000)
    with pytest.raises(InputError, match="think_share goes with thinking='gated'"):
        build_reranker("simulated", qrels={"q": {"a": 1}}, thinking="on", think_share=0.5)
