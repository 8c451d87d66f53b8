"""Prompt templates as files (RankLLM's YAML format), instructions, few-shot examples and a system message: the
messages each shape makes (written out by hand from RankLLM 0.26's rendering rules), answers read through the
template's regexes, every bad file one error naming the file and the field or line, and a changed template never
answered from the cache. benchmarks/templates_peer.py compares the bytes with RankLLM's own rendering."""

from __future__ import annotations

import json

import pytest

from acurank_cli.errors import InputError
from acurank_cli.records import Doc, ParseStatus, RerankRequest
from acurank_cli.rerankers.backend import build_reranker
from acurank_cli.rerankers.listwise.templates import Additions, load_few_shot, load_template, resolve
from fake_chat_server import FakeServer

SINGLE = """method: "singleturn_listwise"
system_message: "Rank {like} this."
prefix: |
  Query: {query} ({num} passages)
body: |
  [{rank}] {candidate} s={score}
suffix: "Again: {query}. Order {psg_ids}."
output_validation_regex: r"^\\[\\d+\\]( > \\[\\d+\\])*$"
output_extraction_regex: r"\\[(\\d+)\\]"
"""

MULTI = """method: "multiturn_listwise"
system_message: "S"
prefix_user: "{num} passages for {query}"
prefix_assistant: "ok, {num}"
body_user: "[{rank}] {candidate}"
body_assistant: "got [{rank}]"
suffix_user: "Rank them for {query}."
output_validation_regex: r"^\\[\\d+\\]( > \\[\\d+\\])*$"
output_extraction_regex: r"\\[(\\d+)\\]"
"""

CONTENTS = ["alpha (2) beta", "Title: T Content: gamma"]


def _write(tmp_path, text, name="t.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_single_turn_template_renders_as_rankllm_does(tmp_path):
    """system_message as written (RankLLM formats nothing there), prefix + bodies + suffix in one user turn, the query
    with [digits] written (digits), {score} with 3 decimals, {psg_ids} as [PASSAGE1, ...]."""
    t = load_template(_write(tmp_path, SINGLE))
    assert t.method == "singleturn_listwise" and not t.letters_ids
    assert t.messages("fleas [1]", CONTENTS, (12.5, 3.25)) == (
        {"role": "system", "content": "Rank {like} this."},
        {"role": "user", "content": "Query: fleas (1) (2 passages)\n[1] alpha (2) beta s=12.500\n"
                                    "[2] Title: T Content: gamma s=3.250\nAgain: fleas (1). Order [PASSAGE1, PASSAGE2]."},
    )


def test_a_multi_turn_template_renders_an_exchange_per_passage(tmp_path):
    t = load_template(_write(tmp_path, MULTI))
    assert t.messages("q", CONTENTS) == (
        {"role": "system", "content": "S"},
        {"role": "user", "content": "2 passages for q"}, {"role": "assistant", "content": "ok, 2"},
        {"role": "user", "content": "[1] alpha (2) beta"}, {"role": "assistant", "content": "got [1]"},
        {"role": "user", "content": "[2] Title: T Content: gamma"}, {"role": "assistant", "content": "got [2]"},
        {"role": "user", "content": "Rank them for q."},
    )
    joined = load_template(_write(tmp_path, MULTI.replace('body_assistant: "got [{rank}]"\n', ""), "j.yaml"))
    assert joined.messages("q", CONTENTS)[-1] == {
        "role": "user", "content": "[1] alpha (2) beta[2] Title: T Content: gamma" + "Rank them for q."}


def test_few_shot_turns_follow_the_system_message_and_an_instruction_goes_where_the_template_says(tmp_path):
    shots = _write(tmp_path, json.dumps([{"conversations": [{"role": "user", "value": "u1"},
                                                            {"role": "assistant", "value": "[1]"}]},
                                         {"conversations": [{"role": "user", "value": "u2"}]}]), "shots.json")
    assert load_few_shot(shots, 1) == ({"role": "user", "content": "u1"}, {"role": "assistant", "content": "[1]"})
    _, t = resolve(str(_write(tmp_path, SINGLE)), instruction="Prefer recent studies.", few_shot=str(shots),
                   few_shot_count=2)
    m = t.messages("q", CONTENTS[:1], (1.0,))
    assert [x["content"] for x in m[:4]] == ["Rank {like} this.", "u1", "[1]", "u2"]
    assert m[4]["content"].startswith("Prefer recent studies.\n\nQuery: q (1 passages)")  # no placeholder: it opens
    placed = SINGLE.replace("prefix: |\n  Query:", "prefix: |\n  Task: {instruction}\n  Query:")
    _, t = resolve(str(_write(tmp_path, placed, "p.yaml")), instruction="Prefer recent studies.",
                   system_message="You rank.")
    m = t.messages("q", CONTENTS[:1], (1.0,))
    assert m[0] == {"role": "system", "content": "You rank."}
    assert m[1]["content"].startswith("Task: Prefer recent studies.\nQuery: q (1 passages)\n")
    _, published = resolve(None, instruction="Be strict.")  # the published prompt takes the additions too
    assert published.messages("q", ["x"])[1]["content"].startswith("Be strict.\n\nI will provide you with 1 passages")


@pytest.mark.parametrize("extraction,validation,answer,order,status", [
    (r"\[(\d+)\]", r"^\[\d+\]( > \[\d+\])*$", "[3] > [1] > [2]", (2, 0, 1), ParseStatus.ok),
    (r"\[(\d+)\]", r"^\[\d+\]( > \[\d+\])*$", "3 > 1 > [2]", (1, 0, 2), ParseStatus.repaired),  # bare digits: none
    (r"\[([A-Z])\]", r"^\[[A-Z]\]( > \[[A-Z]\])*$", "[C] > [A] > [B]", (2, 0, 1), ParseStatus.ok),
    (r"PASSAGE(\d+)", r"^\[PASSAGE\d+(, PASSAGE\d+)*\]$", "[PASSAGE2, PASSAGE3, PASSAGE1]", (1, 2, 0), ParseStatus.ok),
    (r"PASSAGE(\d+)", r"^\[PASSAGE\d+(, PASSAGE\d+)*\]$", "PASSAGE2 then PASSAGE3, PASSAGE1", (1, 2, 0),
     ParseStatus.repaired),  # every identifier, not in the form asked for
    (r"\[(\d+)\]", r"^\[\d+\]( > \[\d+\])*$", "no idea", (0, 1, 2), ParseStatus.unparseable),
])
def test_the_answer_is_read_through_the_templates_regexes(tmp_path, extraction, validation, answer, order, status):
    text = SINGLE.replace(r'r"\[(\d+)\]"', f'r"{extraction}"').replace(r'r"^\[\d+\]( > \[\d+\])*$"', f'r"{validation}"')
    parsed = load_template(_write(tmp_path, text)).parse(answer, 3)
    assert (parsed.order, parsed.status) == (order, status)


def test_letter_identifiers_come_from_an_extraction_regex_that_captures_letters(tmp_path):
    alpha = SINGLE.replace(r'r"\[(\d+)\]"', r'r"\[([A-Z])\]"')
    t = load_template(_write(tmp_path, alpha))
    assert t.letters_ids and t.messages("q", CONTENTS, (1, 2))[1]["content"].count("[B] ") == 1


@pytest.mark.parametrize("body,extraction,letters,shown,answer,order", [
    ("<{rank}> {candidate}", r"<(\d+)>", False, "<2> Title: T", "<2> > <1>", (1, 0)),  # RankLLM renders it, parses it
    ("Doc#{rank}: {candidate}", r"Doc#(\d+)", False, "Doc#2: Title: T", "Doc#2 > Doc#1", (1, 0)),
    ("«{rank}» {candidate}", r"«([A-Z])»", True, "«B» Title: T", "«B» > «A»", (1, 0)),
    ("{{{rank}}} {candidate}", r"\{([a-zA-Z])\}", True, "{B} Title: T", "{B} > {A}", (1, 0)),
    ("«{rank}» {candidate}", r"«(\w)»", False, "«2» Title: T", "«2» > «1»", (1, 0)),  # takes both: numbers
])
def test_letters_or_numbers_are_decided_by_the_templates_own_body(tmp_path, body, extraction, letters, shown, answer,
                                                                   order):
    """Identifier shapes that no fixed probe ([2], 2, PASSAGE2, (2)) holds: the template's own body, shown for the
    second passage as 2 and as B, is read by its extraction regex (issue 81, item 4)."""
    text = (SINGLE.replace("[{rank}] {candidate} s={score}", body).replace(r'r"\[(\d+)\]"', f'r"{extraction}"')
            .replace(r'r"^\[\d+\]( > \[\d+\])*$"', r'r".+"'))
    t = load_template(_write(tmp_path, text))
    assert t.letters_ids is letters
    assert shown in t.messages("q", CONTENTS, (1, 2))[1]["content"]
    parsed = t.parse(answer, 2)
    assert (parsed.order, parsed.status) == (order, ParseStatus.ok)


def test_the_answer_budget_is_sized_in_the_bodys_own_identifiers(tmp_path):
    """A validation regex that takes only <n> answers: the answer sample (what sizes the answer budget) is written
    in the body's own marks, so it passes the template's validation."""
    text = (SINGLE.replace("[{rank}] {candidate} s={score}", "<{rank}> {candidate}").replace(r'r"\[(\d+)\]"', r'r"<(\d+)>"')
            .replace(r'r"^\[\d+\]( > \[\d+\])*$"', r'r"^(<\d+> > )*<\d+>$"'))
    assert load_template(_write(tmp_path, text)).answer_sample(3) == "<1> > <2> > <3>"


@pytest.mark.parametrize("text,field", [
    ('method: "pointwise"\nbody: "Query: {query} Document: {doc_content}"\n', "method: 'pointwise' is not listwise"),
    ('method: "listwise"\n', "method: 'listwise' is not one of"),
    (SINGLE.replace("body: |\n  [{rank}] {candidate} s={score}\n", ""), "body: missing"),
    (SINGLE.replace("s={score}", "s={bm25}"), "body: placeholder {bm25} is not one acurank can fill"),
    (SINGLE.replace("[{rank}] {candidate}", "[{rank}]"), "body: must hold {rank} and {candidate}"),
    (SINGLE.replace(r'r"\[(\d+)\]"', r'r"\[(\d+"'), "output_extraction_regex: "),
    (SINGLE.replace(r'r"\[(\d+)\]"', r'r"<(\w+)>"'), "output_extraction_regex: "),
    (SINGLE + "temperature: 0\n", "temperature: not a section"),
    (SINGLE.replace("Again: {query}", "Again:").replace("Query: {query}", "Query:"), "the query ({query}) is in none"),
    (SINGLE.replace("Again: {query}", "Again: {query"), "suffix: "),
    ("method: [unclosed\n", ":2: not YAML"),  # where the parser found the end of the stream
    (MULTI.replace('prefix_user: "{num} passages for {query}"\n', ""), "prefix_user: missing"),
])
def test_a_template_that_cannot_be_used_is_one_error_naming_file_and_field(tmp_path, text, field):
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_template(path)
    message = str(err.value)
    assert message.startswith(str(path)) and field in message and "\n" not in message, message


@pytest.mark.parametrize("text,words", [
    ("[1, 2", "not JSON"),
    ('{"conversations": []}\n', "example 1: needs"),
    ('{"conversations": [{"role": "bot", "value": "x"}]}', "example 1, turn 1: needs a role"),
    ('{"conversations": [{"role": "user", "value": "x"}]}\nnot json\n', ":2: not JSON"),
])
def test_a_bad_few_shot_file_is_one_error_naming_file_and_line(tmp_path, text, words):
    path = _write(tmp_path, text, "shots.jsonl")
    with pytest.raises(InputError, match=r"^" + str(path)) as err:
        load_few_shot(path, 1)
    assert words in str(err.value)
    with pytest.raises(InputError, match="fewer than the 3 asked for"):
        load_few_shot(_write(tmp_path, '[{"conversations": [{"role": "user", "value": "x"}]}]', "one.json"), 3)


@pytest.mark.parametrize("text", ["", "\n\n", "[]"])
def test_an_empty_few_shot_file_says_it_holds_none_and_no_count_it_was_not_given(tmp_path, text):
    """No --few-shot-count given: the message says the file holds no example, not "fewer than the 1 asked for"."""
    with pytest.raises(InputError) as err:
        load_few_shot(_write(tmp_path, text, "empty.jsonl"))
    assert "holds no example" in str(err.value) and "asked for" not in str(err.value)


def _server():
    return FakeServer(lambda q, a: ("ok", 0.0))  # answers [n] > ... > [1]


def _reqs():
    return [RerankRequest("q0", "fleas", ("d0", "d1", "d2"), tuple(Doc(f"d{j}", f"passage {j}") for j in range(3)),
                          scores=(3.0, 2.0, 1.0))]


def test_an_openai_backend_sends_the_templates_messages_and_reads_its_answer(tmp_path):
    zephyr = SINGLE.replace("Query: {query} ({num} passages)", "the search query: {query}.")
    with _server() as srv:
        rr = build_reranker("openai:m", base_url=srv.base_url, prompt_format=str(_write(tmp_path, zephyr)),
                            instruction="Think of cats.", retries=0)
        result = rr.rerank(_reqs())[0]
        identity = rr.cache_identity()
        rr.close()
    assert result.order == (2, 1, 0) and result.parse == ParseStatus.ok
    sent = srv.bodies[0]["messages"]
    assert sent[0]["content"] == "Rank {like} this." and sent[1]["content"].startswith("Think of cats.\n\nthe search")
    assert "s=3.000" in sent[1]["content"]
    # the identity holds the template's content hash: an edited template is another prompt, never a cached answer
    with _server() as srv:
        edited = _write(tmp_path, zephyr.replace("Rank {like} this.", "Rank that."))
        other = build_reranker("openai:m", base_url=srv.base_url, prompt_format=str(edited),
                               instruction="Think of cats.", retries=0)
        assert other.cache_identity() != identity
        other.close()
    assert identity["template"]["name"] == "t.yaml" and len(identity["template"]["sha256"]) == 64
    assert identity["instruction"] == "Think of cats."


def test_without_the_new_flags_the_identity_is_unchanged():
    with _server() as srv:
        plain = build_reranker("openai:m", base_url=srv.base_url)
        assert not {"template", "instruction", "few_shot", "system_message"} & set(plain.cache_identity())
        plain.close()


def test_a_template_with_a_written_answer_mode_is_refused(tmp_path):
    with pytest.raises(InputError, match="a template's answer is read through its output_extraction_regex"):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", prompt_format=str(_write(tmp_path, SINGLE)),
                       answer="logits")
    with pytest.raises(InputError, match="few_shot_count"):
        build_reranker("openai:m", base_url="http://127.0.0.1:9/v1", few_shot_count=2)


def test_a_thinking_template_says_what_it_will_do(tmp_path):
    thinking = SINGLE.replace('system_message: "Rank {like} this."',
                              'system_message: "Think inside <think> </think>, then answer in <answer> </answer>."')
    path = str(_write(tmp_path, thinking))
    with _server() as srv:
        off = build_reranker("openai:m", base_url=srv.base_url, prompt_format=path, thinking="off")
        unset = build_reranker("openai:m", base_url=srv.base_url, prompt_format=path)
        on = build_reranker("openai:m", base_url=srv.base_url, prompt_format=path, thinking="on", thinking_budget=64)
        notes = {name: " ".join(rr.notes()) for name, rr in (("off", off), ("unset", unset), ("on", on))}
        for rr in (off, unset, on):
            rr.close()
    assert "asks for a thought; --thinking off: the model is told not to think" in notes["off"]
    assert "give --thinking on or gated" in notes["unset"]
    assert "asks for a thought" not in notes["on"]


def test_the_cli_refuses_a_bad_template_before_any_model_call(tmp_path):
    from conftest import acurank

    bad = _write(tmp_path, SINGLE.replace("s={score}", "s={bm25}"))
    ran = acurank("baseline", "sample_runs/dl19/bm25.run", "--method", "sw-1", "--reranker", "openai:m", "--base-url",
                  "http://127.0.0.1:9/v1", "--prompt", bad, "--qids", "264014", "--depth", "20", "--no-cache",
                  "--topics", "sample_runs/dl19/topics.tsv", "--corpus", "sample_runs/dl19/passages.jsonl.gz",
                  check=False)
    assert ran.returncode == 2 and ran.stderr.strip().splitlines() == [
        f"acurank: error: {bad}: body: placeholder {{bm25}} is not one acurank can fill here ({{candidate}}, "
        "{rank}, {score})"], ran.stderr
    missing = acurank("baseline", "sample_runs/dl19/bm25.run", "--method", "sw-1", "--reranker", "openai:m",
                      "--base-url", "http://127.0.0.1:9/v1", "--prompt", tmp_path / "none.yaml", check=False)
    assert missing.returncode == 2 and "none.yaml: cannot read the prompt template" in missing.stderr


def test_additions_identity_is_empty_without_additions():
    assert Additions().identity() == {}


def test_the_docs_worked_template_is_the_file_and_loads():
    """docs/rerankers.md shows docs/templates/scientific-claim.yaml (its comment lines aside) and it loads."""
    import re

    from conftest import ROOT

    shown = re.search(r"```yaml\n(.*?)```", (ROOT / "docs" / "rerankers.md").read_text(encoding="utf-8"), re.S).group(1)
    path = ROOT / "docs" / "templates" / "scientific-claim.yaml"
    kept = "".join(line for line in path.read_text(encoding="utf-8").splitlines(True) if not line.startswith("#"))
    assert shown == kept
    t = load_template(path)
    assert t.uses_scores and not t.letters_ids and t.parse("[2] > [1]", 2).status == ParseStatus.ok


def test_the_api_gives_one_query_its_own_instruction_and_a_backend_without_prompts_refuses_it():
    from acurank_cli import Reranker

    with _server() as srv:
        with Reranker("openai:m", base_url=srv.base_url, method="sw-1", cache=None, instruction="the run's") as rr:
            rr.rerank("the search query: fleas", ["a", "b"], instruction="this query's")
            rr.rerank("the search query: cats", ["a", "b"])
    firsts = [b["messages"][1]["content"].split("\n")[0] for b in srv.bodies]
    assert firsts == ["this query's", "the run's"]
    with Reranker("simulated", method="sw-1", qrels={"0": {"0": 1}}) as rr:
        with pytest.raises(InputError, match="instruction: the reranker puts no instruction in a prompt"):
            rr.rerank("q", ["a", "b"], instruction="x")


@pytest.mark.parametrize("name,text,asks", [
    ("plain.yaml", SINGLE, False),
    ("r.yaml", SINGLE.replace("Rank {like} this.", "Think in <think> </think> first."), True),
    ("n.yaml", SINGLE.replace("Rank {like} this.", "/think\\n\\nRank."), True),
    ("n2.yaml", SINGLE.replace("Rank {like} this.", "/no_think\\n\\nRank."), False),
    ("qwen_thinking_template.yaml", SINGLE, True),
    ("qwen_non_thinking_template.yaml", SINGLE, False),
    ("nemotron_nonthinking_template.yaml", SINGLE, False),
])
def test_a_template_that_asks_for_a_thought(tmp_path, name, text, asks):
    assert load_template(_write(tmp_path, text, name)).asks_thought is asks


def test_a_template_file_starts_every_window_at_300_words_as_rankllm_does(tmp_path):
    """A window of 10 with a 400-word passage: the published prompt starts at 300 x 20 / 10 = 600 words (the whole
    passage), a template file at RankLLM's 300."""
    from acurank_cli.rerankers.listwise.prompt_builder import PromptBuilder
    from acurank_cli.rerankers.listwise.prompts import CHAT_MESSAGES, RegexTokenCounter

    docs = [Doc(f"d{j}", " ".join(f"w{j}x{i}" for i in range(400))) for j in range(10)]
    published = PromptBuilder(CHAT_MESSAGES, RegexTokenCounter(), 10 ** 6).build("q", docs)
    _, t = resolve(str(_write(tmp_path, SINGLE)))
    templated = PromptBuilder(CHAT_MESSAGES, RegexTokenCounter(), 10 ** 6, template=t).build("q", docs)
    assert (published.max_length, templated.max_length) == (600, 300)
    assert "w0x299 s=" in templated.messages[1]["content"] and "w0x300" not in templated.messages[1]["content"]


def test_a_template_is_read_from_a_pipe_and_a_format_name_stays_a_name(tmp_path):
    import os
    import threading

    from acurank_cli.rerankers.listwise.templates import is_template_file

    fifo = tmp_path / "t.pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(SINGLE, encoding="utf-8"))
    writer.start()
    fmt, t = resolve(str(fifo))
    writer.join(10)
    assert fmt is None and t.is_file and t.method == "singleturn_listwise"
    assert t.name == f"{fifo} (a pipe)"  # named by its path, never by a bare descriptor number ("template 63")
    (tmp_path / "chat").write_text(SINGLE)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert not is_template_file("chat") and is_template_file("x.YAML")
    finally:
        os.chdir(cwd)


def test_no_output_is_written_over_the_template_or_the_few_shot_file(tmp_path):
    from conftest import acurank

    template = _write(tmp_path, SINGLE)
    shots = _write(tmp_path, '[{"conversations": [{"role": "user", "value": "u"}]}]', "shots.json")
    for flag, target in (("--log-prompts", template), ("-o", shots)):
        before = target.read_bytes()
        ran = acurank("baseline", "sample_runs/dl19/bm25.run", "--method", "sw-1", "--reranker", "openai:m",
                      "--base-url", "http://127.0.0.1:9/v1", "--prompt", template, "--few-shot", shots, "--qids",
                      "264014", flag, target, "--overwrite", check=False)
        assert ran.returncode == 2 and "which the command reads" in ran.stderr, ran.stderr
        assert target.read_bytes() == before


def test_a_folder_given_to_prompt_is_named_as_no_template_even_with_an_output_inside_it(tmp_path):
    """Before: --prompt DIR with -o DIR/x.run spoke of the output being inside an input; the mistake is the folder."""
    from conftest import acurank

    for output in (tmp_path / "x.run", None):
        ran = acurank("rerank", "sample_runs/dl19/bm25.run", "--reranker", "openai:m", "--base-url",
                      "http://127.0.0.1:9/v1", "--prompt", tmp_path, "--qids", "264014", "--no-cache",
                      *(("-o", output) if output else ()), check=False)
        assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
        assert f"--prompt {tmp_path} is a folder, not a prompt template file" in ran.stderr, ran.stderr
    assert list(tmp_path.iterdir()) == []
