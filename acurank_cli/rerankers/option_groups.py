"""Backend options declared once and composed per backend: each record below is a group of options
several backends share (one field, one help text, one domain); a backend's own options record inherits
the groups it takes and adds its own fields. The CLI shows each flag once, naming the backends that take
it (``--context-size  hf, vllm, openai: ...``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..params import Option, at_least, between, check_text
from .listwise.answers import AnswerMode

from .listwise.prompts import MIN_CONTEXT, AnswerBudget
from .listwise.templates import template_file


class TorchDevice:
    """The domain of ``--device``: a device name torch parses (cpu, cuda, cuda:1, mps) that this machine has.
    Checked with the other options, before any weights load (torch is imported only when a device is given)."""

    def __init__(self) -> None:
        self.why = "a torch device (cpu, cuda, cuda:1, mps)"

    def contains(self, value: Any) -> bool:
        import torch

        try:
            device = torch.device(value)
        except (RuntimeError, TypeError):
            self.why = "a torch device (cpu, cuda, cuda:1, mps)"
            return False
        if device.type == "cuda" and not torch.cuda.is_available():
            self.why = f"a device this machine has: torch {torch.__version__} sees no CUDA device (use cpu)"
            return False
        if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
            self.why = f"a device this machine has: cuda:0 ... cuda:{torch.cuda.device_count() - 1}"
            return False
        if device.type == "mps" and not torch.backends.mps.is_available():
            self.why = "a device this machine has: torch sees no MPS device (use cpu)"
            return False
        return True

    def describe(self) -> str:
        return self.why


@dataclass(frozen=True)
class TorchOptions:
    """Local models run by torch (hf:, minilm, ce:)."""

    device: Optional[str] = Option(help="torch device (cpu, cuda, cuda:1); default cuda if present", domain=TorchDevice())(None)
    batch_size: int = Option(help="windows per generate batch (hf), passages per forward pass (minilm)", domain=at_least(1))(8)

    def torch_device(self):
        """The device to load on: ``--device`` (checked by its domain), else cuda when torch sees one, else cpu."""
        import torch

        return torch.device(self.device or ("cuda" if torch.cuda.is_available() else "cpu"))


@dataclass(frozen=True)
class PromptOptions:
    """Listwise LLMs (hf:, vllm:, openai:): the published prompt, its context budget, sampling, the prompt log."""

    help_panel = "LLM prompt and answers"  # its flags' --help panel (cli/flags.py PANELS)

    context_size: int = Option(help="LLM context in tokens (prompt + answer), as published (vllm: also its max "
                               "model length)", domain=at_least(MIN_CONTEXT))(4096)
    prompt_format: Optional[str] = Option(help="prompt format rankzephyr | rankvicuna | chat (local models: chat when "
                                          "the tokenizer has a template, else rankvicuna; openai: chat), or a "
                                          "template FILE.yaml (RankLLM's format, rendered by the model's chat "
                                          "template)", flag="--prompt", reads=template_file)(None)
    instruction: Optional[str] = Option(help="a task instruction: at the template's {instruction}, else opening "
                                        "the user turn")(None)
    system_message: Optional[str] = Option(help="a system message in place of the template's")(None)
    few_shot: Optional[str] = Option(help="few-shot examples (RankLLM's JSON: [{\"conversations\": [{\"role\", "
                                     "\"value\"}]}]) as earlier turns after the system message", reads=True)(None)
    few_shot_count: Optional[int] = Option(help="the first N examples of --few-shot (default: all)",
                                           domain=at_least(1))(None)
    temperature: float = Option(help="LLM sampling temperature (0 = greedy; the published OpenAI runs used 1.0)", domain=between(0.0, 2.0))(0.0)
    log_prompts: Optional[str] = Option(help="JSONL file, one line per model call (qid, docids, exact prompt, "
                                        "tokens, word cap, answer)", writes=True)(None)
    answer: AnswerMode = Option(help="how the model answers: text (writes the ranking, parsed as "
                                "published), constrained (decoding can only write a valid permutation), logits "
                                "(one forward pass: the window ranked by the first token's logits over letter "
                                "identifiers, FIRST)")(AnswerMode.text)

    def __post_init__(self) -> None:
        check_text(self.instruction, "instruction")  # as a call's or a request's instruction is checked
        check_text(self.system_message, "system_message")  # a blank one was sent as a blank system turn
        after = getattr(super(), "__post_init__", None)  # the next group's checks (ThinkingOptions'), in a backend's
        if after is not None:  # record made of several groups
            after()


@dataclass(frozen=True)
class WeightsOptions:
    """Local LLM weights (hf:, vllm:)."""

    dtype: Optional[str] = Option(help="weights dtype (bf16, fp16, fp32); default bf16 on GPU, fp32 on CPU")(None)
    double_bos: bool = Option(help="feed the tokenizer's BOS even after the template's (as the published code did)")(False)
    answer_budget: AnswerBudget = Option(help="answer tokens out(num) of a written answer: counted (the tokens "
                                         "[1] > ... > [num] takes; the published figure wherever the tokenizer "
                                         "adds one start token) or published (its count with the tokenizer's "
                                         "special tokens, minus 1: a token short without a start token)")(AnswerBudget.counted)
