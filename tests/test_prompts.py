"""Prompt formats, identifiers, marker rewriting and sizing to the context budget."""

from __future__ import annotations

import pytest

from acurank_cli.errors import InputError
from acurank_cli.rerankers.prompts import (
    PROMPT_FORMATS,
    SYSTEM_MESSAGE,
    ApproxTokenCounter,
    PromptBuilder,
    answer_tokens_for,
    canonical_answer,
    default_format,
    flat_chat_text,
    get_format,
    messages_for,
    neutralize_markers,
    start_words,
    user_message,
)


class WordCounter:
    """One token per whitespace-separated word: makes sizing arithmetic checkable."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


class FakeChatTokenizer:
    bos_token = "<s>"
    eos_token = "</s>"
    chat_template = "fake"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages) + "<assistant>"


class NoSystemTokenizer(FakeChatTokenizer):
    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        if messages[0]["role"] == "system":
            raise ValueError("System role not supported")
        return super().apply_chat_template(messages, tokenize, add_generation_prompt)


def test_user_message_layout():
    text = user_message("what is x", ["alpha", "beta"])
    lines = text.split("\n")
    assert lines[0].startswith("I will provide you with 2 passages, each indicated by a numerical identifier []")
    assert lines[0].endswith("search query: what is x.")
    assert lines[2] == "[1] alpha" and lines[3] == "[2] beta"
    assert "Search Query: what is x." in lines
    assert "The output format should be [] > [], e.g., [2] > [1]." in lines[-1]
    assert text.index("what is x") < text.index("[1] alpha") < text.rindex("what is x")


def test_messages_and_registry():
    msgs = messages_for("q", ["p"])
    assert msgs[0] == {"role": "system", "content": SYSTEM_MESSAGE}
    assert msgs[1]["role"] == "user"
    assert set(PROMPT_FORMATS) == {"rankzephyr", "rankvicuna", "chat"}
    assert get_format("RankZephyr").name == "rankzephyr"
    with pytest.raises(InputError, match="unknown prompt format"):
        get_format("rankgpt5")


def test_format_rendering():
    msgs = messages_for("q", ["p"])
    tok = FakeChatTokenizer()
    zephyr = get_format("rankzephyr").render(msgs, tok)
    assert zephyr.startswith(f"<s><|system|>\n{SYSTEM_MESSAGE}</s>\n<|user|>\nI will provide you with 1 passages")
    assert zephyr.endswith("</s>\n<|assistant|>\n")
    vicuna = get_format("rankvicuna").render(msgs, tok)
    assert vicuna.startswith(f"<s>{SYSTEM_MESSAGE} USER: I will provide")
    assert vicuna.endswith("do not say any word or explain. ASSISTANT:")
    assert get_format("rankvicuna").render(msgs, None).startswith(SYSTEM_MESSAGE)  # no tokenizer: no BOS
    chat = get_format("chat").render(msgs, tok)
    assert chat.startswith(f"<system>{SYSTEM_MESSAGE}</system><user>") and chat.endswith("<assistant>")
    folded = get_format("chat").render(msgs, NoSystemTokenizer())
    assert folded.startswith(f"<user>{SYSTEM_MESSAGE}\n\nI will provide")
    with pytest.raises(InputError, match="chat template"):
        get_format("chat").render(msgs, None)
    assert default_format(tok) == "chat" and default_format(None) == "rankvicuna"


def test_markers_are_neutralised():
    assert neutralize_markers("see [3] and [ 12 ] but not [a] or [1a]") == "see (3) and (12) but not [a] or [1a]"
    b = PromptBuilder(flat_chat_text, WordCounter(), context_size=10_000)
    p = b.build("query [2]", ["cites [1] and [2]", "plain"])
    user = p.messages[1]["content"]
    assert "[1] cites (1) and (2)" in user and "[2] plain" in user
    assert "query (2)" in user and "[2]" not in user.replace("[2] plain", "").replace("[2] > [1]", "")


def test_start_words():
    assert start_words(20) == 300 and start_words(10) == 600 and start_words(40) == 150 and start_words(100) == 60


def test_short_passages_untouched():
    b = PromptBuilder(flat_chat_text, WordCounter(), context_size=4096, answer_tokens=100)
    p = b.build("q", ["a b c", "d e"])
    assert not p.clipped and "[1] a b c" in p.text and p.tokens <= 3996


def test_passages_start_at_300_words_for_20():
    texts = [" ".join(f"w{j}" for j in range(500)) for _ in range(20)]
    b = PromptBuilder(flat_chat_text, WordCounter(), context_size=1_000_000)
    p = b.build("q", texts)
    assert p.words == 300 and p.clipped
    assert "w299" in p.text and "w300" not in p.text


def test_shrinks_until_prompt_plus_answer_fit():
    texts = [" ".join(f"w{j}" for j in range(500)) for _ in range(20)]
    counter = WordCounter()
    answer = answer_tokens_for(20, counter)
    b = PromptBuilder(flat_chat_text, counter, context_size=4096, answer_tokens=answer)
    p = b.build("some query", texts)
    assert p.clipped and p.tokens + answer <= 4096
    assert p.words < 300 and p.tokens == counter.count(p.text)
    # tight: a few more words per passage would not fit
    assert p.tokens + answer + 20 * 12 > 4096


def test_too_small_context_is_an_input_error():
    b = PromptBuilder(flat_chat_text, WordCounter(), context_size=50, answer_tokens=10)
    with pytest.raises(InputError, match="does not fit context size 50"):
        b.build("q", ["x y z"] * 20)


def test_overhead_counts():
    b = PromptBuilder(flat_chat_text, WordCounter(), context_size=4096, overhead_tokens=12)
    p = b.build("q", ["a"])
    assert p.tokens == WordCounter().count(p.text) + 12


def test_canonical_answer_and_room():
    assert canonical_answer(3) == "[3] > [2] > [1]"
    approx = ApproxTokenCounter()
    assert answer_tokens_for(20, approx) > answer_tokens_for(5, approx) > 0


def test_approx_counter():
    c = ApproxTokenCounter()
    assert c.count("") == 0
    assert c.count("hello world") == 2
    assert c.count("The quick brown fox jumps over the lazy dog.") == 10
    assert c.count("relevance") == 2
    assert c.count("[12] > [3]") == 7
    assert c.count("日本語") == 3
    assert c.count("café") >= 1
    prose = ("The quick brown fox jumps over the lazy dog. " * 50).strip()
    words = len(prose.split())
    assert words <= c.count(prose) <= 2 * words


def test_one_long_passage_converges_quickly():
    class Counting(WordCounter):
        calls = 0

        def count(self, text):
            Counting.calls += 1
            return super().count(text)

    texts = ["short text"] * 19 + [" ".join(f"w{j}" for j in range(5000))]
    b = PromptBuilder(flat_chat_text, Counting(), context_size=600, answer_tokens=50)
    p = b.build("q", texts)
    assert p.tokens + 50 <= 600 and "short text" in p.text
    assert Counting.calls <= 3
