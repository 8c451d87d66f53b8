"""The simulated reranker: qrels grade plus seeded Gaussian noise per (window, doc), as specified, and two
ways real LLMs err that fresh noise does not model (both off by default, so the specified oracle is
unchanged):

- ``--sim-persistent S``: an error S * z_d per (query, document), drawn once from
  sha256("acurank-sim-doc|seed|qid|d") and the same in every window: self-consistent but persistently wrong,
  as a model that misjudges a passage misjudges it every time it sees it.
- ``--sim-position B``: a primacy bias B * (L - 1 - p) / (L - 1) for the document presented at position p of
  a window of L (B for the first, 0 for the last): listwise LLMs favour what they read first.

score(d) = g(d) + noise * z_(window, d) + S * z_d + B * (L - 1 - p) / (L - 1); the order is by score
descending, ties by smaller position.

Thinking (``--thinking on|gated``, assumptions for offline study, docs/thinking.md): a window answered while
thinking has its noise multiplied by ``--sim-think-noise`` (default 0.5: the same draw z, shrunk, so thinking
corrects the model's error rather than drawing another) and costs ``--sim-think-tokens`` thought tokens (default
1,000), counted apart from the answer's.

With ``--sim-tokens MODEL`` it also counts what each call would cost an LLM: the published prompt
(:mod:`.prompts`, fitted to 4,096 tokens as the ``openai:`` backend fits it) counted with MODEL's tiktoken
encoding (``gpt-4o``: ``o200k_base``; offline, the bundled ``cl100k_base``; ``tiktoken:ENCODING`` names one),
and the answer ``[a] > [b] > ...`` it gives. The order never depends on it.
"""

from __future__ import annotations

import hashlib
import json
import numbers
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ...errors import InputError
from ...records import PIVOT_PREFIX, RerankRequest, RerankResult
from ...params import ANY_INT, Domain, Option, at_least
from ..backend import RerankerBase, register
from ..listwise.reranker import ListwiseLLM
from ..listwise.thinking import Effort, ThinkingOptions, check_thinking, thought_cost

_NORMAL = statistics.NormalDist()


def _z(key: str, prefix: "hashlib._Hash | None" = None) -> float:
    """A standard normal draw from sha256(key): u from the first 16 hex digits (the digest's first 8 bytes, big-endian),
    z = Phi^-1(u) (u clipped). ``prefix``: sha256 already fed the text before ``key`` (a window's keys share all but
    their last field; the digest of the whole text is the same)."""
    hashed = prefix.copy() if prefix is not None else hashlib.sha256()
    hashed.update(key.encode("utf-8"))
    u = int.from_bytes(hashed.digest()[:8], "big") / 2**64
    return _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12))


def simulated_scores(qid: str, window: Sequence[str], grades: dict[str, int], noise: float, seed: int, *,
                     persistent: float = 0.0, position: float = 0.0) -> list[float]:
    """score(d) = g(d) + noise * z, z from sha256("acurank-sim|seed|qid|window|d"); plus, when set, the
    persistent error persistent * z_d (sha256("acurank-sim-doc|seed|qid|d")) and the primacy bias
    position * (L - 1 - p) / (L - 1)."""
    shared = hashlib.sha256(f"acurank-sim|{seed}|{qid}|{','.join(window)}|".encode("utf-8"))
    last = max(1, len(window) - 1)
    scores = []
    for p, d in enumerate(window):
        score = grades.get(d, 0) + noise * _z(d, shared)
        if persistent:
            score += persistent * _z(f"acurank-sim-doc|{seed}|{qid}|{d}")
        if position:
            score += position * (last - p) / last
        scores.append(score)
    return scores


def simulated_order(qid: str, window: Sequence[str], grades: dict[str, int], noise: float, seed: int, *,
                    persistent: float = 0.0, position: float = 0.0) -> tuple[int, ...]:
    """Positions by score descending, ties by smaller position."""
    scores = simulated_scores(qid, window, grades, noise, seed, persistent=persistent, position=position)
    return tuple(sorted(range(len(window)), key=lambda i: (-scores[i], i)))


@dataclass
class SimulatedReranker(RerankerBase):
    """A research device: orders a window by noisy qrels grades (needs ``--qrels``)."""

    qrels: dict[str, dict[str, int]]
    noise: float = 1.0
    seed: int = 0
    name: str = field(default="simulated")
    #: the persistent error's sd (per query and document) and the primacy bias (0: off, the specified oracle)
    persistent: float = 0.0
    position: float = 0.0
    needs_texts: bool = False
    #: builds and counts the prompt a call would send (None: no token accounting)
    builder: Any = field(default=None, repr=False)
    note: str | None = None
    #: thinking (off by default): which windows think, the noise factor a thought brings and what it costs
    thinking: ThinkingOptions = field(default_factory=ThinkingOptions)
    think_noise: float = 0.5
    think_tokens: int = 1000
    #: the pivot's grade (``--pivot simulated``): the relevance boundary it stands for
    pivot_grade: float = 1.5

    def fingerprint(self) -> dict[str, Any]:
        """The oracle's settings and its qrels (a run with other noise, seed or qrels is another run)."""
        grades = json.dumps(self.qrels, sort_keys=True).encode("utf-8")
        out = {"backend": "simulated", "noise": self.noise, "seed": self.seed,
               "qrels": hashlib.sha256(grades).hexdigest()}
        if self.persistent:  # only when set: the specified oracle's fingerprint is unchanged
            out["persistent"] = self.persistent
        if self.position:
            out["position"] = self.position
        if self.builder is not None:  # only then: a plain run's fingerprint is unchanged
            out["tokens"] = self.builder.counter.name
        if self.thinking.thinking is not None:
            out.update(self.thinking.identity(), think_noise=self.think_noise, think_tokens=self.think_tokens)
        if self.pivot_grade != 1.5:  # only when set: a pivot's other boundary is another run
            out["pivot_grade"] = self.pivot_grade
        return out

    def notes(self) -> list[str]:
        return [self.note] if self.note else []

    def rerank_batch(self, requests: Sequence[RerankRequest]) -> list[RerankResult]:
        """Order every window by its simulated scores (which the answer carries: the graded outcomes' scores)."""
        results = []
        for r in requests:
            think = bool(self.thinking.think_for(r.think))
            noise = self.noise * self.think_noise if think else self.noise
            grades = self.qrels.get(r.qid, {})
            if r.docids and r.docids[-1].startswith(PIVOT_PREFIX):  # the pivot (--pivot): a document of its grade
                grades = {**grades, r.docids[-1]: self.pivot_grade}
            scores = simulated_scores(r.qid, r.docids, grades, noise, self.seed, persistent=self.persistent,
                                      position=self.position)
            order = tuple(sorted(range(len(scores)), key=lambda i: (-scores[i], i)))
            thought = {"reasoning_tokens": self.think_tokens, "thinking": True} if think else {}
            if self.builder is None:
                results.append(RerankResult(order=order, scores=tuple(scores), **thought))
                continue
            answer = " > ".join(f"[{i + 1}]" for i in order)
            results.append(RerankResult(order=order, input_tokens=self.builder.build(r.query, r.docs).tokens,
                                        output_tokens=self.builder.counter.count(answer), scores=tuple(scores),
                                        **thought))
        return results


@dataclass(frozen=True)
class SimulatedOptions(ThinkingOptions):
    """The simulated reranker: the grades, their noise, and the thinking model's."""

    help_panel = "Simulated reranker"  # its flags' --help panel (cli/flags.py PANELS)

    qrels: Optional[Any] = Option(help="the grades (from --qrels; API: {qid: {docid: grade}} or a qrels file's path)", cli=False)(None)
    sim_noise: float = Option(help="noise of the grades (Gaussian sd)", domain=at_least(0.0, integer=False))(1.0)
    sim_seed: int = Option(help="seed of the noise", domain=ANY_INT)(0)
    sim_persistent: float = Option(help="sd of an error per (query, document) that is the same in every window: "
                                   "consistent but persistently wrong, as real LLMs are", domain=at_least(0.0, integer=False))(0.0)
    sim_position: float = Option(help="primacy bias: the first document of a window gains this much (in grades), "
                                 "the last nothing, linearly between", domain=at_least(0.0, integer=False))(0.0)
    sim_tokens: Optional[str] = Option(help="count the tokens each call would cost: the published prompt and "
                                       "its answer, counted for MODEL (gpt-4o, or tiktoken:ENCODING)")(None)
    sim_think_noise: float = Option(help="--thinking: a window answered while thinking has its noise multiplied by "
                                    "this (an assumption: docs/thinking.md)", domain=at_least(0.0, integer=False))(0.5)
    sim_think_tokens: int = Option(help="--thinking: the thought tokens a thinking window costs (an assumption)",
                                   domain=at_least(0))(1000)
    sim_pivot_grade: float = Option(help="--pivot simulated: the pivot's grade, the relevance boundary it stands for "
                                    "(default 1.5: between TREC DL's grades 1 and 2)", domain=Domain(False))(1.5)

    def thought_cost(self) -> int:
        """A thinking window's assumed thought (``--sim-think-tokens``), capped by its budget (``--thinking-budget``)."""
        return min(int(self.sim_think_tokens), self.thinking_budget or int(self.sim_think_tokens))

    @property
    def needs_texts(self) -> bool:
        """Counting prompt tokens needs the passages."""
        return self.sim_tokens is not None


def grades_of(qrels: Any) -> dict[str, dict[str, int]]:
    """The API's ``qrels=``: a TREC qrels file's path (read as ``--qrels`` reads it) or {qid: {docid: grade}} with
    integer grades; anything else is an InputError here, before any call."""
    if isinstance(qrels, (str, os.PathLike)):
        from ...io.collection_files import read_qrels

        return read_qrels(qrels)
    if not isinstance(qrels, Mapping):
        raise InputError(f"qrels={type(qrels).__name__}: must be {{qid: {{docid: grade}}}} or a qrels file's path")
    out: dict[str, dict[str, int]] = {}
    for qid, docs in qrels.items():
        if not isinstance(docs, Mapping):
            raise InputError(f"qrels[{qid!r}]={docs!r}: must be {{docid: grade}}")
        row = {}
        for docid, grade in docs.items():
            if isinstance(grade, bool) or not isinstance(grade, numbers.Integral):
                raise InputError(f"qrels[{qid!r}][{docid!r}]={grade!r}: a grade must be an integer")
            row[str(docid)] = int(grade)
        out[str(qid)] = row
    return out


def _token_builder(model: str):
    """--sim-tokens MODEL: the published prompt's builder, fitted to 4,096 tokens as openai: fits it, counted for
    MODEL; and a note when the count is not MODEL's own."""
    from .openai import resolve_counter
    from ..listwise.prompt_builder import PromptBuilder
    from ..listwise.prompts import CHAT_MESSAGES

    counter, _, note = resolve_counter(model, model if model.startswith("tiktoken:") else None)
    return PromptBuilder(CHAT_MESSAGES, counter, 4096, fix_rendered=False), note


class CountedPrompts(ListwiseLLM):
    """The prompts --sim-tokens counts (``acurank prompt render``, ``--dry-run``): no model behind them."""

    sends_text = False
    #: how the tokens are counted where not by MODEL's own tokenizer (the run says it: so does a dry run)
    note: str | None = None

    def generate(self, prompts, deliver) -> None:
        raise InputError("simulated: the counted prompts are never sent")

    def notes(self) -> list[str]:
        """What the simulated run says of its prompts: the count's fallback, if any."""
        return [self.note] if self.note else []


def _prompts(arg: str, options: SimulatedOptions) -> CountedPrompts | None:
    """The prompts --sim-tokens counts; None without it (the oracle reads no prompt)."""
    if options.sim_tokens is None:
        return None
    builder, note = _token_builder(options.sim_tokens)
    prompts = CountedPrompts("simulated", builder)
    prompts.note = _counted(builder, note)
    return prompts


def needs_qrels() -> InputError:
    """The refusal of a simulated reranker given no qrels (said by its factory, and by the run's checks, which know
    the run's qrels, before anything is made)."""
    return InputError("the simulated reranker needs qrels: it orders windows by noisy grades (CLI: --qrels FILE; "
                      "API: qrels={qid: {docid: grade}} or a qrels file's path)")


def _counted(builder, note: str | None) -> str:
    """What a simulated run that counts tokens says of its count, once."""
    return f"--sim-tokens: {note or 'counting with ' + builder.counter.name}"


@register("simulated", takes_arg=False, help="noisy qrels oracle (needs --qrels)", needs_texts=False,
          options=SimulatedOptions, prompts=_prompts, oracle=True)
def _factory(arg: str, options: SimulatedOptions) -> SimulatedReranker:
    check_thinking(options, "simulated", Effort.refused)
    qrels = {} if options.qrels is None else grades_of(options.qrels)
    if not qrels:
        raise needs_qrels()
    builder, note = None, None
    extra = "".join(f",{what}={value}" for what, value in (("persistent", options.sim_persistent),
                                                             ("position", options.sim_position)) if value)
    name = f"simulated(noise={options.sim_noise},seed={options.sim_seed}{extra})"
    if options.sim_tokens is not None:
        builder, note = _token_builder(options.sim_tokens)
        name = f"{name[:-1]},tokens={builder.counter.name})"
    return SimulatedReranker(qrels, noise=options.sim_noise, seed=options.sim_seed, name=name,
                             persistent=options.sim_persistent, position=options.sim_position,
                             builder=builder,
                             note=None if builder is None else _counted(builder, note),
                             thinking=ThinkingOptions.of(options), think_noise=options.sim_think_noise,
                             think_tokens=thought_cost(options),
                             pivot_grade=options.sim_pivot_grade)
