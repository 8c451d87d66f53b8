"""The base of every listwise LLM backend: prompting, prompt memo, parsing, prompt log.

A subclass only *generates*: it builds its :class:`~.prompts.PromptBuilder` (format, token counter,
context size) and implements :meth:`ListwiseLLM.generate`, handing each answer to ``deliver`` the
moment it arrives. Everything else (prompt building and its memo, the cache key, parsing the answer
by the published rule, the per-call ``--log-prompts`` line, per-call delivery to the call cache)
lives here, once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..io.prompt_log import PromptLog
from ..records import RerankRequest, RerankResult
from .answers import AnswerMode, rank_by_scores
from .backend import LRU, RerankerBase, ResultSink
from .parsing import parse_ranking
from .prompts import Prompt, PromptBuilder


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


Deliver = Callable[[int, Reply], None]

#: What each answer mode does, for the start-up notes.
ANSWER_NOTES = {AnswerMode.constrained: "decoding allows only a valid permutation of the window's identifiers",
                AnswerMode.logits: "letters as identifiers; one forward pass, the window ranked by the first "
                                   "token's logits"}


class ListwiseLLM(RerankerBase):
    """A model that reads the RankLLM prompt and writes ``[i] > [j] > ...``."""

    #: True: the model reads ``prompt.text`` (local models); False: ``prompt.messages`` (chat endpoints).
    sends_text = True

    def __init__(self, name: str, builder: PromptBuilder, log_prompts: str | None = None):
        self.name = name
        self.builder = builder
        self._prompts = LRU(4096)
        self.prompt_log = PromptLog(log_prompts) if log_prompts else None

    # -- prompting ------------------------------------------------------------------------------

    def prompt(self, request: RerankRequest) -> Prompt:
        """The (memoised) prompt for a request, fitted to the context size."""
        return self._prompts.get_or((request.query, request.docs), lambda: self.builder.build(request.query, request.docs))

    def prompt_key(self, request: RerankRequest) -> str:
        """Exactly what the model reads: the text, or the messages as canonical JSON."""
        p = self.prompt(request)
        return p.text if self.sends_text else json.dumps(p.messages, ensure_ascii=False, separators=(",", ":"))

    def prompt_identity(self) -> dict[str, Any]:
        """How prompts are made and answered (part of the cache identity and the run fingerprint; the answer mode
        only when it is not the published text, so that text runs keep their identity)."""
        out = {"prompt_format": self.builder.format.name, "context_size": self.builder.context_size,
               "token_counter": self.builder.counter.name}
        if self.builder.answer is not AnswerMode.text:
            out["answer"] = self.builder.answer.value
        return out

    def notes(self) -> list[str]:
        b = self.builder
        notes = [f"prompts: {b.format.name} ({b.format.source}); context {b.context_size} tokens counted with {b.counter.name}"]
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
            req = requests[i]
            if reply.scores is not None:
                order, status = rank_by_scores(reply.scores)
            else:
                parsed = parse_ranking(reply.answer, len(req.docids))
                order, status = parsed.order, parsed.status
            result = RerankResult(order=order, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                                  latency=reply.latency, parse=status, cached=False,
                                  raw=reply.answer, backend=self.name, endpoint=reply.served_by, scores=reply.scores)
            results[i] = result
            if self.prompt_log is not None:
                self._log(req, prompts[i], result)
            if on_result is not None:
                on_result(i, result)

        if requests:
            self.generate(prompts, deliver)
        return results  # type: ignore[return-value]

    def _log(self, request: RerankRequest, prompt: Prompt, result: RerankResult) -> None:
        sent = {"text": prompt.text} if self.sends_text else {"messages": [dict(m) for m in prompt.messages]}
        self.prompt_log.write({
            "qid": request.qid, "docids": list(request.docids), "backend": self.name,
            "format": self.builder.format.name, "counter": self.builder.counter.name, **sent,
            "prompt_tokens": prompt.tokens, "input_tokens": result.input_tokens,
            "output_tokens": result.output_tokens, "max_length": prompt.max_length,
            "answer_tokens": prompt.answer_tokens, "answer": result.raw, "parse": result.parse,
            **({} if result.scores is None else {"scores": list(result.scores)}),
            "latency": round(result.latency, 6),
        })

    def close(self) -> None:
        if self.prompt_log is not None:
            self.prompt_log.close()
            self.prompt_log = None


__all__ = ["Deliver", "ListwiseLLM", "Reply"]
