"""One window's prompt, fitted to the context: :class:`PromptBuilder` (the published fitting loop over the
messages of :mod:`.prompts` or of a template file, :mod:`.templates`) and :func:`prompt_builder`, the one builder
the local backends (``hf:``, ``vllm:``) make from a model's tokenizer, so that the same window gives the same text
and the same token ids in either engine.

Fitting: ``max_length`` starts at ``300 * 20 / num`` (a template file: at 300) and, while the prompt exceeds
``context_size - answer - thought``, shrinks by ``max(1, excess // (num * 4))`` (by 1 when that would go below 0),
so every passage shares one cap that shrinks toward the largest cap that fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import InputError, OptionError
from ...records import Doc
from .answers import LETTERS, AnswerMode
from .prompts import (BASE_WINDOW, BASE_WORDS, HFTokenCounter, Message, PromptFormat, TokenCounter, counted_text,
                      answer_text, default_format, fix_text, get_format, passage_content,
                      passage_words)
from .templates import PUBLISHED, PromptTemplate
from .thinking import ThinkingOptions
from .thoughts import FORCED_CLOSE, OPEN_TAG, opens_thought


@dataclass(frozen=True, kw_only=True)
class Prompt:
    """One window's prompt: messages, the model text (counted; sent by local models), sizing."""

    messages: tuple[dict[str, str], ...]
    text: str
    tokens: int
    max_length: int  # the per-passage word cap that made it fit
    answer_tokens: int  # the answer budget out(num)
    clipped: bool  # True when the cap cut some passage
    num: int = 0  # passages in the window
    #: whether the model thinks on this window (None: its default, nothing sent) and the tokens its thought may
    #: take (reserved in the context: a local model's thought is forced to end there)
    think: bool | None = None
    thought_budget: int = 0


def start_max_length(num: int) -> float:
    """The starting per-passage cap: ``300 * 20 / num`` (a float; words are cut at its int)."""
    return BASE_WORDS * BASE_WINDOW / num


class PromptBuilder:
    """Builds one window's prompt for a format, fitted to ``context_size`` tokens.

    ``fmt.render(messages, tokenizer)`` gives the model text; local models read it after ftfy's
    ``fix_text`` (``fix_rendered``); ``counter`` counts it.
    """

    def __init__(self, fmt: PromptFormat, counter: TokenCounter, context_size: int = 4096, *,
                 tokenizer: Any = None, fix_rendered: bool = True, answer: AnswerMode = AnswerMode.text,
                 thought_budget: int = 0, template: PromptTemplate = PUBLISHED):
        self.format = fmt
        #: the window's messages (:class:`~.templates.PromptTemplate`): a template file, or the published prompt (one
        #: built-in template), each with the run's instruction, few-shot turns or system message
        self.template = template
        self.counter = counter
        self.context_size = int(context_size)
        self.tokenizer = tokenizer
        self.fix_rendered = fix_rendered
        self.answer = AnswerMode(answer)
        #: tokens a thought may take, reserved in the context of a window that thinks (0: none reserved)
        self.thought_budget = int(thought_budget)
        #: the chat template's variables set for every window (``reasoning_effort``, which gpt-oss's template reads)
        self.template_switches: dict[str, Any] = {}

    @property
    def letters(self) -> bool:
        """Identifiers are letters (``--answer logits``)."""
        return self.answer is AnswerMode.logits

    def answer_tokens(self, num: int) -> int:
        """The answer budget for a window of ``num``: out(num), as published; one token with ``--answer logits``
        (the first, whose logits rank the window); with ``--answer constrained`` the characters of the canonical
        answer plus one (a token writes at least one character: the constrained answer always completes)."""
        if self.answer is AnswerMode.logits:
            return 1
        if self.answer is AnswerMode.constrained:
            return len(answer_text(num)) + 1
        if self.template.is_file:  # the answer in the form the template asks for
            return counted_text(self.template.answer_sample(num), self.counter)
        return self.format.answer_tokens(num, self.counter)

    def whole_answer_tokens(self, num: int) -> int:
        """The tokens of a whole answer for a window of ``num`` as a served model writes it: out(num) where that
        count is the answer's own (one token under ``--answer logits``, constrained's characters, a tokenizer's own
        count); else the published count without its minus 1, which stands for the start token a local tokenizer
        adds to what it counts and a completion does not carry (a cap at out(num) cut every such answer one token
        short)."""
        if self.answer is not AnswerMode.text or getattr(self.counter, "answer_count", None) is not None:
            return self.answer_tokens(num)
        return self.counter.count(self.template.answer_sample(num) if self.template.is_file else answer_text(num))

    def parse(self, answer: str, n: int) -> Any:
        """The window's order from an answer (:class:`~.parsing.ParsedRanking`), as the template reads it (the
        published prompt's: the published parser)."""
        return self.template.parse(answer, n)

    def text(self, messages: Sequence[Message], think: bool | None = None) -> str:
        """The model text. ``think`` (None: nothing said): the template's switch ``enable_thinking``; and the model
        text of a local model (``fix_rendered``) opens the thought when it thinks and the template did not (as
        budget forcing does), or closes one the template opened when it does not (R1's distills open ``<think>``
        themselves)."""
        switches = {} if think is None else {"enable_thinking": bool(think)}
        if self.template_switches:
            switches.update(self.template_switches)
        rendered = self.format.render(messages, self.tokenizer, **switches)
        if not self.fix_rendered:
            return rendered
        text = fix_text(rendered)
        if think is None:
            return text
        opened = opens_thought(text)
        if think and not opened:
            return text + OPEN_TAG + "\n"
        if not think and opened:
            return text + FORCED_CLOSE
        return text

    def make(self, query: str, docs: Sequence[Doc], max_length: float, think: bool | None = None,
             scores: Sequence[float] = (), instruction: str | None = None) -> tuple[tuple[dict, ...], str, int]:
        """Messages, text and token count at one cap (``scores``: the documents' first-stage scores;
        ``instruction``: the query's own, in place of the run's)."""
        contents = [passage_content(d, max_length) for d in docs]
        template = self.template if instruction is None else self.template.with_instruction(instruction)
        messages = template.messages(query, contents, scores, self.letters)
        text = self.text(messages, think)
        return messages, text, self.counter.count(text)

    def build(self, query: str, docs: Sequence[Doc], think: bool | None = None, scores: Sequence[float] = (),
              instruction: str | None = None) -> Prompt:
        """The prompt for a window; the shared cap shrinks until it fits (InputError if 0 words cannot). A window
        that thinks fits with its thought's budget reserved."""
        num = len(docs)
        if num == 0:
            raise InputError("a prompt needs at least one passage")
        if self.letters and num > len(LETTERS):
            raise OptionError(f"{{answer}} names passages by letters: a window of {num} passages has more than "
                              f"{len(LETTERS)}; use {{m}}", answer=("--answer", "logits"), m={"api": f"m={len(LETTERS)} or less", "cli": f"--window {len(LETTERS)} or less"})
        out = self.answer_tokens(num)
        thought = self.thought_budget if think else 0
        budget = self.context_size - out - thought
        # a template file starts where RankLLM starts (its max_passage_words, 300), whatever the window's size
        max_length = float(BASE_WORDS) if self.template.is_file else start_max_length(num)
        while True:
            messages, text, tokens = self.make(query, docs, max_length, think, scores, instruction)
            if tokens <= budget:
                cap = int(max_length)
                clipped = any(passage_words(d) > cap for d in docs)
                return Prompt(messages=messages, text=text, tokens=tokens, max_length=cap, answer_tokens=out,
                              clipped=clipped, num=num, think=think, thought_budget=thought)
            if int(max_length) <= 0:
                raise OptionError(
                    f"query {OptionError.literal(repr(query[:60]))}: a window of {num} passages does not fit {{context_size}} "
                    f"even with empty passages ({tokens} prompt + {out} answer"
                    f"{f' + {thought} thought' if thought else ''} tokens)",
                    context_size=("--context-size", self.context_size)
                )
            shrunk = max_length - max(1, (tokens - budget) // (num * 4))
            max_length = shrunk if shrunk >= 0 else max_length - 1



def prompt_builder(source: Any, tokenizer: Any, *, prompt_format: str | None, context_size: int, max_positions: Any,
                   double_bos: bool, backend: str, answer: Any = "text", options: Any = None,
                   template: PromptTemplate = PUBLISHED) -> PromptBuilder:
    """The one prompt builder of the local backends (``source``: the model's
    :class:`~acurank_cli.rerankers.backends.checkpoints.ModelSource`): format (given, else ``chat`` when the tokenizer
    has a template, else ``rankvicuna``; a template file's messages are rendered by the chat template), context
    clamped to the model's positions, the model's tokenizer as counter (one BOS unless ``double_bos``; its answer
    budget ``--answer-budget``, read from the backend's ``options``, as are its thinking settings), the answer mode
    (``--answer``), the window's messages (``template``: :func:`~.templates.template_of`'s)."""
    if template.is_file:
        if not getattr(tokenizer, "chat_template", None):
            raise OptionError(f"{backend}: a template file's messages are rendered by the model's chat template, and "
                              f"{OptionError.literal(repr(source.spec))} has none", prompt_format="--prompt")
        prompt_format = "chat"
    fmt = get_format(prompt_format or default_format(tokenizer))
    if fmt.needs_chat_template and not getattr(tokenizer, "chat_template", None):
        raise OptionError(f"{backend}: {OptionError.literal(repr(source.spec))} has no chat template; use {{prompt_format}}",
                          prompt_format={"api": "prompt_format='rankvicuna' or 'rankzephyr'",
                                         "cli": "--prompt rankvicuna or rankzephyr"})
    context = int(context_size)
    if isinstance(max_positions, int) and max_positions > 0:
        context = min(context, max_positions)
    counter = HFTokenCounter(tokenizer, single_bos=not double_bos, name=source.counter_name(tokenizer),
                             answer_budget=getattr(options, "answer_budget", "counted"))
    settings = ThinkingOptions.of(options) if options is not None else None
    # a window that thinks keeps room for its thought (forced to end at the budget)
    budget = settings.local_budget() if settings is not None and settings.thinks else 0
    builder = PromptBuilder(fmt, counter, context, tokenizer=tokenizer, answer=answer, thought_budget=budget,
                            template=template)
    if settings is not None and settings.reasoning_effort is not None:  # a template variable (gpt-oss's reads it)
        builder.template_switches["reasoning_effort"] = settings.reasoning_effort.value
    return builder


__all__ = ["Prompt", "PromptBuilder", "prompt_builder", "start_max_length"]
