"""Listwise prompt formats (RankLLM / the AcuRank appendix) and prompt sizing to a context budget.

Every format shares the same *content*: the RankLLM system message, a user turn that states the
query, lists the passages as ``[1] ...``, ``[2] ...``, repeats the query and asks for ``[] > []``.
Formats differ only in how that conversation is wrapped into the text the model reads:

* ``rankzephyr`` - Zephyr turns (``<|system|>``, ``<|user|>``, ``<|assistant|>``), as used by
  castorini/rank_zephyr_7b_v1_full;
* ``rankvicuna`` - Vicuna v1.1 (``SYSTEM USER: ... ASSISTANT:``), as castorini/rank_vicuna_7b_v1;
* ``chat`` - the tokenizer's own chat template (Llama-3.x-Instruct, Qwen2.5-Instruct, ...), or the
  chat messages themselves for an OpenAI-compatible endpoint.

Sizing: each passage starts at ``300 * 20 / window`` words and is cut shorter (the excess tokens
spread over the passages the cap cuts, at least one word per step) until the rendered prompt
plus room for the answer fits ``context_size`` tokens.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import InputError

SYSTEM_MESSAGE = (
    "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query."
)

#: Words per passage for a window of 20; a window of w starts at ``BASE_WORDS * 20 / w``.
BASE_WORDS = 300
BASE_WINDOW = 20
#: Extra answer tokens beyond the canonical ``[m] > ... > [1]`` (end-of-sequence, stray spaces).
ANSWER_MARGIN = 4

Message = Mapping[str, str]


# --------------------------------------------------------------------------------------------
# The shared content
# --------------------------------------------------------------------------------------------

_MARKER = re.compile(r"\[\s*(\d+)\s*\]")


def neutralize_markers(text: str) -> str:
    """Rewrite ``[n]``-like markers (``[3]``, ``[ 12 ]``) as ``(n)`` so they never look like identifiers."""
    return _MARKER.sub(r"(\1)", text)


def clip_words(text: str, words: int) -> str:
    """The first ``words`` whitespace-separated words of ``text`` (whitespace normalised)."""
    parts = text.split()
    return " ".join(parts[: max(0, words)])


def user_message(query: str, passages: Sequence[str]) -> str:
    """The RankLLM user turn: query, ``[i]``-numbered passages, query again, output format."""
    n = len(passages)
    query = neutralize_markers(" ".join(query.split()))
    lines = [
        (
            f"I will provide you with {n} passages, each indicated by a numerical identifier []. "
            f"Rank the passages based on their relevance to the search query: {query}."
        ),
        "",
    ]
    lines += [f"[{i}] {p}" for i, p in enumerate(passages, start=1)]
    lines += [
        "",
        f"Search Query: {query}.",
        (
            f"Rank the {n} passages above based on their relevance to the search query. All the passages "
            "should be included and listed using identifiers, in descending order of relevance. "
            "The output format should be [] > [], e.g., [2] > [1]. "
            "Only respond with the ranking results, do not say any word or explain."
        ),
    ]
    return "\n".join(lines)


def messages_for(query: str, passages: Sequence[str]) -> tuple[dict[str, str], ...]:
    """System + user messages for one window (passages already clipped and neutralised)."""
    return (
        {"role": "system", "content": SYSTEM_MESSAGE},
        {"role": "user", "content": user_message(query, passages)},
    )


def canonical_answer(m: int) -> str:
    """The longest well-formed answer for a window of ``m``: ``[m] > [m-1] > ... > [1]``."""
    return " > ".join(f"[{i}]" for i in range(m, 0, -1))


# --------------------------------------------------------------------------------------------
# Formats (a registry: name -> how messages become model text)
# --------------------------------------------------------------------------------------------


def _special(tokenizer: Any, attr: str, default: str) -> str:
    value = getattr(tokenizer, attr, None) if tokenizer is not None else None
    return value if isinstance(value, str) and value else default


def _bos(tokenizer: Any) -> str:
    value = getattr(tokenizer, "bos_token", None) if tokenizer is not None else None
    return value if isinstance(value, str) else ""


def _render_zephyr(messages: Sequence[Message], tokenizer: Any) -> str:
    eos = _special(tokenizer, "eos_token", "</s>")
    body = "".join(f"<|{m['role']}|>\n{m['content']}{eos}\n" for m in messages)
    return f"{_bos(tokenizer)}{body}<|assistant|>\n"


def _render_vicuna(messages: Sequence[Message], tokenizer: Any) -> str:
    parts = []
    for m in messages:
        if m["role"] == "system":
            parts.append(m["content"])
        elif m["role"] == "user":
            parts.append(f"USER: {m['content']}")
        else:
            parts.append(f"ASSISTANT: {m['content']}")
    return f"{_bos(tokenizer)}{' '.join(parts)} ASSISTANT:"


def _render_chat(messages: Sequence[Message], tokenizer: Any) -> str:
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise InputError("prompt format 'chat' needs a tokenizer with a chat template; use --prompt rankvicuna")
    msgs = [dict(m) for m in messages]
    try:
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    except Exception:
        if msgs and msgs[0]["role"] == "system" and len(msgs) > 1:
            merged = [{"role": "user", "content": f"{msgs[0]['content']}\n\n{msgs[1]['content']}"}] + msgs[2:]
            return tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)
        raise


@dataclass(frozen=True)
class PromptFormat:
    """A named way to turn the shared messages into the model's input text."""

    name: str
    description: str
    render: Callable[[Sequence[Message], Any], str]
    needs_chat_template: bool = False


PROMPT_FORMATS: dict[str, PromptFormat] = {
    f.name: f
    for f in (
        PromptFormat("rankzephyr", "Zephyr turns, as castorini/rank_zephyr_7b_v1_full", _render_zephyr),
        PromptFormat("rankvicuna", "Vicuna v1.1 'USER: ... ASSISTANT:', as castorini/rank_vicuna_7b_v1", _render_vicuna),
        PromptFormat("chat", "the tokenizer's chat template (Llama-3.x, Qwen2.5 Instruct ...)", _render_chat, True),
    )
}


def get_format(name: str) -> PromptFormat:
    """The registered format ``name`` (InputError listing the known ones otherwise)."""
    fmt = PROMPT_FORMATS.get((name or "").lower())
    if fmt is None:
        raise InputError(f"unknown prompt format {name!r}; known: {', '.join(PROMPT_FORMATS)}")
    return fmt


def default_format(tokenizer: Any) -> str:
    """``chat`` when the tokenizer has a chat template, else ``rankvicuna``."""
    return "chat" if tokenizer is not None and getattr(tokenizer, "chat_template", None) else "rankvicuna"


# --------------------------------------------------------------------------------------------
# Token counting
# --------------------------------------------------------------------------------------------


class TokenCounter(Protocol):
    """Counts the tokens of a text as the model would see them."""

    name: str

    def count(self, text: str) -> int:  # pragma: no cover
        ...


class HFTokenCounter:
    """Exact counts from a Hugging Face tokenizer (special tokens are spelled inside the text)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.name = f"hf:{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__}"

    def count(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


_PIECES = re.compile(r"[A-Za-z]+|\d+|\s+|.", re.DOTALL)


class ApproxTokenCounter:
    """A tokenizer-free estimate for the BPE tokenizers of OpenAI-style models (no downloads).

    Letters: one token per 5 letters of a word (rounded up, so common words are one token and
    long words two or three); digits: one per 3 (as GPT tokenizers group them); other ASCII
    punctuation: one each; any other character (accents, CJK, emoji): one each; whitespace:
    free. Not calibrated against a real tokenizer here (none can be downloaded), so it is a
    rough size guard; the endpoint's ``usage`` gives the exact counts that get reported.
    """

    name = "approx"

    def count(self, text: str) -> int:
        total = 0
        for piece in _PIECES.findall(text):
            c = piece[0]
            if c.isspace():
                continue
            if c.isascii() and c.isalpha():
                total += math.ceil(len(piece) / 5)
            elif c.isdigit() and c.isascii():
                total += math.ceil(len(piece) / 3)
            elif unicodedata.category(c).startswith("M"):
                continue  # combining marks ride on the previous character
            else:
                total += 1
        return total


# --------------------------------------------------------------------------------------------
# Prompt building
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """One window's prompt: the chat messages, the rendered text, its token count and sizing."""

    messages: tuple[dict[str, str], ...]
    text: str
    tokens: int
    words: int  # per-passage word cap that made it fit
    clipped: bool  # True when some passage was cut


def start_words(window: int) -> int:
    """The starting per-passage word cap: ``300 * 20 / window``."""
    return max(1, int(BASE_WORDS * BASE_WINDOW / max(1, window)))


class PromptBuilder:
    """Builds prompts that fit ``context_size`` tokens, leaving ``answer_tokens`` for the answer.

    ``render(messages) -> str`` gives the exact model input (a chat template, a Vicuna wrapper, or
    a flat join for chat endpoints); ``counter`` counts its tokens; ``overhead_tokens`` is added to
    every count (per-message framing an endpoint adds but the text does not show).
    """

    def __init__(
        self,
        render: Callable[[Sequence[Message]], str],
        counter: TokenCounter,
        context_size: int = 4096,
        answer_tokens: int = 0,
        overhead_tokens: int = 0,
    ):
        self.render = render
        self.counter = counter
        self.context_size = int(context_size)
        self.answer_tokens = int(answer_tokens)
        self.overhead_tokens = int(overhead_tokens)

    @property
    def budget(self) -> int:
        """Tokens the prompt itself may use."""
        return self.context_size - self.answer_tokens

    def _make(self, query: str, texts: Sequence[str], words: int) -> tuple[tuple[dict, ...], str, int, bool]:
        clipped = False
        passages = []
        for t in texts:
            c = clip_words(t, words)
            clipped |= len(c) < len(" ".join(t.split()))
            passages.append(c)
        messages = messages_for(query, passages)
        text = self.render(messages)
        return messages, text, self.counter.count(text) + self.overhead_tokens, clipped

    def build(self, query: str, texts: Sequence[str]) -> Prompt:
        """The prompt for a window; passages shrink until it fits (InputError if even 1 word cannot)."""
        texts = [neutralize_markers(t) for t in texts]
        lengths = [len(t.split()) for t in texts]
        longest = max(lengths, default=0)
        words = min(start_words(len(texts)), max(1, longest))
        budget = self.budget
        while True:
            messages, text, tokens, clipped = self._make(query, texts, words)
            if tokens <= budget:
                return Prompt(messages, text, tokens, words, clipped)
            if words <= 1:
                raise InputError(
                    f"a window of {len(texts)} passages does not fit context size {self.context_size} "
                    f"(needs {tokens} prompt + {self.answer_tokens} answer tokens even at 1 word per passage); "
                    "raise --context-size or lower --window"
                )
            # Shrink the passages the cap cuts by the excess spread over them, counting one token
            # per word (tokenizers give at least that), so a step or two reaches the budget.
            excess = tokens - budget
            cut = sum(1 for n in lengths if n >= words)
            words = max(1, words - max(1, math.ceil(excess / max(1, cut))))


def answer_tokens_for(m: int, counter: TokenCounter, margin: int = ANSWER_MARGIN) -> int:
    """Room for the answer of a window of ``m``: tokens of ``[m] > ... > [1]`` plus a margin."""
    return counter.count(canonical_answer(max(1, m))) + margin


def flat_chat_text(messages: Sequence[Message]) -> str:
    """A chat conversation as one text (what a chat endpoint's key and token estimate are made of)."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


__all__ = [
    "PROMPT_FORMATS",
    "SYSTEM_MESSAGE",
    "ApproxTokenCounter",
    "HFTokenCounter",
    "Prompt",
    "PromptBuilder",
    "PromptFormat",
    "TokenCounter",
    "answer_tokens_for",
    "canonical_answer",
    "clip_words",
    "default_format",
    "flat_chat_text",
    "get_format",
    "messages_for",
    "neutralize_markers",
    "start_words",
    "user_message",
]
