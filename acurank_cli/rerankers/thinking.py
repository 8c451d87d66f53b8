"""Rerankers that think before they answer: the one reader that keeps a thought apart from the answer, the
thinking options every listwise LLM backend shares, and the gate that decides, window by window, where AcuRank
lets the model think.

**The answer, never the thought.** A model that reasons writes a thought, then its answer; the ranking is read
from the answer alone (:func:`read_thought`):

* inline thoughts, whatever the server: ``<think>...</think>`` (Qwen3, DeepSeek-R1 and its distills, ReasonRank,
  Rank1, REARANK), ``<thinking>``, ``<thought>``, ``<reasoning>``, ``<reason>``, ``<seed:think>`` (Seed-OSS),
  ``◁think▷...◁/think▷`` (Kimi), ``<|begin_of_thought|>...<|end_of_thought|>`` (Sky-T1, OpenThinker),
  ``<|START_THINKING|>...<|END_THINKING|>`` (Command A Reasoning), ``[THINK]...[/THINK]`` (Magistral), and
  gpt-oss's harmony channels (``analysis``, then ``final``); tags in any case. The answer is the text after the
  *last* closing tag, also when only the closing tag was generated (the opening one in the chat template, as R1's
  distills have it), inside an ``<answer>``, ``<|begin_of_solution|>`` or ``<response>`` wrapper when there is one;
* a thought the server already kept apart (``reasoning_content``, ``reasoning``: vLLM and SGLang with a reasoning
  parser, OpenRouter, DeepSeek's API) is never read;
* a thought that never ended (cut by the token limit, or the model stopped inside it) is
  :attr:`~acurank_cli.records.ParseStatus.thought_cut`: counted and shown, the window kept in its presented order,
  and never searched for brackets.

**Controls** (:class:`ThinkingOptions`, shared by hf:, vllm:, openai: and the simulated reranker): ``--thinking
off|on|gated``, ``--reasoning-effort``, ``--thinking-budget N``, ``--think-above X``; what each does per backend is
in docs/thinking.md and the support matrix. Without them nothing is sent or changed (the model's own default).

**Gated thinking** (:class:`ThinkingGate`): a window thinks only while its ratings are unsettled: when a document
in it keeps at least ``think_above`` of its prior uncertainty (sigma / sigma before any answer,
:func:`acurank_cli.method.uncertainty.unsettled`); the others are answered directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Optional

from ..errors import OptionError
from ..params import Option, at_least, between, flag_of
from ..records import Label


class Thinking(Label):
    """``--thinking``: the model answers directly (off), thinks first on every window (on), or thinks only on the
    windows whose ratings are still unsettled (gated: AcuRank decides, window by window)."""

    off = "off"
    on = "on"
    gated = "gated"


class ReasoningEffort(Label):
    """``--reasoning-effort``: OpenAI's reasoning levels (``reasoning_effort``)."""

    none = "none"
    minimal = "minimal"
    low = "low"
    medium = "medium"
    high = "high"


#: The effort a gated window that does not think is sent with, where the model always reasons (OpenAI's
#: reasoning models): the lowest level every one of them takes.
GATED_OFF_EFFORT = ReasoningEffort.low

#: The thought's token budget on hf: and vllm: when ``--thinking on|gated`` is given without ``--thinking-budget``
#: (a local model's thought must end somewhere: it is forced to, here).
DEFAULT_LOCAL_BUDGET = 1024

#: ``--think-above``'s default: a window thinks while a document in it keeps half its prior rating uncertainty
#: (:func:`~acurank_cli.method.uncertainty.unsettled`; chosen on the simulated benchmark, BENCHMARKS.md 19).
DEFAULT_THINK_ABOVE = 0.5

#: What a local model is given to open a thought, and written to close one when its budget is spent.
OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
FORCED_CLOSE = "\n" + CLOSE_TAG + "\n\n"


@dataclass(frozen=True)
class ThinkingOptions:
    """Listwise LLMs that may think (hf:, vllm:, openai:, and the simulated reranker's thinking model)."""

    thinking: Optional[Thinking] = Option(help="off: answer directly; on: think first; gated: think only on windows "
                                          "whose ratings are unsettled (methods with an uncertainty: acurank "
                                          "family, acurank-auto). Default: the model's own")(None)
    reasoning_effort: Optional[ReasoningEffort] = Option(help="OpenAI reasoning models' effort (reasoning_effort); "
                                                         "no temperature is sent with it")(None)
    thinking_budget: Optional[int] = Option(help="tokens a thought may take: hf/vllm force the thought's end there "
                                            "and the model answers (default 1024 when thinking); openai caps the "
                                            "completion at budget + answer", domain=at_least(1))(None)
    think_above: Optional[float] = Option(help="--thinking gated: a window thinks when a document in it keeps at "
                                          "least this share of its prior rating uncertainty, sigma/sigma0 (0..1, "
                                          "default 0.5)",
                                          domain=between(0.0, 1.0))(None)

    def __post_init__(self) -> None:
        for name, kind in (("thinking", Thinking), ("reasoning_effort", ReasoningEffort)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(str(value).lower()))
                except ValueError:
                    raise OptionError(f"{{{name}}}: must be one of {', '.join(k.value for k in kind)}",
                                      **{name: (flag_of(name), value)}) from None
        if self.think_above is not None and self.thinking is not Thinking.gated:
            raise OptionError("{think_above} goes with {thinking}", think_above="--think-above",
                              thinking=("--thinking", "gated"))

    @classmethod
    def of(cls, options: object) -> "ThinkingOptions":
        """The thinking settings of a backend's options record (which inherits this group)."""
        return cls(**{f.name: getattr(options, f.name, None) for f in fields(cls)})

    @property
    def thinks(self) -> bool:
        """Some window may think."""
        return self.thinking in (Thinking.on, Thinking.gated)

    def think_for(self, requested: bool | None) -> bool | None:
        """Whether one window thinks: gated follows the window's gate decision (``requested``); on and off are
        the same for every window; None: the model's default (nothing sent)."""
        if self.thinking is Thinking.gated:
            return bool(requested)
        if self.thinking is None:
            return None
        return self.thinking is Thinking.on

    def identity(self) -> dict:
        """The settings for a cache identity and a fingerprint (empty when none is given: identities unchanged)."""
        out: dict = {}
        if self.thinking is not None:
            out["thinking"] = self.thinking.value
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort.value
        if self.thinking_budget is not None:
            out["thinking_budget"] = int(self.thinking_budget)
        if self.thinking is Thinking.gated:
            out["think_above"] = self.gate_threshold
        return out

    @property
    def gate_threshold(self) -> float:
        return DEFAULT_THINK_ABOVE if self.think_above is None else float(self.think_above)

    def local_budget(self) -> int:
        return DEFAULT_LOCAL_BUDGET if self.thinking_budget is None else int(self.thinking_budget)


def check_local(options: object, backend: str) -> None:
    """What a local model (hf:, vllm:) cannot do, refused in one line before any weights load: ``--answer logits``
    with thinking (it ranks by the first token's logits, and a thinking model's first token begins its thought), and
    a budget without thinking (a local model's thought is forced to end at the budget only when acurank opens it)."""
    settings = ThinkingOptions.of(options)
    if settings.thinking_budget is not None and not settings.thinks:
        raise OptionError(f"{backend}: {{thinking_budget}} ends a thought that {{thinking}} (or gated) opens",
                          thinking_budget="--thinking-budget", thinking=("--thinking", "on"))
    answer = getattr(getattr(options, "answer", None), "value", getattr(options, "answer", None))
    if answer == "logits" and settings.thinks:
        raise OptionError(f"{backend}: {{answer}} ranks by the first token's logits, and a thinking model's first "
                          "token begins its thought: use {thinking}, or --answer text or constrained",
                          answer=("--answer", "logits"), thinking=("--thinking", "off"))


#: What each control does on each backend (the support matrix's table, docs/thinking.md).
PER_BACKEND: dict[str, dict[str, str]] = {
    "hf": {
        "--thinking off": "the template's `enable_thinking=False`; a template that opens `<think>` itself gets it closed",
        "--thinking on": "`enable_thinking=True`, the thought opened if the template did not; generated until "
                         "`</think>` or the budget, then the answer (text or constrained) after it",
        "--thinking-budget N": "budget forcing: the thought ends at N tokens (`</think>` written for it) and the "
                               "model answers (default 1024)",
        "--reasoning-effort": "the template variable `reasoning_effort` (gpt-oss's template reads it)",
        "--answer logits": "refused with thinking on or gated (the first token begins the thought)",
    },
    "vllm": {
        "--thinking off": "as hf:", "--thinking on": "as hf: (two engine passes: the thought, then the answer)",
        "--thinking-budget N": "as hf:", "--reasoning-effort": "as hf:", "--answer logits": "as hf:",
    },
    "openai": {
        "--thinking off": "`chat_template_kwargs: {enable_thinking: false}` (vLLM, SGLang); with --reasoning-effort: "
                          "refused",
        "--thinking on": "`chat_template_kwargs: {enable_thinking: true}`; no token limit unless a budget is given",
        "--thinking-budget N": "the completion capped at N + the answer's tokens (`max_tokens`)",
        "--reasoning-effort": "`reasoning_effort`, with `max_completion_tokens` and no `temperature`; a window gated "
                              "off is sent `low`",
        "--answer logits": "the one token asked for (`max_tokens` 1): use it with --thinking off",
    },
    "simulated": {
        "--thinking off": "the specified oracle", "--thinking on": "noise x `--sim-think-noise`, "
                                                                  "`--sim-think-tokens` thought tokens a window",
        "--thinking-budget N": "no effect", "--reasoning-effort": "no effect", "--answer logits": "-",
    },
}


# -- the one reader -------------------------------------------------------------------------------------------

#: (opening, closing) spellings of an inline thought
THOUGHT_TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<thought>", "</thought>"),
    ("<reasoning>", "</reasoning>"),
    ("<reason>", "</reason>"),
    ("<seed:think>", "</seed:think>"),
    ("◁think▷", "◁/think▷"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("<|start_thinking|>", "<|end_thinking|>"),
    ("[think]", "[/think]"),
)
#: (opening, closing) wrappers of the answer after a thought
ANSWER_TAGS: tuple[tuple[str, str], ...] = (
    ("<answer>", "</answer>"),
    ("<|begin_of_solution|>", "<|end_of_solution|>"),
    ("<response>", "</response>"),
)

_OPEN = re.compile("|".join(re.escape(o) for o, _ in THOUGHT_TAGS), re.IGNORECASE)
_CLOSE = re.compile("|".join(re.escape(c) for _, c in THOUGHT_TAGS), re.IGNORECASE)
#: gpt-oss's harmony format: <|channel|>NAME<|message|>TEXT, ended by <|end|>, <|return|> or <|call|>
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)[^<]*<\|message\|>(.*?)(?=<\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|"
                      r"<\|channel\|>|\Z)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Thought:
    """A model's output split: the ``answer`` (what a ranking is read from), the ``thought`` (never read), and
    whether the thought was ``cut`` (it never ended: no answer came)."""

    answer: str
    thought: str = ""
    cut: bool = False


def opens_thought(prompt_text: str) -> bool:
    """Whether a rendered prompt ends inside an opened thought (an R1 distill's template opens ``<think>`` itself):
    the generated text then starts in the thought."""
    tail = prompt_text.rstrip()[-32:]
    found = list(_OPEN.finditer(tail))
    return bool(found) and found[-1].end() == len(tail) and not _CLOSE.search(tail[found[-1].end():])


def _unwrap(answer: str) -> str:
    """The answer inside its last wrapper (``<answer>...</answer>``; an unclosed one runs to the end)."""
    low = answer.lower()
    for opening, closing in ANSWER_TAGS:
        at = low.rfind(opening)
        if at >= 0:
            inside = answer[at + len(opening):]
            end = inside.lower().find(closing)
            return inside if end < 0 else inside[:end]
    return answer


def _harmony(text: str) -> Thought | None:
    """gpt-oss's channels: the answer is the last ``final`` message, the rest thought; no final message: cut."""
    found = list(_CHANNEL.finditer(text))
    if not found:
        return None
    finals = [m for m in found if m.group(1).lower() == "final"]
    thought = "\n".join(m.group(2) for m in found if m.group(1).lower() != "final")
    if not finals:
        return Thought("", thought, cut=True)
    return Thought(_unwrap(finals[-1].group(2)).strip(), thought)


def read_thought(text: str | None, reasoning: str | None = None, opened: bool = False) -> Thought:
    """Split a model's output into its thought and its answer (see the module doc).

    ``reasoning``: a thought the server kept apart (``reasoning_content``); ``opened``: the prompt ended inside a
    thought (:func:`opens_thought`), so the output starts in it."""
    text = text or ""
    kept = (reasoning or "").strip()
    harmony = _harmony(text) if "<|channel|>" in text.lower() else None
    if harmony is not None:
        return Thought(harmony.answer, "\n".join(t for t in (kept, harmony.thought) if t), harmony.cut)
    closes = list(_CLOSE.finditer(text))
    if closes:
        last = closes[-1]
        thought, answer = text[: last.start()], text[last.end():]
        reopened = _OPEN.search(answer)
        if reopened:  # a new thought after the answer began, never ended: what came before it is the answer
            answer = answer[: reopened.start()]
        thought = _OPEN.sub("", thought).strip()
        return Thought(_unwrap(answer).strip(), "\n".join(t for t in (kept, thought) if t))
    opening = _OPEN.search(text)
    if opening is not None or opened:  # a thought began and never ended: no answer came
        thought = text if opening is None else text[opening.end():]
        return Thought("", "\n".join(t for t in (kept, thought.strip()) if t), cut=True)
    return Thought(_unwrap(text).strip() if kept else _unwrap_if_wrapped(text), kept)


def _unwrap_if_wrapped(text: str) -> str:
    """A plain answer as it was written (byte for byte, as the published parser reads it), unless it is wrapped."""
    low = text.lower()
    return _unwrap(text).strip() if any(o in low for o, _ in ANSWER_TAGS) else text


# -- gated thinking -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThinkingGate:
    """``--thinking gated``: a window thinks when its measure (:func:`~acurank_cli.method.uncertainty.unsettled`) is at
    least ``think_above``."""

    think_above: float = DEFAULT_THINK_ABOVE

    def decide(self, measures: tuple[float, ...]) -> tuple[bool, ...]:
        return tuple(s >= self.think_above for s in measures)


def gate_of(options: object) -> ThinkingGate | None:
    """The gate a backend's options ask for (``--thinking gated``), or None."""
    if getattr(options, "thinking", None) is not Thinking.gated:
        return None
    return ThinkingGate(options.gate_threshold)  # type: ignore[attr-defined]


__all__ = ["ANSWER_TAGS", "PER_BACKEND", "CLOSE_TAG", "DEFAULT_LOCAL_BUDGET", "DEFAULT_THINK_ABOVE", "FORCED_CLOSE", "GATED_OFF_EFFORT",
           "OPEN_TAG", "ReasoningEffort", "THOUGHT_TAGS", "Thinking", "ThinkingGate", "ThinkingOptions", "Thought",
           "gate_of", "opens_thought", "read_thought", "check_local"]
