"""Rerankers that think before they answer: the thinking options every listwise LLM backend shares, their checks, and
the gate that decides, window by window, where AcuRank lets the model think. The thought itself is read apart from
the answer by :mod:`.thoughts`.

**Controls** (:class:`ThinkingOptions`, shared by hf:, vllm:, openai: and the simulated reranker): ``--thinking
off|on|gated``, ``--reasoning-effort``, ``--thinking-budget N``, ``--think-above X``; what each does per backend is
in docs/thinking.md and the support matrix. Without them nothing is sent or changed (the model's own default).

**Gated thinking**: a window thinks only while its ratings are unsettled; its measure, threshold, rule and
application are :mod:`acurank_cli.method.thinking_gate`'s, built from these options by :func:`gate_of`, each
thought counted at :func:`thought_cost`.
"""

from __future__ import annotations

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

    def thought_cost(self) -> int:
        """The most tokens one window's thought costs, the backend's declaration: the thought's budget
        (``--thinking-budget``; a local model's default where none is given). A backend whose thoughts cost otherwise
        overrides it in its options record (the simulated reranker's assumed cost)."""
        return self.local_budget()


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
    """The most tokens one window's thought costs, as the backend's options record declares it
    (:meth:`ThinkingOptions.thought_cost`; a record of the settings alone: their budget). The gate counts each
    thinking window at it, and the simulated reranker bills each thought at it."""
    settings = options if isinstance(options, ThinkingOptions) else ThinkingOptions.of(options)
    return int(settings.thought_cost())


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


__all__ = ["PER_BACKEND", "DEFAULT_LOCAL_BUDGET", "GATED_OFF_EFFORT", "ReasoningEffort", "Thinking", "ThinkingOptions",
           "gate_of", "thought_cost", "check_thinking", "Effort"]
