"""How a listwise LLM answers (``--answer``), shared by the hf:, vllm: and openai: backends.

* ``text`` (the published way): the model writes ``[i] > [j] > ...`` freely, parsed by the published rule.
* ``constrained``: decoding can only write a valid permutation in that format. :class:`PermutationGrammar`
  is the answer language (``[a] > [b] > ... > [z]``, every identifier 1..n exactly once, then the end) as a
  state machine over characters; :class:`TokenGrammar` lifts it to a tokenizer's tokens (each token's text
  as it reads after another token), so a decoder can ask, at every step, which tokens keep the answer a
  prefix of a valid one, and whether it is complete (then only the end token may follow).
* ``logits`` (FIRST, Reddy et al., EMNLP 2024): the passages carry letters ``[A]``, ``[B]``, ...
  (:data:`LETTERS`: single tokens for every common tokenizer), the model is asked to answer with the letters
  only, so the first thing it writes is an identifier; one forward pass, and the window is ordered by the
  first token's logit for each identifier (:func:`rank_by_scores`). A letter may be one of several tokens
  (``B``, ``ĠB``, ``▁B``: with or without a leading space): its score is the log-sum-exp of their logits
  (:func:`letter_variants`), the log-probability of writing that letter first, however spaced.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import OptionError
from ...records import ParseStatus


class AnswerMode(str, enum.Enum):
    """``--answer``: how the model answers (see the module doc)."""

    text = "text"
    constrained = "constrained"
    logits = "logits"


#: The identifiers of ``--answer logits``: a window of up to 26 passages.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def identifiers(num: int, letters: bool) -> list[str]:
    """The identifiers of a window's ``num`` passages, in presented order: letters (``A``, ``B``, ...) or numbers
    (``1``, ``2``, ...): the one place that decides, for the published prompt and every template."""
    return [LETTERS[j] for j in range(num)] if letters else [str(j + 1) for j in range(num)]


# -- logits ---------------------------------------------------------------------------------------


def rank_by_scores(scores: Sequence[float | None]) -> tuple[tuple[int, ...], ParseStatus]:
    """A window's order from per-position scores: highest first, ties by presented position; positions
    without a score (None: not among what an endpoint returned) follow in presented order and make the
    outcome ``incomplete``."""
    scored = [i for i, s in enumerate(scores) if s is not None]
    order = sorted(scored, key=lambda i: (-scores[i], i)) + [i for i, s in enumerate(scores) if s is None]
    return tuple(order), (ParseStatus.ok if len(scored) == len(scores) else ParseStatus.incomplete)


def logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def letter_variants(tokenizer: Any, n: int) -> list[list[int]]:
    """For each of the first ``n`` letters, the ids of the vocabulary's single tokens that write it: the
    letter alone and with a leading space (``ĠA`` byte-level BPE, ``▁A`` SentencePiece, `` A``); at least
    one each, or ValueError naming the letter."""
    vocab = tokenizer.get_vocab()
    out = []
    for letter in LETTERS[:n]:
        ids = sorted({vocab[t] for t in (letter, "Ġ" + letter, "▁" + letter, " " + letter) if t in vocab})
        if not ids:
            raise ValueError(f"the tokenizer has no single token for the identifier {letter!r}")
        out.append(ids)
    return out


def letter_scores(logits: Sequence[float], variants: list[list[int]]) -> tuple[float, ...]:
    """Each letter's score from one position's logits: log-sum-exp over its token variants."""
    return tuple(logsumexp([float(logits[t]) for t in ids]) for ids in variants)


# -- constrained ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrammarState:
    """Where an answer stands: identifiers used, the digits of the one being written (``None``: not inside
    brackets), how much of the separator " > " is written, and whether the answer is complete."""

    used: frozenset[int] = frozenset()
    digits: str | None = None
    separator: int = 0
    complete: bool = False


class PermutationGrammar:
    """The answers ``[a] > [b] > ... > [z]`` with {a, ..., z} = {1, ..., n}: advance character by character;
    None is a dead end (no valid answer starts so)."""

    SEPARATOR = " > "

    def __init__(self, n: int):
        self.n = n
        self._prefixes = {str(i)[:j] for i in range(1, n + 1) for j in range(1, len(str(i)) + 1)}

    def start(self) -> GrammarState:
        return GrammarState()

    def _open(self, digits: str, used: frozenset[int]) -> bool:
        """Some unused identifier begins with ``digits``."""
        return digits in self._prefixes and any(str(i).startswith(digits) for i in range(1, self.n + 1) if i not in used)

    def advance(self, state: GrammarState | None, text: str) -> GrammarState | None:
        for ch in text:
            if state is None or state.complete:
                return None
            if state.digits is not None:  # inside [ ... ]
                if ch.isdigit():
                    digits = state.digits + ch
                    state = GrammarState(state.used, digits) if self._open(digits, state.used) else None
                elif ch == "]" and state.digits and int(state.digits) not in state.used and state.digits in self._prefixes:
                    used = state.used | {int(state.digits)}
                    state = GrammarState(used, None, 0, len(used) == self.n)
                else:
                    return None
            elif not state.used or state.separator == len(self.SEPARATOR):  # expecting "["
                state = GrammarState(state.used, "") if ch == "[" else None
            elif ch == self.SEPARATOR[state.separator]:
                state = GrammarState(state.used, None, state.separator + 1)
            else:
                return None
        return state


@dataclass
class TokenGrammar:
    """:class:`PermutationGrammar` over a tokenizer's tokens: ``pieces`` maps every token whose text is made
    only of the answer's characters to that text (as it reads after another token); every other token, and
    the end token while the answer is incomplete, is refused."""

    pieces: dict[int, str]
    eos: int | None
    _memo: dict = field(default_factory=dict, repr=False)

    CHARS = frozenset("[]0123456789> ")

    @classmethod
    def of(cls, tokenizer: Any) -> "TokenGrammar":
        """Every token's text after a neutral first token (the one for ``]``), so that SentencePiece's and
        byte-level BPE's leading-space markers read as the space they write."""
        anchor = tokenizer.encode("]", add_special_tokens=False)[-1:]
        base = tokenizer.decode(anchor)
        pieces = {}
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        for tid in range(len(tokenizer)):
            if tid in special:
                continue
            text = tokenizer.decode(anchor + [tid])
            if text.startswith(base):
                piece = text[len(base):]
                if piece and set(piece) <= cls.CHARS:
                    pieces[tid] = piece
        return cls(pieces, getattr(tokenizer, "eos_token_id", None))

    def advance(self, grammar: PermutationGrammar, state: GrammarState, token: int) -> GrammarState | None:
        """The state after ``token`` (None: not a token of the answer)."""
        piece = self.pieces.get(token)
        return None if piece is None else grammar.advance(state, piece)

    def allowed(self, grammar: PermutationGrammar, state: GrammarState) -> list[int]:
        """The tokens that keep an answer in ``state`` valid (the end token alone once it is complete)."""
        if state.complete:
            return [] if self.eos is None else [self.eos]
        key = (grammar.n, state)
        found = self._memo.get(key)
        if found is None:
            found = [t for t, piece in self.pieces.items() if grammar.advance(state, piece) is not None]
            self._memo[key] = found
        return found


def permutation_regex(n: int) -> str:
    """The answer format ``[a] > [b] > ...`` with exactly ``n`` identifiers from 1..n, as a regular expression
    (what an OpenAI-compatible server's structured outputs take). A regular language cannot say "each once"
    without growing as n!: repeats stay possible, and the parser repairs them (counted as ``repaired``)."""
    ident = r"\[(?:" + "|".join(str(i) for i in range(n, 0, -1)) + r")\]"
    return ident + (r"(?: > " + ident + r"){" + str(n - 1) + "}" if n > 1 else "")


def scores_from_top_logprobs(top: Sequence[tuple[str, float]], n: int) -> tuple[float | None, ...]:
    """A window's letter scores from the alternatives an endpoint returned for the first answer token
    (``(token text, log-probability)`` pairs): each letter's log-sum-exp over the tokens that read as it
    (``A``, `` A``), None for a letter not among them (then ranked after the returned ones)."""
    found: dict[str, list[float]] = {}
    for text, logprob in top:
        letter = text.strip()
        if len(letter) == 1 and letter in LETTERS[:n]:
            found.setdefault(letter, []).append(float(logprob))
    return tuple(logsumexp(found[c]) if c in found else None for c in LETTERS[:n])


class AnswerDecoding:
    """What a local model's decoder needs for an answer mode, built from its tokenizer once (lazily): the
    letters' token variants (logits) and the token grammar (constrained)."""

    def __init__(self, tokenizer: Any, mode: AnswerMode, backend: str):
        self.tokenizer = tokenizer
        self.mode = AnswerMode(mode)
        self.backend = backend
        self.eos = getattr(tokenizer, "eos_token_id", None)
        self._variants: list[list[int]] | None = None
        self._grammar: TokenGrammar | None = None
        self._device_grammar: "DeviceGrammar | None" = None
        if self.mode is AnswerMode.constrained and self.eos is None:
            raise OptionError(f"{backend}: {{answer}} needs a tokenizer with an end-of-sequence token",
                              answer=("--answer", "constrained"))

    def variants(self, n: int) -> list[list[int]]:
        if self._variants is None:
            self._variants = letter_variants(self.tokenizer, len(LETTERS))
        return self._variants[:n]

    def scores(self, logits: Sequence[float], n: int) -> tuple[float, ...]:
        """The window's letters scored from the first position's logits."""
        return letter_scores(logits, self.variants(n))

    def columns(self) -> list[int]:
        """The vocabulary ids any letter's score reads: a model's logits can be cut to these on its device, so a
        batch's answer crosses to the host as a few dozen numbers a row, not the whole vocabulary."""
        return sorted({t for ids in self.variants(len(LETTERS)) for t in ids})

    def scores_of_columns(self, values: Sequence[float], n: int) -> tuple[float, ...]:
        """:meth:`scores` from one row of logits cut to :meth:`columns` (the same numbers, so the same scores)."""
        return letter_scores(dict(zip(self.columns(), values)), self.variants(n))  # type: ignore[arg-type]

    @staticmethod
    def shown(scores: Sequence[float | None]) -> str:
        """The answer the scores stand for, as letters (for the prompt log and the cache's raw answer)."""
        order, _ = rank_by_scores(scores)
        return " > ".join(LETTERS[i] for i in order)

    @property
    def grammar(self) -> TokenGrammar:
        if self._grammar is None:
            self._grammar = TokenGrammar.of(self.tokenizer)
        return self._grammar

    def until_end(self, generated: list[int]) -> list[int]:
        """A constrained answer's tokens up to and including its end token (later ones are padding)."""
        return generated[: generated.index(self.eos) + 1] if self.eos in generated else generated

    def processor(self, torch: Any, nums: Sequence[int], prompt_width: int) -> Any:
        """A transformers logits processor for a batch of windows of ``nums`` passages (prompts left-padded to
        ``prompt_width``): each row may only continue its answer within the permutation grammar, which runs on
        the model's device (:class:`DeviceGrammar`: no step waits for the host)."""
        from transformers import LogitsProcessor, LogitsProcessorList

        if self._device_grammar is None:
            self._device_grammar = DeviceGrammar(torch, self.grammar)
        run = self._device_grammar.start(nums, prompt_width)

        class Permutations(LogitsProcessor):
            def __call__(self, input_ids, scores):
                return run.step(input_ids, scores)

        return LogitsProcessorList([Permutations()])


#: the answer's characters as the device grammar numbers them (digits are 0..9, then these)
_OPEN, _CLOSE, _GT, _SPACE = 10, 11, 12, 13
_CODES = {**{str(d): d for d in range(10)}, "[": _OPEN, "]": _CLOSE, ">": _GT, " ": _SPACE}
#: a row's mode: expecting "[" (or a separator character), inside brackets, complete, out (dead, or ended)
_EXPECT, _DIGITS, _COMPLETE, _OUT = 0, 1, 2, 3


#: the characters of an answer in the order they come round: "[", digits, "]", " ", ">", " ", and "[" again
_CYCLE = ("[", "0123456789", "]", " ", ">", " ")


def _could_be_in_an_answer(text: str) -> bool:
    """Whether ``text`` can be a stretch of some answer ``[a] > [b] > ...`` (else no state takes it: a run of
    spaces, ``>>``, ``[[``; such tokens stay masked without being stepped through on the device)."""
    for start in range(len(_CYCLE)):
        at, ok = start, True
        for i, ch in enumerate(text):
            if ch in _CYCLE[at]:
                if at != 1 or i + 1 == len(text) or not text[i + 1].isdigit():  # digits stay while digits follow
                    at = (at + 1) % len(_CYCLE)
            else:
                ok = False
                break
        if ok:
            return True
    return False


class DeviceGrammar:
    """:class:`TokenGrammar` as tensors on the model's device: at every step every row's state is advanced by every
    answer token at once, character by character (a token is a few characters of ``[]0-9> ``), so the allowed
    tokens of the batch are one mask computed where the logits are, and the token a row then writes selects its
    next state from those already computed. The same answers as :meth:`TokenGrammar.allowed` (tests): a row's
    state is its mode, the number written so far inside brackets (and its digit count), how much of " > " is
    written, and which identifiers are used (those above the row's n count as used from the start)."""

    def __init__(self, torch: Any, tokens: TokenGrammar):
        self.torch = torch
        pieces = sorted((tid, text) for tid, text in tokens.pieces.items() if _could_be_in_an_answer(text))
        width = max((len(text) for _, text in pieces), default=1)
        self.token_ids = [tid for tid, _ in pieces]
        self.chars = [[_CODES[ch] for ch in text] + [-1] * (width - len(text)) for _, text in pieces]
        self.eos = tokens.eos
        self._on: dict = {}  # device -> its tensors

    def tensors(self, device: Any) -> tuple:
        found = self._on.get(str(device))
        if found is None:
            torch = self.torch
            ids = torch.tensor(self.token_ids, dtype=torch.long, device=device)
            found = (ids, torch.tensor(self.chars, dtype=torch.long, device=device).reshape(len(self.token_ids), -1))
            self._on[str(device)] = found
        return found

    def start(self, nums: Sequence[int], prompt_width: int) -> "_GrammarRun":
        return _GrammarRun(self, list(nums), prompt_width)


class _GrammarRun:
    """One batch's answers under a :class:`DeviceGrammar`: every row's state, and after each step every row's
    state after each answer token (of which the token it writes is the next state)."""

    def __init__(self, grammar: DeviceGrammar, nums: list[int], prompt_width: int):
        self.grammar, self.nums, self.prompt_width = grammar, nums, prompt_width
        self.state: tuple | None = None  # (mode, value, digits, separator, used) of every row
        self.after: tuple | None = None  # the same after each answer token: (rows, tokens[, ids])

    def _setup(self, device: Any, vocab: int) -> None:
        torch = self.grammar.torch
        top = max(self.nums)
        ids = torch.arange(top + 1, device=device)
        text = [str(i) for i in range(top + 1)]
        #: starts[v, i]: identifier i begins with the digits of v (a prefix of i is at most i)
        self.starts = torch.tensor([[i >= 1 and v >= 1 and text[i].startswith(text[v]) for i in range(top + 1)]
                                    for v in range(top + 1)], device=device)
        #: avail[row, i]: i is an identifier of the row's window (1..n)
        self.avail = (ids[None, :] >= 1) & (ids[None, :] <= torch.tensor(self.nums, device=device)[:, None])
        self.ids, self.top = ids, top
        token_ids, _ = self.grammar.tensors(device)
        self.lookup = torch.full((vocab,), -1, dtype=torch.long, device=device)
        self.lookup[token_ids] = torch.arange(token_ids.shape[0], device=device)
        zeros = torch.zeros(len(self.nums), dtype=torch.long, device=device)
        self.state = (zeros.clone(), zeros.clone(), zeros.clone(), zeros.clone(),
                      torch.zeros_like(self.avail))

    def _advance_all(self) -> tuple:
        """Every row's state after each answer token, character by character (the characters past a token's end
        change nothing); the rules of :meth:`PermutationGrammar.advance`."""
        torch = self.grammar.torch
        _, chars = self.grammar.tensors(self.ids.device)
        count = chars.shape[0]
        mode, value, digits, sep = (t[:, None].expand(-1, count).clone() for t in self.state[:4])
        used = self.state[4][:, None, :].expand(-1, count, -1).clone()
        avail = self.avail[:, None, :]
        top = self.top
        for c in range(chars.shape[1]):
            ch = chars[:, c][None, :].expand(mode.shape[0], -1)
            present = ch >= 0
            in_digits = present & (mode == _DIGITS)
            expect = present & (mode == _EXPECT)
            is_digit = (ch >= 0) & (ch <= 9)
            grown = value * 10 + ch.clamp(min=0)
            # a digit: while some unused identifier of the window starts with the number (no identifier starts
            # with 0: starts[0] is empty)
            extends = in_digits & is_digit & (grown <= top)
            extends &= (self.starts[grown.clamp(max=top)] & ~used & avail).any(-1)
            # "]": the number is an unused identifier of the window
            at = value.clamp(max=top)[..., None]
            closes = in_digits & (ch == _CLOSE) & (digits > 0) & avail.expand_as(used).gather(2, at).squeeze(-1)
            closes &= ~used.gather(2, at).squeeze(-1)
            # outside brackets: "[" first and after a whole " > ", else the separator's next character
            wants_open = ~used.any(-1) | (sep == 3)
            opens = expect & wants_open & (ch == _OPEN)
            sep_char = torch.where(sep == 1, torch.full_like(sep, _GT), torch.full_like(sep, _SPACE))
            seps = expect & ~wants_open & (ch == sep_char)
            used = used | (closes[..., None] & (self.ids[None, None, :] == value[..., None]))
            complete = (used | ~avail).all(-1)
            new_mode = torch.full_like(mode, _OUT)
            new_mode = torch.where(extends | opens, torch.full_like(mode, _DIGITS), new_mode)
            new_mode = torch.where(closes & complete, torch.full_like(mode, _COMPLETE), new_mode)
            new_mode = torch.where((closes & ~complete) | seps, torch.full_like(mode, _EXPECT), new_mode)
            value = torch.where(extends, grown, torch.where(opens | closes, torch.zeros_like(value), value))
            digits = torch.where(extends, digits + 1, torch.where(opens | closes, torch.zeros_like(digits), digits))
            sep = torch.where(seps, sep + 1, torch.where(opens | closes, torch.zeros_like(sep), sep))
            mode = torch.where(present, new_mode, mode)
        return mode, value, digits, sep, used

    def step(self, input_ids: Any, scores: Any) -> Any:
        torch = self.grammar.torch
        if self.state is None:
            self._setup(scores.device, scores.shape[1])
        elif input_ids.shape[1] > self.prompt_width:  # the token each row wrote selects its next state
            index = self.lookup[input_ids[:, -1].clamp(min=0, max=self.lookup.shape[0] - 1)]
            rows = torch.arange(index.shape[0], device=index.device)
            pick = index.clamp(min=0)
            mode, value, digits, sep, used = (t[rows, pick] for t in self.after)
            was = self.state[0]
            gone = (index < 0) | (was == _COMPLETE) | (was == _OUT)  # ended, or not an answer token: left alone
            self.state = (torch.where(gone, torch.full_like(mode, _OUT), mode), value, digits, sep, used)
        self.after = self._advance_all()
        mode = self.state[0]
        token_ids, _ = self.grammar.tensors(scores.device)
        mask = torch.full_like(scores, -math.inf)
        mask[:, token_ids] = torch.where(self.after[0] != _OUT, 0.0, -math.inf).to(scores.dtype)
        if self.grammar.eos is not None:  # a complete answer: only its end
            mask[:, self.grammar.eos] = torch.where(mode == _COMPLETE, 0.0, -math.inf).to(scores.dtype)
        mask = torch.where((mode == _OUT)[:, None], torch.zeros_like(mask), mask)
        return scores + mask


__all__ = ["AnswerDecoding", "AnswerMode", "DeviceGrammar", "GrammarState", "LETTERS", "PermutationGrammar", "TokenGrammar", "letter_scores",
           "letter_variants", "logsumexp", "permutation_regex", "rank_by_scores", "scores_from_top_logprobs"]
