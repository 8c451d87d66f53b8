"""The one reader that keeps a model's thought apart from its answer, and a local model's thought ended at its budget.

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

**Budget forcing** (:func:`ended_thought`): a local model's thought that reached its budget is ended for it.

The options that ask for thinking, and the gate, are :mod:`.thinking`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: What a local model is given to open a thought, and written to close one when its budget is spent.
OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
FORCED_CLOSE = "\n" + CLOSE_TAG + "\n\n"


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


__all__ = ["ANSWER_TAGS", "CLOSE_TAG", "FORCED_CLOSE", "LocalThought", "OPEN_TAG", "THOUGHT_TAGS", "Thought",
           "ended_thought", "opens_thought", "read_thought"]
