"""The messages of one window: the published prompt, or a template file in RankLLM's YAML format read as it is;
and what a run adds to either (a task instruction, few-shot examples, a system message).

**Template files** (``--prompt FILE.yaml``). RankLLM 0.26's listwise templates load as they are:

* ``method: singleturn_listwise``: ``system_message``, ``prefix``, ``body`` (once per passage), ``suffix``; the user
  turn is prefix + bodies + suffix;
* ``method: multiturn_listwise`` (RankGPT): ``system_message``, ``prefix_user`` / ``prefix_assistant`` (a first
  exchange), ``body_user`` / ``body_assistant`` (an exchange per passage; without ``body_assistant`` the bodies join
  one user turn with the suffix), ``suffix_user``;
* placeholders ``{num}`` and ``{query}`` (prefix, suffix), ``{rank}``, ``{candidate}`` and ``{score}`` (body: the
  identifier, the passage, its first-stage score with 3 decimals), ``{psg_ids}`` (a single-turn suffix:
  ``[PASSAGE1, ..., PASSAGEn]``); ``system_message`` is used as written (RankLLM formats no placeholder there);
* ``output_extraction_regex`` finds the identifiers in the answer (after the thought is set aside); identifiers are
  letters when it captures letters (``rank_zephyr_alpha``: ``[A]``, ``[B]``, ...), else numbers;
  ``output_validation_regex`` is the form the answer was asked for: an answer that does not match it is never
  ``ok``. Both are written as RankLLM's files write them (``r"..."``, kept by YAML as text) or as plain patterns.

A passage is shown as in the published prompt (``Title: ... Content: ...``, stripped, ftfy-fixed, cut to the word
cap, ``[digits]`` written ``(digits)``), the query with ``[digits]`` written ``(digits)``: RankLLM's own rules, so
the messages are byte-identical to RankLLM's rendering of the same file (``benchmarks/templates_peer.py``).

**acurank's additions**, for the published prompt and a file alike: ``--instruction TEXT`` fills an
``{instruction}`` placeholder where the template has one (in its prefix, suffix or system message; a template may
give a default in an ``instruction:`` field), and otherwise opens the (first) user turn, followed by a blank line;
``--system-message TEXT`` replaces the template's system message (or adds one); ``--few-shot FILE``
``--few-shot-count N``: the first N examples of RankLLM's few-shot file (a JSON list, or JSON lines, of
``{"conversations": [{"role": ..., "value": ...}, ...]}``) as earlier turns after the system message, where RankLLM
puts them. Every error names the file and the field or line, before any model loads.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any

from ...errors import InputError, OptionError
from ...records import ParseStatus
from .answers import LETTERS, identifiers
from .parsing import ParsedRanking, ascii_digits, parse_ranking, ranking_of
from .prompts import PROMPT_FORMATS, answer_text, messages_for, neutralize_markers

#: the file suffixes that make ``--prompt`` a template file rather than a format's name
TEMPLATE_SUFFIXES = (".yaml", ".yml")

#: per listwise method: section -> the placeholders it may hold (None: not formatted); required sections
SECTIONS: dict[str, dict[str, frozenset[str] | None]] = {
    "singleturn_listwise": {
        "method": None, "system_message": None, "instruction": None,
        "prefix": frozenset({"query", "num", "instruction"}),
        "body": frozenset({"rank", "candidate", "score"}),
        "suffix": frozenset({"query", "num", "psg_ids", "instruction"}),
        "output_validation_regex": None, "output_extraction_regex": None,
    },
    "multiturn_listwise": {
        "method": None, "system_message": None, "instruction": None,
        "prefix_user": frozenset({"query", "num", "instruction"}),
        "prefix_assistant": frozenset({"query", "num"}),
        "body_user": frozenset({"rank", "candidate"}),
        "body_assistant": frozenset({"rank"}),
        "suffix_user": frozenset({"query", "num", "instruction"}),
        "output_validation_regex": None, "output_extraction_regex": None,
    },
}
REQUIRED = {"singleturn_listwise": ("body", "output_validation_regex", "output_extraction_regex"),
            "multiturn_listwise": ("body_user", "output_validation_regex", "output_extraction_regex")}
#: the placeholders a body must hold
BODY_NEEDS = frozenset({"rank", "candidate"})
#: RankLLM's other methods: a template of these is refused by name (acurank reranks listwise)
OTHER_METHODS = ("pointwise", "pairwise", "rankfid")

_RAW = re.compile(r"""\Ar(["'])(.*)\1\Z""", re.DOTALL)
_INSTRUCTION = "{instruction}"


def _fail(path: str, what: str, line: int | None = None) -> InputError:
    return InputError(what, path, line)


def _placeholders(path: str, name: str, text: str) -> set[str]:
    try:
        found = [(f, spec, conv) for _, f, spec, conv in Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise _fail(path, f"{name}: {exc} (a literal brace is written {{{{ or }}}})") from None
    for f, _, _ in found:
        if not f.isidentifier():
            raise _fail(path, f"{name}: placeholder {{{f}}} is not one acurank can fill")
    return {f for f, _, _ in found}


def _regex(path: str, name: str, value: Any) -> re.Pattern:
    """A regex as RankLLM's files write it: ``r"..."`` (a Python raw string that YAML keeps as text) or plain."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, f"{name}: must be a regular expression (a string)")
    text = value.strip()
    raw = _RAW.match(text)
    pattern = raw.group(2) if raw else text
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise _fail(path, f"{name}: {pattern!r} does not compile ({exc})") from None


def _captures(extraction: re.Pattern, text: str) -> set[str]:
    """Every identifier the extraction regex captures in ``text`` (its first group, else the whole match)."""
    return {((m.group(1) if m.groups() else m.group(0)) or "").strip() for m in extraction.finditer(text)}


def _shown(body: str, ident: str) -> str:
    """The template's own body for one passage numbered ``ident`` (other placeholders left empty; a body whose other
    placeholders take no text, e.g. ``{score:.2f}``, shows nothing)."""
    try:
        return body.format(rank=ident, candidate="", score="", query="", num="", instruction="")
    except (ValueError, KeyError, IndexError):
        return ""


def _body(sections: dict[str, str]) -> str:
    """A template's body: the one passage's text (``body``, or ``body_user`` of a multi-turn template)."""
    return str(sections.get("body", sections.get("body_user", "")))


def _id_shape(body: str) -> tuple[str, str]:
    """The marks around a passage's identifier in the body (``<{rank}>``: ``<`` and ``>``; ``[{rank}]``: the
    brackets): the punctuation touching it, at most three characters each side."""
    shown = _shown(body, "\x00")
    at = shown.find("\x00")
    if at < 0:
        return "[", "]"
    before = re.search(r"[^\w\s]{0,3}\Z", shown[:at]).group(0)
    after = re.match(r"[^\w\s]{0,3}", shown[at + 1:]).group(0)
    return before, after


def _letters(path: str, extraction: re.Pattern, body: str) -> bool:
    """Whether the identifiers are letters, decided by the template itself: its own body shown for the second
    passage as ``2`` and as ``B``, and the answer's ``PASSAGE2``/``PASSAGEB`` (its ``{psg_ids}``), are read by its
    extraction regex; letters when only ``B`` is captured, numbers when only ``2`` is. Where that decides nothing
    (a regex that takes both, or neither, e.g. one written for another form of answer), the usual shapes ``[B]``,
    ``B``, ``(B)`` are tried, letters first, and a regex that takes both from the body numbers them."""
    takes_b = "B" in _captures(extraction, _shown(body, "B")) | _captures(extraction, "PASSAGEB")
    takes_2 = "2" in _captures(extraction, _shown(body, "2")) | _captures(extraction, "PASSAGE2")
    if takes_b != takes_2:
        return takes_b
    if any("B" in _captures(extraction, p) for p in ("[B]", "B", "PASSAGEB", "(B)")):
        return True
    if takes_2 or any("2" in _captures(extraction, p) for p in ("[2]", "2", "PASSAGE2", "(2)")):
        return False  # a regex that takes both from the body: numbers, as RankLLM numbers passages by default
    raise _fail(path, f"output_extraction_regex: {extraction.pattern!r} finds no identifier in the body's own "
                      f"{_shown(body, '2').strip()!r} or {_shown(body, 'B').strip()!r}, nor in [2] or [B]")


@dataclass(frozen=True)
class Additions:
    """What a run adds to any prompt: the task instruction, a system message that replaces the template's, and
    few-shot turns (placed after the system message)."""

    instruction: str | None = None
    system_message: str | None = None
    few_shot: tuple[dict[str, str], ...] = ()
    #: the few-shot file's name and the count taken (said in the notes and the identity)
    few_shot_source: str = ""

    def identity(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.instruction is not None:
            out["instruction"] = self.instruction
        if self.system_message is not None:
            out["system_message"] = self.system_message
        if self.few_shot:
            blob = json.dumps(self.few_shot, ensure_ascii=False, sort_keys=True).encode("utf-8")
            out["few_shot"] = {"turns": len(self.few_shot), "sha256": hashlib.sha256(blob).hexdigest()}
        return out


@dataclass(frozen=True)
class PromptTemplate:
    """How one window's messages are made: the published prompt (``sections`` None) or a template file's sections,
    with the run's :class:`Additions`."""

    name: str = "published"
    sections: dict[str, str] | None = None
    digest: str = ""
    letters_ids: bool = False
    extraction: re.Pattern | None = None
    validation: re.Pattern | None = None
    additions: Additions = field(default_factory=Additions)

    @property
    def is_file(self) -> bool:
        return self.sections is not None

    @property
    def method(self) -> str:
        return (self.sections or {}).get("method", "singleturn_listwise")

    def uses(self, placeholder: str) -> bool:
        return any(f"{{{placeholder}}}" in str(v) for v in (self.sections or {}).values())

    @property
    def uses_scores(self) -> bool:
        return self.uses("score")

    @property
    def asks_thought(self) -> bool:
        """Whether the template asks the model to think first: a ``<think>`` tag it describes (ReasonRank's), the
        ``/think`` switch (Nemotron's), or a file RankLLM names for thinking (``qwen_thinking_template.yaml``: Qwen3
        thinks by default, and the file says so only in its name)."""
        text = " ".join(str(v) for v in (self.sections or {}).values())
        named = re.search(r"(?<!non)(?<!non_)(?<!no_)thinking", self.name.lower()) is not None
        return "<think>" in text or bool(re.search(r"(?<![\w_])/think\b", text)) or named

    def with_instruction(self, instruction: str) -> "PromptTemplate":
        """The template with a query's own instruction in place of the run's."""
        a = self.additions
        return self.with_additions(Additions(instruction, a.system_message, a.few_shot, a.few_shot_source))

    def with_additions(self, additions: Additions) -> "PromptTemplate":
        return dataclasses.replace(self, additions=additions)

    def identity(self) -> dict[str, Any]:
        """What the cache identity and the run's fingerprint hold of the prompt (empty for the published prompt with
        nothing added: identities made before templates existed are unchanged)."""
        out: dict[str, Any] = {}
        if self.is_file:
            out["template"] = {"name": self.name, "sha256": self.digest}
        out.update(self.additions.identity())
        return out

    def notes(self, thinking: Any = None) -> list[str]:
        """The start-up notes: the template, what was added, and what a thinking template will do."""
        out = []
        if self.is_file:
            ids = "letters" if self.letters_ids else "numbers"
            out.append(f"template {self.name} (sha256 {self.digest[:12]}): {self.method}, identifiers as {ids}, the "
                       f"answer read through its output_extraction_regex {self.extraction.pattern!r}")
        add = self.additions
        if add.instruction is not None:
            where = "at its {instruction} placeholder" if self.uses("instruction") else "opening the user turn"
            out.append(f"instruction: {_echoed(add.instruction)}, {where}")
        if add.system_message is not None:
            out.append("system message: replaced by --system-message")
        if add.few_shot:
            out.append(f"few-shot: {add.few_shot_source} after the system message")
        value = getattr(thinking, "value", thinking)
        if self.asks_thought and value == "off":
            out.append(f"template {self.name} asks for a thought; --thinking off: the model is told not to think "
                       "(enable_thinking false; a thought the template opens is closed for it), and its answer is "
                       "read after any thought it still writes")
        elif self.asks_thought and value is None:
            out.append(f"template {self.name} asks for a thought: give --thinking on or gated (and "
                       "--thinking-budget) so that the thought has room; without it the answer's token limit holds "
                       "no thought, and a thought the limit cuts keeps the window's order")
        return out

    # -- the messages ------------------------------------------------------------------------------------------

    def messages(self, query: str, contents: Sequence[str], scores: Sequence[float | None] = (),
                 letters: bool = False) -> tuple[dict[str, str], ...]:
        """The messages of one window: ``contents`` are the passages as the prompt shows them (cut, fixed);
        ``scores`` their first-stage scores (``{score}``); ``letters``: ``--answer logits``'s letter identifiers (the
        published prompt only)."""
        add = self.additions
        if self.sections is None:  # the published prompt's messages (prompts.messages_for), and what is added
            published_system, user = messages_for(query, contents, letters)
            system, turns, placed = published_system["content"], [user], False
        else:
            system, turns, placed = self._file_messages(query, contents, scores)
        if add.system_message is not None:
            system = add.system_message
        if add.instruction is not None and not placed:  # no placeholder: it opens the first user turn
            first = next(i for i, t in enumerate(turns) if t["role"] == "user")
            turns[first] = {"role": "user", "content": f"{add.instruction}\n\n{turns[first]['content']}"}
        head = [{"role": "system", "content": system}] if system else []
        return tuple(head + list(add.few_shot) + turns)

    def _instruction(self) -> tuple[str, bool]:
        sections = self.sections or {}
        given = self.additions.instruction
        text = given if given is not None else str(sections.get("instruction", "") or "")
        return text, (given is not None and self.uses("instruction"))

    def _file_messages(self, query: str, contents: Sequence[str], scores: Sequence[float | None]
                       ) -> tuple[str, list[dict[str, str]], bool]:
        s = self.sections or {}
        instruction, placed = self._instruction()
        num = len(contents)
        values: dict[str, Any] = {"num": num, "query": neutralize_markers(query), "instruction": instruction}
        ids = identifiers(num, self.letters_ids)
        system = str(s.get("system_message", "") or "")
        if self.additions.instruction is not None or "instruction" in s:  # else kept as written, as RankLLM keeps it
            system = system.replace(_INSTRUCTION, instruction)

        def fmt(section: str, **more: Any) -> str:
            text = s.get(section)
            return str(text).format(**values, **more) if text else ""

        if self.method == "singleturn_listwise":
            suffix_values = {"psg_ids": "[" + ", ".join(f"PASSAGE{j + 1}" for j in range(num)) + "]"}
            body = "".join(fmt("body", rank=ids[j], candidate=c, score=_score(scores, j))
                           for j, c in enumerate(contents))
            return system, [{"role": "user", "content": fmt("prefix") + body + fmt("suffix", **suffix_values)}], placed
        turns: list[dict[str, str]] = []
        prefix = fmt("prefix_user")
        if prefix:
            turns += [{"role": "user", "content": prefix}, {"role": "assistant", "content": fmt("prefix_assistant")}]
        suffix = fmt("suffix_user")
        if "body_assistant" in s:
            for j, c in enumerate(contents):
                turns += [{"role": "user", "content": fmt("body_user", rank=ids[j], candidate=c)},
                          {"role": "assistant", "content": fmt("body_assistant", rank=ids[j])}]
            if suffix:
                turns.append({"role": "user", "content": suffix})
        else:
            body = "".join(fmt("body_user", rank=ids[j], candidate=c) for j, c in enumerate(contents))
            turns.append({"role": "user", "content": body + suffix})
        return system, turns, placed

    # -- the answer --------------------------------------------------------------------------------------------

    def answer_sample(self, num: int) -> str:
        """A well-formed answer for a window of ``num`` (what sizes its answer budget): the presented order in the
        form the template asks for."""
        if self.sections is None:
            return answer_text(num)
        ids = identifiers(num, self.letters_ids)
        forms = [" > ".join(f"[{i}]" for i in ids), "[" + ", ".join(f"PASSAGE{i}" for i in ids) + "]",
                 "[rankstart] " + " > ".join(f"[{i}]" for i in ids) + " [rankend]", " > ".join(ids)]
        opening, closing = _id_shape(_body(self.sections))  # the body's own marks (``<{rank}>``: <2> > <1>)
        forms.append(" > ".join(f"{opening}{i}{closing}" for i in ids))
        validation = self.validation
        return next((f for f in forms if validation is None or validation.fullmatch(f)), forms[0])

    def parse(self, answer: str, n: int) -> ParsedRanking:
        """The window's order from an answer: the published parser for the published prompt; a template's
        identifiers found by its extraction regex, repaired as published, ``ok`` only in the form it asked for."""
        if self.sections is None or self.extraction is None:
            return parse_ranking(answer, n)
        found = []
        for m in self.extraction.finditer(ascii_digits(answer)):
            token = (m.group(1) if m.groups() else m.group(0)) or ""
            token = token.strip()
            if self.letters_ids and len(token) == 1 and token.upper() in LETTERS:
                found.append(LETTERS.index(token.upper()) + 1)
            elif token.isdigit():
                found.append(int(token))
        well_formed = self.validation is None or bool(self.validation.fullmatch(answer.strip()))
        parsed = ranking_of(found, n, well_formed)
        if not found and parsed.status is not ParseStatus.ok:
            return ParsedRanking(parsed.order, ParseStatus.unparseable, 0, parsed.dropped)
        return parsed


def _score(scores: Sequence[float | None], j: int) -> str:
    value = scores[j] if j < len(scores) else None
    return "" if value is None else f"{value:.3f}"


PUBLISHED = PromptTemplate()


def is_template_file(value: str | None) -> bool:
    """Whether a ``--prompt`` value names a template file rather than a format: a format's name never does; a
    ``.yaml``/``.yml`` name or anything that exists does (a file, a pipe, ``<(...)``)."""
    if not value or str(value).lower() in PROMPT_FORMATS:
        return False
    return str(value).lower().endswith(TEMPLATE_SUFFIXES) or Path(str(value)).exists()


def template_file(value: str | None) -> str | None:
    """The template file a ``--prompt`` value names (None: a format's name); a folder is refused here, before any
    output is checked against it (a folder was taken for an input the output must stay out of)."""
    if not is_template_file(value):
        return None
    if Path(str(value)).is_dir():
        raise OptionError(f"{{prompt_format}} is a folder, not a prompt template file: give a template file "
                          f"(RankLLM's YAML) or a format ({', '.join(sorted(PROMPT_FORMATS))})",
                          prompt_format=("--prompt", str(value)))
    return str(value)


def load_template(path: str | Path) -> PromptTemplate:
    """A listwise template file (RankLLM's YAML format), checked whole: an unknown or missing method or section, a
    placeholder acurank cannot fill, a regex that does not compile are one error naming the file and the field."""
    import yaml

    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise _fail(name, f"cannot read the prompt template: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _fail(name, f"not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise _fail(name, f"not YAML: {getattr(exc, 'problem', None) or exc}",
                    None if mark is None else mark.line + 1) from None
    if not isinstance(data, dict):
        raise _fail(name, "a prompt template is a YAML mapping of sections (method, body, ...)")
    method = data.get("method")
    if method in OTHER_METHODS:
        raise _fail(name, f"method: {method!r} is not listwise; acurank reranks listwise windows "
                          f"({', '.join(SECTIONS)})")
    if method not in SECTIONS:
        raise _fail(name, f"method: {method!r} is not one of {', '.join(SECTIONS)}")
    allowed = SECTIONS[method]
    for key in REQUIRED[method]:
        if key not in data:
            raise _fail(name, f"{key}: missing (a {method} template needs {', '.join(REQUIRED[method])})")
    sections: dict[str, str] = {}
    for key, value in data.items():
        if key not in allowed:
            raise _fail(name, f"{key}: not a section of a {method} template (sections: {', '.join(allowed)})")
        if not isinstance(value, str):
            raise _fail(name, f"{key}: must be text")
        fillable = allowed[key]
        if fillable is not None:
            used = _placeholders(name, key, value)
            unknown = used - fillable
            if unknown:
                raise _fail(name, f"{key}: placeholder {{{sorted(unknown)[0]}}} is not one acurank can fill here "
                                  f"({', '.join('{' + p + '}' for p in sorted(fillable))})")
            if key in ("body", "body_user") and not BODY_NEEDS <= used:
                raise _fail(name, f"{key}: must hold {{rank}} and {{candidate}}")
        sections[key] = value
    if method == "multiturn_listwise":
        if "prefix_assistant" not in data and "body_assistant" not in data:
            raise _fail(name, "prefix_assistant: a multiturn_listwise template needs it or body_assistant")
        if "prefix_assistant" in data and "prefix_user" not in data:
            raise _fail(name, "prefix_user: missing (prefix_assistant answers it)")
    user_parts = [k for k in ("prefix", "suffix", "prefix_user", "suffix_user") if k in sections]
    if user_parts and not any("{query}" in sections[k] for k in user_parts):
        raise _fail(name, f"{user_parts[0]}: the query ({{query}}) is in none of {', '.join(user_parts)}")
    extraction = _regex(name, "output_extraction_regex", sections["output_extraction_regex"])
    validation = _regex(name, "output_validation_regex", sections["output_validation_regex"])
    return PromptTemplate(_shown_name(path), sections, hashlib.sha256(raw).hexdigest(),
                          letters_ids=_letters(name, extraction, _body(sections)), extraction=extraction, validation=validation)


#: a setting echoed at start is shortened past this many characters (a 10 KB instruction filled the terminal)
ECHO_LIMIT = 120


def _echoed(text: str) -> str:
    """A setting as the start-up notes echo it: quoted whole, or its first :data:`ECHO_LIMIT` characters and its
    length."""
    if len(text) <= ECHO_LIMIT:
        return repr(text)
    return f"{text[:ECHO_LIMIT]!r}... ({len(text):,} characters)"


def _shown_name(path: str | Path) -> str:
    """How a template is named in the notes and the identity: its file's name, or the path as given for a pipe or
    ``<(...)`` (whose file name is a bare descriptor number: "template 63" said nothing)."""
    from ...io.sources import streamed

    return f"{path} (a pipe)" if streamed(path) else Path(path).name


def load_few_shot(path: str | Path, count: int | None = None) -> tuple[dict[str, str], ...]:
    """The first ``count`` examples (None: all) of a few-shot file as turns: RankLLM's format, a JSON list of
    ``{"conversations": [{"role": ..., "value": ...}]}`` (or one such example a line), each turn checked."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(name, f"cannot read the few-shot file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise _fail(name, f"not UTF-8 text (byte {exc.start})") from None
    try:
        whole = json.loads(text)
        examples = [(None, e) for e in (whole if isinstance(whole, list) else [whole])]
    except json.JSONDecodeError:
        examples = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                examples.append((i, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise _fail(name, f"not JSON (a list of examples, or one example a line): {exc.msg}", i) from None
    if not examples:
        raise _fail(name, "holds no example (a JSON list of examples, or one example a line)")
    count = len(examples) if count is None else count
    if len(examples) < count:
        raise _fail(name, f"holds {len(examples)} example{'s' if len(examples) != 1 else ''}, fewer than the "
                          f"{count} asked for (--few-shot-count)")
    turns: list[dict[str, str]] = []
    for k, (line, example) in enumerate(examples[:count]):
        where = f"example {k + 1}"
        conv = example.get("conversations") if isinstance(example, dict) else None
        if not isinstance(conv, list) or not conv:
            raise _fail(name, f"{where}: needs \"conversations\", a list of {{\"role\", \"value\"}} turns", line)
        for t, turn in enumerate(conv):
            if not (isinstance(turn, dict) and turn.get("role") in ("system", "user", "assistant")
                    and isinstance(turn.get("value"), str)):
                raise _fail(name, f"{where}, turn {t + 1}: needs a role (system, user or assistant) and a text "
                                  "value", line)
            turns.append({"role": turn["role"], "content": turn["value"]})
    return tuple(turns)


def resolve(prompt: str | None, instruction: str | None = None, system_message: str | None = None,
            few_shot: str | None = None, few_shot_count: int | None = None) -> tuple[str | None, PromptTemplate]:
    """``--prompt`` and the additions: (the format's name, or None for a template file, which the tokenizer's chat
    template renders; the template). A few-shot count with no file is refused; a file with no count gives all its
    examples."""
    from ...errors import OptionError

    if few_shot_count is not None and not few_shot:
        raise OptionError("{few_shot_count} takes its examples from {few_shot}", few_shot_count="--few-shot-count",
                          few_shot="--few-shot")
    turns: tuple[dict[str, str], ...] = ()
    if few_shot:
        turns = load_few_shot(few_shot, few_shot_count)
    additions = Additions(instruction, system_message, turns,
                          f"{Path(few_shot).name}[:{len(turns)} turns]" if few_shot else "")
    if is_template_file(prompt):
        return None, load_template(str(prompt)).with_additions(additions)
    return prompt, PUBLISHED.with_additions(additions)


def template_of(options: Any, backend: str) -> tuple[str | None, PromptTemplate]:
    """A backend's prompt settings, read and checked before any model loads: (the format's name, or None for a
    template file; the template: a file's, or the published prompt's, with the run's additions). A template's answer
    is read through its regexes: ``--answer logits`` and ``constrained`` (which write the published answer) are
    refused with one."""
    from ...errors import OptionError

    fmt, template = resolve(getattr(options, "prompt_format", None), getattr(options, "instruction", None),
                            getattr(options, "system_message", None), getattr(options, "few_shot", None),
                            getattr(options, "few_shot_count", None))
    answer = getattr(getattr(options, "answer", None), "value", getattr(options, "answer", "text"))
    if template.is_file and answer not in (None, "text"):
        raise OptionError(f"{backend}: a template's answer is read through its output_extraction_regex; "
                          "{answer} writes the published answer: use --answer text", answer=("--answer", answer))
    return fmt, template


__all__ = ["Additions", "PUBLISHED", "template_of", "PromptTemplate", "is_template_file", "template_file", "load_few_shot", "load_template",
           "resolve"]
