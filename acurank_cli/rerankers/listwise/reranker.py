"""The base of every listwise LLM backend: prompting, prompt memo, parsing, prompt log.

A subclass only *generates*: it builds its :class:`~.prompts.PromptBuilder` (format, token counter,
context size) and implements :meth:`ListwiseLLM.generate`, handing each answer to ``deliver`` the
moment it arrives. Everything else (prompt building and its memo, the cache key, parsing the answer
by the published rule, the per-call ``--log-prompts`` line, per-call delivery to the call cache)
lives here, once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ... import redaction
from ...io.prompt_log import PromptLog
from ...records import ParseStatus, RerankRequest, RerankResult
from .answers import AnswerMode, rank_by_scores
from ..backend import LRU, RerankerBase, ResultSink, innermost
from .prompt_builder import Prompt, PromptBuilder
from .thinking import ThinkingOptions
from .thoughts import opens_thought, read_thought


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One generated answer with its accounting."""

    answer: str
    input_tokens: int
    output_tokens: int
    latency: float
    served_by: str = ""  # the endpoint that answered (remote backends)
    #: --answer logits: each presented passage's score (its identifier's first-token logit or log-probability;
    #: None when the endpoint did not return it); the order then comes from these, not from ``answer``
    scores: tuple[float | None, ...] | None = None
    #: a thought the server kept apart (``reasoning_content``/``reasoning``); ``answer`` may hold one inline too
    reasoning: str | None = None
    #: tokens spent thinking, when the server or the engine counted them (None: counted here from the thought)
    reasoning_tokens: int | None = None
    #: the call was made with thinking on
    thinking: bool = False
    #: the token limit ended the generation (finish_reason "length"): :func:`~.thoughts.read_thought` decides whether
    #: it cut a thought or the answer
    truncated: bool = False


Deliver = Callable[[int, Reply], None]

#: What each answer mode does, for the start-up notes.
ANSWER_NOTES = {AnswerMode.constrained: "decoding allows only a valid permutation of the window's identifiers",
                AnswerMode.logits: "letters as identifiers; one forward pass, the window ranked by the first "
                                   "token's logits"}


#: Words a passage keeps in a fitted prompt below which the run is told before its first call (the published cap for a
#: window of 20 is 300 words; a passage cut below 30 has lost most of a typical MS MARCO passage's 60 words).
SQUEEZE_FLOOR = 30
#: Below this many words a passage is no longer evidence (two words: not even a title): such a run is refused before
#: any call. Tiny test models with a 1,024-token context keep 7 words of a DL19 passage: warned, not refused.
USEFUL_FLOOR = 3


def fit_problem(backend: RerankerBase, request) -> tuple[Any, bool] | None:
    """What fitting the prompt of ``request`` (a first window) to the context does to its passages, when it cuts
    them below :data:`SQUEEZE_FLOOR` words: (the message, an :class:`~acurank_cli.errors.OptionError` that names the
    options as flags or keywords, and whether nothing useful is left, i.e. below :data:`USEFUL_FLOOR`); None when
    the passages keep their words or the backend fits no prompt (not a listwise LLM here: a server's model, Ray
    actors). Building a prompt calls no model."""
    from ...errors import OptionError

    backend = innermost(backend, lambda b: isinstance(b, ListwiseLLM))
    if backend is None or not request.docs:
        return None
    prompt = backend.prompt(request)
    if not prompt.clipped or prompt.max_length >= SQUEEZE_FLOOR:
        return None
    b = backend.builder
    instruction = request.instruction or b.template.additions.instruction
    takers = [f"the instruction ({len(instruction):,} characters)"] if instruction else []
    takers += [f"a thought's budget ({prompt.thought_budget:,} tokens)"] if prompt.thought_budget else []
    why = ", ".join(takers) + (" and " if takers else "") + "the prompt's own words"  # numbers and words: no braces
    words = f"{prompt.max_length} word{'' if prompt.max_length == 1 else 's'}"
    useless = prompt.max_length < USEFUL_FLOOR
    tail = (": nothing useful is left to rank; give a larger {context}, a smaller {window}, or a shorter "
            "{instruction}" if useless else "; a larger {context} or a smaller {window} keeps more")
    return OptionError(f"fitting a window of {prompt.num} passages into {{context_size}} cuts each passage to {words} "
                       f"(the longest window of the first round; {why} take the rest){tail}",
                       context_size=("--context-size", b.context_size),
                       context={"api": "context_size", "cli": "--context-size"},
                       window={"api": "window (m)", "cli": "--window"}, instruction="--instruction"), useless


def first_window_fit(backend: RerankerBase, strategy: Any, tasks: Sequence[Any], docs: Any,
                     scores: Callable[[Any], Any] | None = None) -> Any:
    """Before any call: the longest window (in characters) of ``strategy``'s first round for the first of ``tasks``,
    fitted to the context as the backend fits it (:func:`fit_problem`): a fit that leaves nothing useful refused
    (the :class:`~acurank_cli.errors.OptionError` raised), passages cut below the floor returned as the warning to
    say (both were silent; an OptionError, said with flags or keywords); None where nothing is cut or no prompt is
    fitted. ``tasks`` are as the method ranks them (by passages, where documents are split). ``scores``: a
    task's scores as the driver gives a prompt them (a pivot's among them, so that its passage is fitted too)."""
    if not tasks or not getattr(backend, "needs_texts", False):
        return None
    from ...method.strategy import first_round

    task = tasks[0]
    score = scores(task) if scores is not None else {c.docid: c.score for c in task.candidates}
    windows = [[d for d in w if d in docs and d in score] for w in first_round(strategy, task)]  # a pivot's too
    window = max(windows, key=lambda w: sum(len(docs[d].text) for d in w), default=[])
    if len(window) < 2:
        return None
    settings = getattr(innermost(backend, lambda b: isinstance(b, ListwiseLLM)), "thinking", None)
    think = True if settings is not None and settings.thinks else None  # a gated window may think: its thought fits
    request = RerankRequest(task.qid, task.query, tuple(window), tuple(docs[d] for d in window), think,
                            scores=tuple(score[d] for d in window), instruction=task.instruction)
    problem = fit_problem(backend, request)
    if problem is None:
        return None
    said, useless = problem
    if useless:  # the caller closes what it built
        raise said
    return said


class ListwiseLLM(RerankerBase):
    """A model that reads the RankLLM prompt and writes ``[i] > [j] > ...``."""

    #: True: the model reads ``prompt.text`` (local models); False: ``prompt.messages`` (chat endpoints).
    sends_text = True
    takes_instruction = True

    #: the thinking settings (``--thinking``, ``--reasoning-effort``, ``--thinking-budget``); none given: the model's
    #: own default, nothing sent
    thinking: ThinkingOptions = ThinkingOptions()

    def __init__(self, name: str, builder: PromptBuilder, log_prompts: str | None = None,
                 thinking: ThinkingOptions | None = None):
        self.name = name
        self.builder = builder
        self._prompts = LRU(4096)
        self._prompting = threading.Lock()
        self.prompt_log = PromptLog(log_prompts) if log_prompts else None
        if thinking is not None:
            self.thinking = thinking

    # -- prompting ------------------------------------------------------------------------------

    def thinks(self, request: RerankRequest) -> bool | None:
        """Whether the model thinks on this window (True, False), or None: the model's default (nothing sent)."""
        return self.thinking.think_for(request.think)

    def prompt(self, request: RerankRequest) -> Prompt:
        """The (memoised) prompt for a request, fitted to the context size (and to its thought, when it thinks).

        Under a lock: lanes ask from their threads at once, and the memo (an ordered dict whose lookups reorder it and
        whose insertions evict) is not safe to change from two threads. A prompt is CPU work under the GIL anyway:
        built one at a time, the first of a wave is ready sooner and the last no later."""
        think = self.thinks(request)
        with self._prompting:
            return self._prompts.get_or((request.query, request.docs, think, request.scores, request.instruction),
                                        lambda: self.builder.build(request.query, request.docs, think, request.scores,
                                                                   request.instruction))

    def window_tokens(self, request: RerankRequest) -> tuple[int, int]:
        """A call's tokens with no call: its prompt's, and its answer's (the whole permutation, as the answer's
        budget counts it; a chat endpoint's as the server counts its completion: :meth:`answer_allowance`)."""
        from .prompts import answer_text, counted_text

        n = len(request.docids)
        out = counted_text(answer_text(n), self.builder.counter) if self.sends_text else self.answer_allowance(n)
        return self.prompt(request).tokens, out

    def answer_allowance(self, num: int) -> int:
        """The most answer tokens a call on a window of ``num`` takes, as ``--max-cost``'s bound reserves them and a
        capped call is held to: out(num) where the model generates at most that (hf:, vllm:); a chat endpoint's whole
        answer, as its server counts the completion (:meth:`~.prompt_builder.PromptBuilder.whole_answer_tokens`)."""
        return self.builder.answer_tokens(num) if self.sends_text else self.builder.whole_answer_tokens(num)

    def prompt_key(self, request: RerankRequest) -> str:
        """Exactly what the model reads: the text, or the messages as canonical JSON (and, where the thinking switch
        travels beside the messages, whether this window thinks)."""
        p = self.prompt(request)
        if self.sends_text:
            return p.text
        key = json.dumps(p.messages, ensure_ascii=False, separators=(",", ":"))
        return key if p.think is None else f"{key}|think={int(p.think)}"

    def prompt_identity(self) -> dict[str, Any]:
        """How prompts are made and answered (part of the cache identity and the run fingerprint; the answer mode
        only when it is not the published text, and the thinking settings only when given, so that text runs keep
        their identity)."""
        out = {"prompt_format": self.builder.format.name, "context_size": self.builder.context_size,
               "token_counter": self.builder.counter.name}
        if self.builder.answer is not AnswerMode.text:
            out["answer"] = self.builder.answer.value
        out.update(self.thinking.identity())
        out.update(self.builder.template.identity())  # a template file's hash, an instruction, few-shot turns
        return out

    def notes(self) -> list[str]:
        b = self.builder
        notes = [f"prompts: {b.format.name} ({b.format.source}); context {b.context_size} tokens counted with {b.counter.name}"]
        notes.extend(b.template.notes(self.thinking.thinking))
        if b.answer is not AnswerMode.text:
            notes.append(f"answers: {b.answer.value} ({ANSWER_NOTES[b.answer]})")
        return notes

    # -- execution ------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Prompt], deliver: Deliver) -> None:  # pragma: no cover
        """Generate an answer for every prompt, calling ``deliver(i, reply)`` as each one finishes."""
        raise NotImplementedError

    def rerank(self, requests: Sequence[RerankRequest], on_result: ResultSink | None = None) -> list[RerankResult]:
        """Prompt, generate and parse every request; each result is handed on as soon as it exists."""
        prompts = [self.prompt(r) for r in requests]
        results: list[RerankResult | None] = [None] * len(requests)

        def deliver(i: int, reply: Reply) -> None:
            result = self.read(requests[i], prompts[i], reply)
            results[i] = result
            if self.prompt_log is not None:
                self._log(requests[i], prompts[i], result)
            if on_result is not None:
                on_result(i, result)

        if requests:
            self.generate(prompts, deliver)
        return results  # type: ignore[return-value]

    def read(self, request: RerankRequest, prompt: Prompt, reply: Reply) -> RerankResult:
        """The one reading of an answer, for every listwise backend: the thought kept apart (:func:`read_thought`:
        inline, a server's reasoning field, or opened by the prompt), the ranking read from the answer alone (the
        published rule), a thought that never ended counted as ``thought-cut`` (the presented order kept), and the
        thought's tokens counted apart from the answer's."""
        n = len(request.docids)
        thought = read_thought(reply.answer, reply.reasoning, opens_thought(prompt.text), truncated=reply.truncated,
                               asked=bool(prompt.think), counted=bool(reply.reasoning_tokens))  # read once
        if reply.scores is not None:
            order, status = rank_by_scores(reply.scores)
        elif thought.cut:
            order, status = tuple(range(n)), ParseStatus.thought_cut
        else:
            parsed = self.builder.parse(thought.answer, n)
            order, status = parsed.order, parsed.status
            if thought.truncated and status is not ParseStatus.unparseable:
                status = ParseStatus.truncated  # read from text the limit cut: never called a whole answer
        reasoning = reply.reasoning_tokens
        if reasoning is None and thought.cut and not reply.reasoning:
            reasoning = reply.output_tokens  # the whole completion was the thought
        elif reasoning is None:
            reasoning = self.builder.counter.count(thought.thought) if thought.thought else 0
        output = reply.output_tokens
        if (thought.thought or thought.cut) and reply.reasoning is None and reply.reasoning_tokens is None:
            output = max(0, output - reasoning)  # the thought was inline: the output's tokens are the answer's
        answer = thought.answer if (thought.thought or thought.cut) else reply.answer
        # what the server wrote is kept (cache, prompt log, trace) without a secret it may have echoed
        return RerankResult(order=order, input_tokens=reply.input_tokens, output_tokens=output,
                            latency=reply.latency, parse=status, cached=False, raw=redaction.values(answer),
                            backend=self.name, endpoint=reply.served_by, scores=reply.scores,
                            reasoning_tokens=int(reasoning), thinking=reply.thinking or bool(thought.thought) or thought.cut,
                            thought=redaction.values(thought.thought))

    def prompt_record(self, request: RerankRequest, prompt: Prompt) -> dict[str, Any]:
        """What a window's prompt is, as ``--log-prompts`` records it before the call's answer (``acurank prompt
        render`` prints this record: the two cannot differ)."""
        sent = {"text": prompt.text} if self.sends_text else {"messages": [dict(m) for m in prompt.messages]}
        return {"qid": request.qid, "docids": list(request.docids), "backend": self.name,
                "format": self.builder.format.name, "counter": self.builder.counter.name, **sent,
                "prompt_tokens": prompt.tokens, "max_length": prompt.max_length, "answer_tokens": prompt.answer_tokens}

    def _log(self, request: RerankRequest, prompt: Prompt, result: RerankResult) -> None:
        self.prompt_log.write({
            **self.prompt_record(request, prompt), "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens, "answer": result.raw, "parse": result.parse,
            **({} if not (result.thought or result.thinking) else {
                "thinking": result.thinking, "thought": result.thought, "reasoning_tokens": result.reasoning_tokens}),
            **({} if result.scores is None else {"scores": list(result.scores)}),
            "latency": round(result.latency, 6),
        })

    def close(self) -> None:
        if self.prompt_log is not None:
            self.prompt_log.close()
            self.prompt_log = None


__all__ = ["Deliver", "ListwiseLLM", "Reply"]
