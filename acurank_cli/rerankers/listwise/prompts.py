"""The listwise prompt of the published AcuRank implementation, reproduced byte for byte.

Source: the AcuRank code (``listwise_reranking_modules.py``), itself RankLLM's listwise prompt;
docs/methods.md ("The listwise LLM prompt") describes it and ``prompt-vectors.json`` holds worked cases that
``tests/rerankers/test_prompt_vectors.py`` checks. One window of ``num`` passages becomes:

* system: :data:`SYSTEM_MESSAGE`;
* user: the query, the passages as ``[1] ...``, ``[2] ...`` and the query again (:func:`user_message`);
* each passage: ``Title: {title} Content: {text}`` (or the text), stripped, ftfy-fixed, cut to the
  first ``int(max_length)`` words, ``[digits]`` rewritten to ``(digits)`` (:class:`PassageContent`).

Formats (a registry) say how the messages become the model's text and how long its answer may be:

* ``rankzephyr``: the Zephyr template of castorini/rank_zephyr_7b_v1_full; answers by a fixed table;
* ``rankvicuna``: the Llama-2 ``[INST] <<SYS>>`` default template the published code applied to
  castorini/rank_vicuna_7b_v1 (the paper's appendix shows the same; not Vicuna v1.1's ``USER:``);
* ``chat``: the model tokenizer's own chat template (Llama-3.x, Qwen2.5 Instruct, ...).

An OpenAI-compatible endpoint gets the messages themselves (:data:`CHAT_MESSAGES`); its tokens are
counted over ``system + "\\n" + user`` as the published code did.

Fitting (:class:`PromptBuilder`): ``max_length`` starts at ``300 * 20 / num`` and, while the prompt
exceeds ``context_size - answer``, shrinks by ``max(1, excess // (num * 4))`` (by 1 when that would go
below 0), so every passage shares one cap that shrinks toward the largest cap that fits.
"""

from __future__ import annotations

import enum

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from ...errors import InputError, OptionError
from ...records import Doc
from .answers import identifiers

SYSTEM_MESSAGE = (
    "You are RankLLM, an intelligent assistant that can rank passages based on their relevancy to the query."
)

#: ``max_length`` for a window of ``num`` starts at ``BASE_WORDS * BASE_WINDOW / num`` (a float).
BASE_WORDS = 300
BASE_WINDOW = 20

#: The smallest --context-size a backend accepts: the fixed instruction and a window's frame alone take
#: ~150 tokens (a prompt that still does not fit is refused by the builder, naming the window).
MIN_CONTEXT = 256

#: RankZephyr's answer budget per window size (the published fixed table).
RANKZEPHYR_ANSWER_TOKENS = {
    20: 90, 19: 85, 18: 80, 17: 75, 16: 70, 15: 65, 14: 60, 13: 55, 12: 50, 11: 45,
    10: 40, 9: 35, 8: 31, 7: 27, 6: 23, 5: 19, 4: 15, 3: 11, 2: 7, 1: 3,
}

Message = Mapping[str, str]

# --------------------------------------------------------------------------------------------
# Content: passages, query, user message
# --------------------------------------------------------------------------------------------

_MARKER = re.compile(r"\[(\d+)\]")


def neutralize_markers(text: str) -> str:
    """Rewrite ``[digits]`` as ``(digits)`` (exactly that pattern) so it never looks like an identifier."""
    return _MARKER.sub(r"(\1)", text)


def fix_text(text: str) -> str:
    """ftfy's ``fix_text`` with its defaults (mojibake, quotes, NFC), as the published code applies."""
    import ftfy

    return ftfy.fix_text(text)


@lru_cache(maxsize=65536)
def _fixed_words(title: str, text: str) -> tuple[str, ...]:
    content = f"Title: {title} Content: {text}" if title else text
    return tuple(fix_text(content.strip()).split())


def passage_content(doc: Doc, max_length: float) -> str:
    """A passage as the prompt shows it, cut to the first ``int(max_length)`` words."""
    words = _fixed_words(doc.title, doc.text)
    return neutralize_markers(" ".join(words[: int(max_length)]))


def passage_words(doc: Doc) -> int:
    """Words in the fixed passage (what a cap of that many or more leaves whole)."""
    return len(_fixed_words(doc.title, doc.text))


def user_message(query: str, contents: Sequence[str], letters: bool = False) -> str:
    """The user turn for passages already prepared by :func:`passage_content`. ``letters`` (``--answer
    logits``): the passages carry ``[A]``, ``[B]``, ... and the answer is asked for as bare letters, so the
    first token the model writes is an identifier (otherwise the published text, byte for byte)."""
    num = len(contents)
    q = neutralize_markers(query)
    if letters:
        head = (f"I will provide you with {num} passages, each indicated by a letter identifier []. "
                f"Rank the passages based on their relevance to the search query: {q}.\n\n")
        body = "".join(f"[{i}] {content}\n" for i, content in zip(identifiers(num, letters), contents))
        fmt = "The output format should be the identifiers' letters, e.g., B > A, "
    else:
        head = (
            f"I will provide you with {num} passages, each indicated by  a numerical identifier []. "
            f"Rank the passages based on their relevance to the search query: {q}.\n\n"
        )
        body = "".join(f"[{i}] {content}\n" for i, content in zip(identifiers(num, letters), contents))
        fmt = "The output format should be [] > [], e.g., [2] > [1], "
    tail = (
        f"Search Query: {q}.\nRank the {num} passages above based on their relevance to the search query. "
        "All the passages should be included and listed using identifiers, in descending order of relevance. "
        f"{fmt}Only respond with the ranking results, do not say any word or explain."
    )
    return head + body + tail


def messages_for(query: str, contents: Sequence[str], letters: bool = False) -> tuple[dict[str, str], ...]:
    """System + user messages for one window (``letters``: see :func:`user_message`)."""
    return (
        {"role": "system", "content": SYSTEM_MESSAGE},
        {"role": "user", "content": user_message(query, contents, letters)},
    )


def answer_text(num: int) -> str:
    """The well-formed answer ``[1] > [2] > ... > [num]`` whose length sizes the answer budget."""
    return " > ".join(f"[{i}]" for i in range(1, num + 1))


# --------------------------------------------------------------------------------------------
# Token counters
# --------------------------------------------------------------------------------------------


class TokenCounter(Protocol):
    """Counts tokens as the model reads a text (``name`` says which counter it is)."""

    name: str

    def count(self, text: str) -> int:  # pragma: no cover
        ...


class RegexTokenCounter:
    """The spec's stand-in counter: ``len(re.findall(r"\\w+|[^\\w\\s]", text))`` (tests need no model)."""

    name = "regex"
    _PIECES = re.compile(r"\w+|[^\w\s]")

    def count(self, text: str) -> int:
        return len(self._PIECES.findall(text))


class HFTokenCounter:
    """A Hugging Face tokenizer's count, with its default special tokens (as the published code).

    ``single_bos``: when the text already begins with the tokenizer's BOS (a template that writes
    it), do not add a second one. Off reproduces the published code, which feeds two.
    """

    #: prompts whose ids are kept: a prompt is tokenised when it is built (its count) and read again by the
    #: model that runs it, from here (more than the windows of one call)
    KEPT = 512

    def __init__(self, tokenizer: Any, single_bos: bool = True, name: str | None = None,
                 answer_budget: "AnswerBudget | str" = "published"):
        self.tokenizer = tokenizer
        self.single_bos = single_bos
        self.answer_budget = AnswerBudget(answer_budget)
        self.name = name or f"hf:{getattr(tokenizer, 'name_or_path', '') or type(tokenizer).__name__}"
        self._kept: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()  # a server's lanes count in several threads

    def add_special_tokens(self, text: str) -> bool:
        """Whether the tokenizer's own special tokens go around ``text``."""
        bos = getattr(self.tokenizer, "bos_token", None)
        return not (self.single_bos and isinstance(bos, str) and bos and text.startswith(bos))

    def ids(self, text: str) -> list[int]:
        """The text's token ids (the last :data:`KEPT` texts' kept: a prompt is tokenised once)."""
        with self._lock:
            found = self._kept.get(text)
            if found is not None:
                self._kept.move_to_end(text)
                return found
        found = self.tokenizer(text, add_special_tokens=self.add_special_tokens(text))["input_ids"]
        with self._lock:
            self._kept[text] = found
            if len(self._kept) > self.KEPT:
                self._kept.popitem(last=False)
        return found

    def count(self, text: str) -> int:
        return len(self.ids(text))

    def answer_count(self, answer: str) -> int:
        """The answer budget of ``answer`` (:class:`AnswerBudget`): its own tokens, or the published count."""
        if self.answer_budget is AnswerBudget.published:
            return self.count(answer) - 1
        return len(self.tokenizer(answer, add_special_tokens=False)["input_ids"])

    def answer_identity(self) -> str:
        """What the cache key says of the budget: ``published`` wherever the two rules give the same budgets (they
        differ by a constant, so one window size tells), so calls cached before the choice existed still match."""
        sample = answer_text(BASE_WINDOW)
        if self.answer_budget is AnswerBudget.published or self.count(sample) - 1 == self.answer_count(sample):
            return AnswerBudget.published.value
        return self.answer_budget.value


class TiktokenCounter:
    """An OpenAI tiktoken encoding (``encoding`` by name)."""

    def __init__(self, encoding: Any):
        self.encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))


class ApproxTokenCounter:
    """Last resort when no tokenizer is available: about 4 characters a token, never fewer than words."""

    name = "approx"

    def count(self, text: str) -> int:
        return max(len(text.split()), (len(text) + 3) // 4)


# --------------------------------------------------------------------------------------------
# Formats (a registry: how messages become the model text, and the answer budget)
# --------------------------------------------------------------------------------------------


@lru_cache(maxsize=16)
def _compiled(template: str):
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    return env.from_string(template)


def render_template(template: str, messages: Sequence[Message], bos_token: str, eos_token: str) -> str:
    """A chat template rendered as transformers' ``apply_chat_template`` does (generation prompt on)."""
    return _compiled(template).render(
        messages=[dict(m) for m in messages], add_generation_prompt=True, bos_token=bos_token, eos_token=eos_token
    )


ZEPHYR_TEMPLATE = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
)

LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)


class AnswerBudget(str, enum.Enum):
    """``--answer-budget``: how a local model's answer budget out(num) is counted (formats without a table).

    The published code counts ``[1] > ... > [num]`` with the tokenizer's special tokens and subtracts 1, the
    start token every model it ran (Llama, Vicuna, Mistral) puts in front. For a tokenizer that adds none
    (SmolLM2, Qwen) that 1 is a token of the answer: the model is stopped one token short of a full ranking
    (``... > [20`` instead of ``... > [20]``). ``counted`` (the default) counts the answer's own tokens, without
    special tokens: the published figure wherever the tokenizer adds exactly one start token, and the answer's
    length where it adds none (as RankLLM 0.26 counts). ``published`` keeps the literal rule.
    """

    counted = "counted"
    published = "published"


def _counted_answer(num: int, counter: TokenCounter) -> int:
    """out(num) for most models: the tokens of ``[1] > ... > [num]`` (:class:`AnswerBudget`); a counter without
    a tokenizer of its own (the spec's regex stand-in, tiktoken) keeps the published count minus 1."""
    return counted_text(answer_text(num), counter)


def counted_text(answer: str, counter: TokenCounter) -> int:
    exact = getattr(counter, "answer_count", None)
    return exact(answer) if exact is not None else counter.count(answer) - 1


def _zephyr_answer(num: int, counter: TokenCounter) -> int:
    return RANKZEPHYR_ANSWER_TOKENS.get(num) or _counted_answer(num, counter)


@dataclass(frozen=True)
class PromptFormat:
    """A named way to turn the messages into model text, and to size the answer."""

    name: str
    source: str
    render: Callable[..., str]
    answer_tokens: Callable[[int, TokenCounter], int] = _counted_answer
    needs_chat_template: bool = False


def _render_fixed(template: str, bos: str, eos: str) -> Callable[..., str]:
    return lambda messages, tokenizer, **switches: render_template(template, messages, bos, eos)


def _render_chat(messages: Sequence[Message], tokenizer: Any, **switches: Any) -> str:
    """The tokenizer's chat template; ``switches`` are its template variables (``enable_thinking``), given only
    when set (a template that does not read one ignores it)."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise OptionError("prompt format 'chat' needs a tokenizer with a chat template; use {prompt_format}",
                          prompt_format=("--prompt", "rankvicuna"))
    msgs = [dict(m) for m in messages]
    try:
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **switches)
    except Exception:  # a template without a system role (Gemma, Mistral v0.1): system joins the user turn
        if msgs and msgs[0]["role"] == "system" and len(msgs) > 1:
            merged = [{"role": "user", "content": f"{msgs[0]['content']}\n\n{msgs[1]['content']}"}] + msgs[2:]
            return tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True, **switches)
        raise


def _render_messages(messages: Sequence[Message], tokenizer: Any, **switches: Any) -> str:
    """What the published code counted for a chat endpoint: ``system + "\\n" + user``."""
    return "\n".join(m["content"] for m in messages)


PROMPT_FORMATS: dict[str, PromptFormat] = {
    f.name: f
    for f in (
        PromptFormat("rankzephyr", "castorini/rank_zephyr_7b_v1_full's Zephyr template, answer table",
                     _render_fixed(ZEPHYR_TEMPLATE, "<s>", "</s>"), _zephyr_answer),
        PromptFormat("rankvicuna", "the Llama-2 [INST] <<SYS>> default the published code applied to RankVicuna",
                     _render_fixed(LLAMA2_TEMPLATE, "<s>", "</s>")),
        PromptFormat("chat", "the model tokenizer's own chat template", _render_chat, needs_chat_template=True),
    )
}

#: Chat-completion endpoints: the messages are sent; this renders what their tokens are counted over.
CHAT_MESSAGES = PromptFormat("messages", "OpenAI chat messages (system + user)", _render_messages)


def get_format(name: str) -> PromptFormat:
    """The registered format ``name`` (InputError listing the known ones otherwise)."""
    fmt = PROMPT_FORMATS.get((name or "").lower())
    if fmt is None and (name or "").lower() == CHAT_MESSAGES.name:
        raise InputError(f"prompt format {name!r} is a chat endpoint's (openai:, which sends the messages); a local "
                         f"model renders one of: {', '.join(PROMPT_FORMATS)}")
    if fmt is None:
        raise InputError(f"unknown prompt format {name!r}; known: {', '.join(PROMPT_FORMATS)} (and openai:'s "
                         f"{CHAT_MESSAGES.name})")
    return fmt


def default_format(tokenizer: Any) -> str:
    """``chat`` when the tokenizer has a chat template, else ``rankvicuna``."""
    return "chat" if tokenizer is not None and getattr(tokenizer, "chat_template", None) else "rankvicuna"


# --------------------------------------------------------------------------------------------
# Building a prompt that fits
# --------------------------------------------------------------------------------------------


__all__ = [
    "CHAT_MESSAGES",
    "PROMPT_FORMATS",
    "AnswerBudget",
    "RANKZEPHYR_ANSWER_TOKENS",
    "SYSTEM_MESSAGE",
    "ApproxTokenCounter",
    "HFTokenCounter",
    "PromptFormat",
    "RegexTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "answer_text",
    "default_format",
    "fix_text",
    "get_format",
    "messages_for",
    "neutralize_markers",
    "passage_content",
    "render_template",
    "user_message",
]
