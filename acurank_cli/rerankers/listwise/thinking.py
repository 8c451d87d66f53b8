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

**Gated thinking**: a window thinks only while its ratings are unsettled; its measure, threshold, rule and
application are :mod:`acurank_cli.method.thinking_gate`'s, built from these options by :func:`gate_of`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Optional

from ...errors import OptionError
from ...params import Option, at_least, between, flag_of
from ...method.thinking_gate import DEFAULT_THINK_ABOVE, ThinkingGate
from ...records import Label


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

#: What a local model is given to open a thought, and written to close one when its budget is spent.
OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
FORCED_CLOSE = "\n" + CLOSE_TAG + "\n\n"


@dataclass(frozen=True)
class ThinkingOptions:
    """Listwise LLMs that may think (hf:, vllm:, openai:, and the simulated reranker's thinking model)."""

    help_panel = "Thinking"  # its flags' --help panel (cli/flags.py PANELS)

    thinking: Optional[Thinking] = Option(help="off: answer directly; on: think first; gated: think only on windows "
                                          "whose ratings are unsettled (methods with an uncertainty: acurank "
                                          "family, acurank-auto). Default: the model's own")(None)
    reasoning_effort: Optional[ReasoningEffort] = Option(help="OpenAI reasoning models' effort (reasoning_effort); "
                                                         "no temperature is sent with it")(None)
    thinking_budget: Optional[int] = Option(help="tokens a thought may take; needs --thinking on|gated (openai: or "
                                            "--reasoning-effort). hf/vllm force the thought's end there and the model "
                                            f"answers (default {DEFAULT_LOCAL_BUDGET} when thinking); openai caps each "
                                            "thinking call's completion at budget + answer; simulated: a thought "
                                            "costs at most this", domain=at_least(1))(None)
    think_above: Optional[float] = Option(help="--thinking gated: a window thinks when a document in it keeps at "
                                          "least this share of its prior rating uncertainty, sigma/sigma0 (0..1, "
                                          f"default {DEFAULT_THINK_ABOVE}; with a per-query budget: none unless "
                                          "given)",
                                          domain=between(0.0, 1.0))(None)
    think_share: Optional[float] = Option(help="--thinking gated: a query's thinking budget as a share of its "
                                          "windows (0..1): at every step at most this share of the windows sent so "
                                          "far has thought, the most unsettled first",
                                          domain=between(0.0, 1.0))(None)
    think_tokens: Optional[int] = Option(help="--thinking gated: a query's thinking budget in thought tokens, each "
                                         "thinking window counted at the most its thought may take "
                                         "(--thinking-budget; simulated: its thought's cost); the most unsettled "
                                         "windows first (hf, vllm, simulated)", domain=at_least(1))(None)

    def __post_init__(self) -> None:
        for name, kind in (("thinking", Thinking), ("reasoning_effort", ReasoningEffort)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(str(value).lower()))
                except ValueError:
                    raise OptionError(f"{{{name}}}: must be one of {', '.join(k.value for k in kind)}",
                                      **{name: (flag_of(name), value)}) from None
        for name in ("think_above", "think_share", "think_tokens"):
            if getattr(self, name) is not None and self.thinking is not Thinking.gated:
                raise OptionError(f"{{{name}}} goes with {{thinking}}", **{name: flag_of(name)},
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
        if self.think_share is not None:
            out["think_share"] = float(self.think_share)
        if self.think_tokens is not None:
            out["think_tokens"] = int(self.think_tokens)
        return out

    @property
    def budgeted(self) -> bool:
        """A per-query thinking budget is set (``--think-share``, ``--think-tokens``)."""
        return self.think_share is not None or self.think_tokens is not None

    @property
    def gate_threshold(self) -> float:
        """The measure a window needs to think: ``--think-above``; by default 0.5 without a budget, and none (0)
        with one, which then decides alone, the most unsettled windows first."""
        if self.think_above is not None:
            return float(self.think_above)
        return 0.0 if self.budgeted else DEFAULT_THINK_ABOVE

    def local_budget(self) -> int:
        return DEFAULT_LOCAL_BUDGET if self.thinking_budget is None else int(self.thinking_budget)


class Effort(Label):
    """What ``--reasoning-effort`` is on a backend: the effort of a served reasoning model, which then thinks on every
    call (``reasons``: openai:), a chat-template variable that opens no thought by itself (``variable``: hf:,
    vllm:), or nothing the backend can apply (``refused``: the simulated reranker)."""

    reasons = "reasons"
    variable = "variable"
    refused = "refused"


def check_thinking(options: object, backend: str, effort: Effort) -> None:
    """The thinking flags' rules, one per flag for every backend, refused in one line before any model loads:

    * ``--thinking off`` with ``--reasoning-effort``: an effort is for windows that think;
    * ``--reasoning-effort`` where the backend cannot apply it (``effort`` refused);
    * ``--thinking-budget`` with no window that thinks: it caps a thought, so it needs ``--thinking on|gated`` (or,
      on a served reasoning model, ``--reasoning-effort``: every call thinks there);
    * ``--answer logits`` with a window that thinks: it ranks by the first token's logits, and a thinking model's
      first token begins its thought."""
    settings = ThinkingOptions.of(options)
    effort_given = settings.reasoning_effort is not None
    if settings.thinking is Thinking.off and effort_given:
        raise OptionError("{thinking} with {reasoning_effort}: an effort is for windows that think (give one of them)",
                          thinking=("--thinking", "off"), reasoning_effort="--reasoning-effort")
    if effort_given and effort is Effort.refused:
        raise OptionError(f"{backend}: {{reasoning_effort}} is a served reasoning model's setting; this backend "
                          "thinks with {thinking}", reasoning_effort="--reasoning-effort",
                          thinking=("--thinking", "on"))
    thinks = settings.thinks or (effort_given and effort is Effort.reasons)
    if settings.thinking_budget is not None and not thinks:
        also = " (or --reasoning-effort)" if effort is Effort.reasons else ""
        raise OptionError(f"{backend}: {{thinking_budget}} caps a thought: it needs {{thinking}} or gated{also}",
                          thinking_budget="--thinking-budget", thinking=("--thinking", "on"))
    if settings.think_tokens is not None and effort is Effort.reasons:
        raise OptionError(f"{backend}: {{think_tokens}} counts each thought at the most it may take, and a served "
                          "model's thought is not ended at a known length: use {think_share}",
                          think_tokens="--think-tokens", think_share="--think-share")
    answer = getattr(getattr(options, "answer", None), "value", getattr(options, "answer", None))
    if answer == "logits" and thinks:
        raise OptionError(f"{backend}: {{answer}} ranks by the first token's logits, and a thinking model's first "
                          "token begins its thought: use --answer text or constrained, or no thinking",
                          answer=("--answer", "logits"))


#: What each control does on each backend (the support matrix's table, docs/thinking.md); what it refuses is
#: :func:`check_thinking`'s, the same on every backend.
PER_BACKEND: dict[str, dict[str, str]] = {
    "hf": {
        "--thinking off": "the template's `enable_thinking=False`; a template that opens `<think>` itself gets it closed",
        "--thinking on": "`enable_thinking=True`, the thought opened if the template did not; generated until "
                         "`</think>` or the budget, then the answer (text or constrained) after it",
        "--thinking-budget N": "budget forcing: the thought ends at N tokens (`</think>` written for it) and the "
                               f"model answers (default {DEFAULT_LOCAL_BUDGET}); refused without --thinking on|gated",
        "--reasoning-effort": "the template variable `reasoning_effort` (gpt-oss's template reads it); refused with "
                              "--thinking off",
        "--answer logits": "refused with --thinking on|gated (the first token begins the thought)",
    },
    "vllm": {
        "--thinking off": "as hf:", "--thinking on": "as hf: (two engine passes: the thought, then the answer)",
        "--thinking-budget N": "as hf:", "--reasoning-effort": "as hf:", "--answer logits": "as hf:",
    },
    "openai": {
        "--thinking off": "`chat_template_kwargs: {enable_thinking: false}` (vLLM, SGLang)",
        "--thinking on": "`chat_template_kwargs: {enable_thinking: true}`; no token limit unless a budget is given",
        "--thinking-budget N": "every thinking call's completion capped at N + the answer's tokens (`max_tokens`, "
                               "or `max_completion_tokens` with an effort); refused without --thinking on|gated or "
                               "--reasoning-effort",
        "--reasoning-effort": "`reasoning_effort`, with `max_completion_tokens` and no `temperature`; a window gated "
                              "off is sent `low`; refused with --thinking off",
        "--answer logits": "refused with --thinking on|gated or --reasoning-effort; else the one token asked for "
                           "(`max_tokens` 1)",
    },
    "simulated": {
        "--thinking off": "the specified oracle", "--thinking on": "noise x `--sim-think-noise`, "
                                                                  "`--sim-think-tokens` thought tokens a window",
        "--thinking-budget N": "a thought costs at most N tokens (min of N and `--sim-think-tokens`); refused "
                               "without --thinking on|gated",
        "--reasoning-effort": "refused (a served reasoning model's setting)", "--answer logits": "-",
    },
}


# -- the one reader -------------------------------------------------------------------------------------------

#: (opening, closing) spellings of an inline thought (matched in any case, with white space allowed between a
#: tag's pieces: ``<think >``, ``< /think>``, ``[ THINK ]``)
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


def _spelled(tag: str) -> str:
    """A tag as a pattern: its word runs and marks in order, white space allowed between them."""
    return r"\s*".join(re.escape(piece) for piece in re.findall(r"\w+|[^\w\s]", tag))


def _any(tags) -> re.Pattern:
    return re.compile("|".join(_spelled(t) for t in tags), re.IGNORECASE)


_OPEN = _any(o for o, _ in THOUGHT_TAGS)
_CLOSE = _any(c for _, c in THOUGHT_TAGS)
_WRAP_OPEN = [(_any([o]), _any([c])) for o, c in ANSWER_TAGS]
#: gpt-oss's harmony format: <|channel|>NAME<|message|>TEXT, ended by <|end|>, <|return|> or <|call|>
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)[^<]*<\|message\|>(.*?)(?=<\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|"
                      r"<\|channel\|>|\Z)", re.DOTALL | re.IGNORECASE)
#: the same served with its special tokens stripped (no harmony parser, ``skip_special_tokens``): the output opens
#: with the channel's name, and each later message with ``assistant`` and its channel's name
_STRIPPED_START = re.compile(r"\A\s*(?:assistant\s*)?(?:analysis|commentary)", re.IGNORECASE)
_STRIPPED_NEXT = re.compile(r"assistant\s*(analysis|commentary|final)", re.IGNORECASE)
#: a tag written as text rather than used: inside a code span (`...`), a fenced block or an HTML code element, or
#: between quotes
_CODE = re.compile(r"```.*?```|(`+)[^`\n]+?\1|<code>.*?</code>|<pre>.*?</pre>", re.DOTALL | re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "„": "“", "\\": ""}


@dataclass(frozen=True)
class Thought:
    """A model's output split: the ``answer`` (what a ranking is read from), the ``thought`` (never read), whether
    the thought was ``cut`` (it never ended: no answer came), and whether the token limit ended the answer itself
    (``truncated``: what it holds is read, but never called a whole answer)."""

    answer: str
    thought: str = ""
    cut: bool = False
    truncated: bool = False


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _CODE.finditer(text)] if "`" in text or "<code>" in text.lower() or "<pre>" in text.lower() else []


def _used(pattern: re.Pattern, text: str) -> list[re.Match]:
    """The tags ``pattern`` finds that are used as tags: not quoted (a code span, a fenced block, quotes around
    it, a backslash before it), which is how a thought or an answer writes a tag it talks about."""
    spans = None
    found = []
    for m in pattern.finditer(text):
        before = text[m.start() - 1] if m.start() else ""
        if before in _QUOTES and (_QUOTES[before] == "" or text[m.end():m.end() + 1] == _QUOTES[before]):
            continue
        if spans is None:
            spans = _quoted_spans(text)
        if any(a <= m.start() and m.end() <= b for a, b in spans):
            continue
        found.append(m)
    return found


def opens_thought(prompt_text: str) -> bool:
    """Whether a rendered prompt ends inside an opened thought (an R1 distill's template opens ``<think>`` itself):
    the generated text then starts in the thought."""
    tail = prompt_text.rstrip()[-32:]
    found = _used(_OPEN, tail)
    return bool(found) and found[-1].end() == len(tail)


def _unwrap(answer: str) -> str:
    """The answer inside its last wrapper (``<answer>...</answer>``; an unclosed one runs to the end)."""
    for opening, closing in _WRAP_OPEN:
        found = _used(opening, answer)
        if found:
            inside = answer[found[-1].end():]
            end = _used(closing, inside)
            return inside if not end else inside[: end[0].start()]
    return answer


def _unwrap_if_wrapped(text: str) -> str:
    """A plain answer as it was written (byte for byte, as the published parser reads it), unless it is wrapped."""
    unwrapped = _unwrap(text)
    return text if unwrapped is text else unwrapped.strip()


def _channels(messages: list[tuple[str, str]], kept: str, truncated: bool) -> Thought:
    """Harmony's messages (channel, text): the answer is the last ``final`` message, the rest thought; no final
    message: the thought never ended."""
    thought = "\n".join(t for t in (kept, *(text.strip() for name, text in messages if name != "final")) if t)
    finals = [text for name, text in messages if name == "final"]
    if not finals:
        return Thought("", thought, cut=True)
    return Thought(_unwrap(finals[-1]).strip(), thought, truncated=truncated)


def _harmony(text: str, kept: str, truncated: bool) -> Thought | None:
    """gpt-oss's channels, with their special tokens or stripped of them; None: not that format."""
    if "<|channel|>" in text.lower():
        return _channels([(m.group(1).lower(), m.group(2)) for m in _CHANNEL.finditer(text)], kept, truncated)
    start = _STRIPPED_START.match(text)
    if start is None:
        return None
    marks = list(_STRIPPED_NEXT.finditer(text, start.end()))
    if not marks and not truncated:  # an answer that merely begins with the word
        return None
    messages = [("analysis", text[start.end(): marks[0].start() if marks else len(text)])]
    for m, following in zip(marks, [*marks[1:], None]):
        messages.append((m.group(1).lower(), text[m.end(): following.start() if following else len(text)]))
    return _channels(messages, kept, truncated)


def read_thought(text: str | None, reasoning: str | None = None, opened: bool = False, *, truncated: bool = False,
                 asked: bool = False, counted: bool = False) -> Thought:
    """Split a model's output into its thought and its answer (see the module doc), by the structure of the reply:
    the tag that ends the thought is the last one used as a tag (a tag quoted in a code span or between quotes is
    text); a thought with no end never yields an answer.

    ``reasoning``: a thought the server kept apart (``reasoning_content``); ``opened``: the prompt ended inside a
    thought (:func:`opens_thought`), so the output starts in it; ``truncated``: the token limit ended the
    generation; ``asked``: the call was asked to think; ``counted``: the server counted hidden reasoning tokens.
    A generation the limit ended is read as a thought that never ended when nothing in it ended a thought and the
    call thought (asked to, or a thought kept apart with no answer after it); else its answer is ``truncated``."""
    text = text or ""
    kept = (reasoning or "").strip()
    harmony = _harmony(text, kept, truncated)
    if harmony is not None:
        return harmony
    closes = _used(_CLOSE, text)
    if closes:
        last = closes[-1]
        thought, answer = text[: last.start()], text[last.end():]
        reopened = _used(_OPEN, answer)
        if reopened:  # a new thought after the answer began, never ended: what came before it is the answer
            answer = answer[: reopened[0].start()]
        thought = _OPEN.sub("", thought).strip()
        thought = "\n".join(t for t in (kept, thought) if t)
        answer = _unwrap(answer).strip()
        if truncated and not answer and not reopened:
            return Thought("", thought, cut=True)  # the thought ended as the limit came: no answer
        return Thought(answer, thought, truncated=truncated and not reopened)
    opening = _used(_OPEN, text)
    if opening or opened:  # a thought began and never ended: no answer came
        thought = text if not opening else text[opening[0].end():]
        return Thought("", "\n".join(t for t in (kept, thought.strip()) if t), cut=True)
    if truncated and ((kept or counted) and not text.strip() or asked and not (kept or counted)):
        # the limit came inside a thought no tag marks (a template opened it, or the server keeps it apart)
        return Thought("", "\n".join(t for t in (kept, text.strip()) if t), cut=True)
    if kept or counted:
        return Thought(_unwrap(text).strip() if kept else _unwrap_if_wrapped(text), kept, truncated=truncated)
    return Thought(_unwrap_if_wrapped(text), truncated=truncated)


# -- gated thinking -------------------------------------------------------------------------------------------


def gate_of(options: object) -> ThinkingGate | None:
    """The gate a backend's options ask for (``--thinking gated``), or None; a token budget counts each thought at
    the most it may take: the simulated reranker's cost, else the thought's budget (``--thinking-budget``)."""
    if getattr(options, "thinking", None) is not Thinking.gated:
        return None
    settings = ThinkingOptions.of(options)
    cost = thought_cost(options)
    _check_some_thought(settings, cost)
    return ThinkingGate(settings.gate_threshold, settings.think_share, settings.think_tokens, cost)


def thought_cost(options: object) -> int:
    """The most tokens one window's thought costs, the one place it is said: the simulated reranker's assumed cost
    (``--sim-think-tokens``) capped by the thought's budget (``--thinking-budget``), else that budget (a local
    model's default where none is given). The gate counts each thinking window at it, and the simulated reranker
    bills each thought at it."""
    settings = ThinkingOptions.of(options)
    cost = getattr(options, "sim_think_tokens", None)
    if cost is not None:
        return min(int(cost), settings.thinking_budget or int(cost))
    return int(settings.local_budget())


def _check_some_thought(settings: ThinkingOptions, cost: int) -> None:
    """A per-query budget that no window's thought fits thinks nothing: refused (it was silent), naming the remedy."""
    if settings.think_share is not None and settings.think_share == 0:
        raise OptionError("{think_share} 0 lets no window think: give a share above 0, or {thinking} off",
                          think_share="--think-share", thinking="--thinking")
    if settings.think_tokens is not None and settings.think_tokens < cost:
        raise OptionError(f"{{think_tokens}} {settings.think_tokens} is below one thought (each thinking window is "
                          f"counted at the most its thought may take, {cost} tokens: {{thinking_budget}}"
                          f"{', or the simulated cost' if settings.thinking_budget is None else ''}), so no window "
                          f"would think: give at least {cost}, or a smaller {{thinking_budget}}",
                          think_tokens="--think-tokens", thinking_budget="--thinking-budget")


@dataclass(frozen=True)
class LocalThought:
    """A local model's thought (``hf:``, ``vllm:``): the token ids the answer follows (the thought, and the forced end
    when it had to be ended), its text as the reader sees it, the tokens the model spent thinking, its seconds."""

    ids: list
    text: str
    tokens: int
    seconds: float


def ended_thought(tokenizer, tokens: list, seconds: float) -> LocalThought:
    """Budget forcing, the one rule both local backends apply: a thought generated until the model wrote
    ``</think>`` (a stop string) or for its whole budget. One the model ended is kept as written; one it did not is
    ended here, ``\n</think>\n\n`` written for it, so that an answer always follows. ``tokens``: the thought's ids,
    without what the batch added after the row stopped."""
    text = tokenizer.decode(tokens, skip_special_tokens=True)
    if CLOSE_TAG in text:  # the model ended its thought: the answer follows its own tag
        return LocalThought(list(tokens), text, len(tokens), seconds)
    close = tokenizer.encode(FORCED_CLOSE, add_special_tokens=False)
    return LocalThought(list(tokens) + list(close), text + FORCED_CLOSE, len(tokens), seconds)


__all__ = ["ANSWER_TAGS", "PER_BACKEND", "CLOSE_TAG", "DEFAULT_LOCAL_BUDGET", "FORCED_CLOSE", "GATED_OFF_EFFORT",
           "LocalThought", "OPEN_TAG", "ReasoningEffort", "THOUGHT_TAGS", "Thinking", "ThinkingOptions", "Thought",
           "ended_thought", "gate_of", "opens_thought", "read_thought", "check_thinking", "Effort"]
