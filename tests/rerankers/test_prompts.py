"""The published prompt's pieces, each checked against values worked out by hand from llm-prompts.md."""

from __future__ import annotations

import pytest

from acurank_cli.errors import InputError
from acurank_cli.records import Doc
from acurank_cli.rerankers.listwise.prompts import (
    CHAT_MESSAGES,
    PROMPT_FORMATS,
    RANKZEPHYR_ANSWER_TOKENS,
    SYSTEM_MESSAGE,
    ApproxTokenCounter,
    RegexTokenCounter,
    answer_text,
    default_format,
    get_format,
    messages_for,
    neutralize_markers,
    passage_content,
    user_message,
)
from acurank_cli.rerankers.listwise.prompt_builder import PromptBuilder, start_max_length


class CountW:
    """Counts the words that are exactly ``w``: prompt tokens = passage words, arithmetic by hand."""

    name = "w"

    def count(self, text: str) -> int:
        return text.split().count("w")


def test_user_message_exact():
    expected = (
        "I will provide you with 2 passages, each indicated by  a numerical identifier []. "
        "Rank the passages based on their relevance to the search query: what is x.\n\n"
        "[1] alpha\n[2] beta\n"
        "Search Query: what is x.\nRank the 2 passages above based on their relevance to the search query. "
        "All the passages should be included and listed using identifiers, in descending order of relevance. "
        "The output format should be [] > [], e.g., [2] > [1], Only respond with the ranking results, "
        "do not say any word or explain."
    )
    assert user_message("what is x", ["alpha", "beta"]) == expected
    assert messages_for("q", ["p"])[0] == {"role": "system", "content": SYSTEM_MESSAGE}


def test_query_kept_verbatim_but_markers():
    user = user_message("  x  [2] [ 3 ]. ", ["p"])
    assert "search query:   x  (2) [ 3 ]. ." in user and "Search Query:   x  (2) [ 3 ]. .\n" in user


def test_markers_exactly_digits_in_brackets():
    assert neutralize_markers("see [3] and [12] not [ 12 ] [a] [1a] [] [-1]") == "see (3) and (12) not [ 12 ] [a] [1a] [] [-1]"


def test_passage_content_pipeline():
    # title + text, strip, ftfy (mojibake and curly quotes), words cut at int(max_length), markers
    doc = Doc("d", "  It\u00e2\u0080\u0099s   the \u201cbest\u201d [1] cure\n for  fleas  ", "Flea care")
    assert passage_content(doc, 1000) == "Title: Flea care Content: It's the \"best\" (1) cure for fleas"
    assert passage_content(doc, 7.9) == "Title: Flea care Content: It's the \"best\""  # 7 words
    assert passage_content(doc, 0.5) == ""
    assert passage_content(Doc("d", " plain text "), 300) == "plain text"  # no title: no prefix


def test_start_cap_is_a_float():
    assert start_max_length(20) == 300 and start_max_length(10) == 600
    assert start_max_length(7) == pytest.approx(857.142857, rel=1e-6)  # int() cuts at 857 words


def test_answer_budgets():
    counter = RegexTokenCounter()
    assert answer_text(3) == "[1] > [2] > [3]"
    # [1] > [2] > [3]: 3 tokens per [i], 2 '>' -> 11, minus 1
    assert PROMPT_FORMATS["rankvicuna"].answer_tokens(3, counter) == 10
    assert PROMPT_FORMATS["chat"].answer_tokens(20, counter) == 20 * 3 + 19 - 1
    assert [PROMPT_FORMATS["rankzephyr"].answer_tokens(n, counter) for n in (20, 10, 8, 3, 2, 1)] == [90, 40, 31, 11, 7, 3]
    assert RANKZEPHYR_ANSWER_TOKENS[15] == 65


def test_fixed_templates():
    msgs = messages_for("q", ["p"])
    user = msgs[1]["content"]
    assert get_format("rankzephyr").render(msgs, None) == f"<|system|>\n{SYSTEM_MESSAGE}</s>\n<|user|>\n{user}</s>\n<|assistant|>\n"
    assert get_format("rankvicuna").render(msgs, None) == f"<s>[INST] <<SYS>>\n{SYSTEM_MESSAGE}\n<</SYS>>\n\n{user} [/INST]"
    assert CHAT_MESSAGES.render(msgs, None) == f"{SYSTEM_MESSAGE}\n{user}"
    with pytest.raises(InputError, match="chat template"):
        get_format("chat").render(msgs, None)
    with pytest.raises(InputError, match=r"^unknown prompt format 'rankgpt5'; known: rankzephyr, rankvicuna, chat \(and "
                                         r"openai:'s messages\)$"):
        get_format("rankgpt5")
    with pytest.raises(InputError, match=r"^prompt format 'messages' is a chat endpoint's \(openai:"):
        get_format("messages")  # listed by `acurank prompt list`: was "unknown"
    assert default_format(None) == "rankvicuna"
    from acurank_cli.api import Reranker  # openai: takes its own format, and an unknown one is said so

    with Reranker("openai:m", "sw-1", base_url="http://127.0.0.1:9/v1", prompt_format="messages", cache=None):
        pass
    with pytest.raises(InputError, match=r"^unknown prompt format 'bogus'"):
        Reranker("openai:m", "sw-1", base_url="http://127.0.0.1:9/v1", prompt_format="bogus", cache=None)


def test_fitting_loop_by_hand():
    # 2 passages of 1000 'w'; tokens = words shown; out(2) = 0 - 1 = -1, so the budget is 399 + 1 = 400.
    # max_length 3000 -> 2800 -> ... -> 1000 (steps of 1600 // 8 = 200), then 800 (tokens 1600, step 150),
    # 650 (1300, 112), 538 (1076, 84), 454 (908, 63), 391 (782, 47), 344 (688, 36), 308 (616, 27),
    # 281 (562, 20), 261 (522, 15), 246 (492, 11), 235 (470, 8), 227 (454, 6), 221 (442, 5), 216 (432, 4),
    # 212 (424, 3), 209 (418, 2), 207 (414, 1), 206, 205, ..., 200 (400 tokens): fits.
    docs = [Doc(str(i), " ".join(["w"] * 1000)) for i in range(2)]
    p = PromptBuilder(CHAT_MESSAGES, CountW(), context_size=399, fix_rendered=False).build("q", docs)
    assert (p.max_length, p.tokens, p.answer_tokens, p.clipped) == (200, 400, -1, True)


def test_few_long_passages_do_not_starve_the_rest():
    # 19 passages of 10 words and one of 1000 at a budget of 400: the shared cap falls one word a step
    # (excess 90 // 80 = 1) from 300 until 190 + cap = 400: cap 210, the short ones whole.
    docs = [Doc(str(i), " ".join(["w"] * 10)) for i in range(19)] + [Doc("long", " ".join(["w"] * 1000))]
    p = PromptBuilder(CHAT_MESSAGES, CountW(), context_size=399, fix_rendered=False).build("q", docs)
    assert (p.max_length, p.tokens) == (210, 400)


def test_shrink_below_zero_steps_by_one():
    # 8 tokens a word (CJK-like), one passage of 1000 words, budget 15 + 1 = 16 (out(1) = -1):
    # 6000 -> 4004 -> 2008 -> 12 (tokens 8000, steps 7984 // 4 = 1996), then each step would go below 0
    # (12: 96 tokens, step 80 // 4 = 20), so it falls by 1: 11, 10, 9, 8, 7, 6, 5, 4; at 4 (32 tokens)
    # the step is 16 // 4 = 4 -> 0, which is not below 0: cap 0, 0 tokens, fits.
    class CountW8(CountW):
        def count(self, text):
            return 8 * super().count(text)

    docs = [Doc("a", " ".join(["w"] * 1000))]
    p = PromptBuilder(CHAT_MESSAGES, CountW8(), context_size=15, fix_rendered=False).build("q", docs)
    assert (p.max_length, p.tokens) == (0, 0)


def test_too_small_context_is_an_input_error():
    b = PromptBuilder(CHAT_MESSAGES, RegexTokenCounter(), context_size=50, fix_rendered=False)
    with pytest.raises(InputError, match="does not fit context_size=50") as raised:
        b.build("q", [Doc(str(i), "x y z") for i in range(20)])
    assert "does not fit --context-size 50 " in raised.value.cli()  # the CLI names the flag


def test_approx_counter_is_a_rough_guard():
    c = ApproxTokenCounter()
    assert c.count("") == 0 and c.count("a b c") == 3 and c.count("x" * 40) == 10


def test_option_faults_name_keywords_for_the_api_and_flags_for_the_cli():
    """The raise sites a plain construction reaches: each message names the keyword in
    ``str()`` and the flag in ``cli()``, and none fails to render (a template's placeholder without its option
    would be a KeyError in place of the message)."""
    from types import SimpleNamespace

    from acurank_cli.rerankers.listwise.answers import AnswerDecoding, AnswerMode
    from acurank_cli.rerankers.listwise.prompt_builder import prompt_builder

    letters = PromptBuilder(CHAT_MESSAGES, RegexTokenCounter(), context_size=100000, fix_rendered=False,
                            answer=AnswerMode.logits)
    source = SimpleNamespace(spec="tiny/{model}")  # braces in a value are kept as they are
    cases = [
        (lambda: letters.build("q", [Doc(str(i), "x") for i in range(30)]),
         "answer='logits' names passages by letters", "use m=26 or less",
         "--answer logits names passages by letters", "use --window 26 or less"),
        (lambda: AnswerDecoding(SimpleNamespace(eos_token_id=None), AnswerMode.constrained, "hf"),
         "hf: answer='constrained' needs a tokenizer", None, "hf: --answer constrained needs a tokenizer", None),
        (lambda: prompt_builder(source, SimpleNamespace(chat_template=None), prompt_format="chat", context_size=4096,
                                max_positions=None, double_bos=False, backend="hf"),
         "hf: 'tiny/{model}' has no chat template; use prompt_format='rankvicuna' or 'rankzephyr'", None,
         "use --prompt rankvicuna or rankzephyr", None),
    ]
    for build, api, api2, cli, cli2 in cases:
        with pytest.raises(InputError) as raised:
            build()
        text, flags = str(raised.value), raised.value.cli()
        assert api in text and (api2 is None or api2 in text) and "--" not in text, text
        assert cli in flags and (cli2 is None or cli2 in flags), flags


@pytest.mark.parametrize("start_token", [True, False])
def test_answer_budget_counts_the_answer_whether_or_not_the_tokenizer_adds_a_start_token(start_token):
    """--answer-budget: out(num) for a local model. The published rule (count with special tokens, minus 1) is right
    for a tokenizer that puts one start token in front (Llama); for one that adds none (SmolLM2, Qwen) it stops the
    model one token short of a full answer. ``counted`` is the answer's own tokens in both cases, and the cache key
    says ``published`` wherever the two agree (calls cached before the choice still match)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tiny_models import build_tokenizer

    from acurank_cli.rerankers.listwise.prompts import AnswerBudget, HFTokenCounter, _counted_answer, answer_text

    tok = build_tokenizer(start_token=start_token)
    answer = answer_text(20)
    own = tok(answer, add_special_tokens=False)["input_ids"]
    assert len(tok(answer)["input_ids"]) == len(own) + (1 if start_token else 0)  # the tokenizer is what it says
    counted = HFTokenCounter(tok, answer_budget=AnswerBudget.counted)
    published = HFTokenCounter(tok, answer_budget="published")
    assert _counted_answer(20, counted) == len(own)
    assert _counted_answer(20, published) == (len(own) if start_token else len(own) - 1)
    assert tok.decode(own[: _counted_answer(20, counted)]) == answer  # the whole answer fits
    if not start_token:
        assert not tok.decode(own[: _counted_answer(20, published)]).endswith("[20]")  # a token short
    assert published.answer_identity() == "published"
    assert counted.answer_identity() == ("published" if start_token else "counted")
