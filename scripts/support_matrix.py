"""Write docs/support-matrix.md from the registries: which method families run with which backends, which answer
modes and prompt formats each LLM backend takes, and the options of each. Never edited by hand:
tests/cli/test_support_matrix.py fails when the committed page differs from a fresh generation, and runs every cell
marked "works" (then run this script).

    python scripts/support_matrix.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PAGE = ROOT / "docs" / "support-matrix.md"

#: backends tests/cli/test_support_matrix.py runs with every method family here (hf: and ce: on tiny local models built
#: at test time, openai: against a loopback server); the others, and where they are tested instead
TESTED_HERE = ("simulated", "minilm", "ce", "hf", "openai")
ELSEWHERE = {"vllm": "the engines environment (make test-engines: tests/rerankers/test_engines.py runs acurank-9, and hf: "
                     "against vllm: on the same windows)"}
#: answer modes each listwise LLM backend takes, and the prompt formats (the openai: backend sends chat messages)
LLM_BACKENDS = ("hf", "vllm", "openai")


def families() -> list[tuple[str, str]]:
    """(family, the method name a test runs) of every registered method family, in the registry's order."""
    from acurank_cli.method.registry import methods

    return [(spec.family, spec.example.split(",")[0].split(" ")[0]) for spec in methods()]


def backends() -> dict:
    from acurank_cli.rerankers.backend import load_backends

    return {prefix: spec for prefix, spec in sorted(load_backends(strict=False).items())}


def answer_modes() -> list[str]:
    from acurank_cli.rerankers.listwise.answers import AnswerMode

    return [m.value for m in AnswerMode]


def prompt_formats(backend: str) -> list[str]:
    from acurank_cli.rerankers.listwise.prompts import CHAT_MESSAGES, PROMPT_FORMATS

    return [CHAT_MESSAGES.name] if backend == "openai" else list(PROMPT_FORMATS)


def method_cells() -> list[tuple[str, str, str]]:
    """(method, backend, status) for every family x backend: "works" where a test here runs it."""
    out = []
    for _, method in families():
        for prefix in backends():
            out.append((method, prefix, "works" if prefix in TESTED_HERE else "engines"))
    return out


def llm_cells() -> list[tuple[str, str, str, str]]:
    """(backend, prompt format, answer mode, status) for the listwise LLM backends."""
    return [(b, f, a, "works" if b in TESTED_HERE else "engines")
            for b in LLM_BACKENDS if b in backends() for f in prompt_formats(b) for a in answer_modes()]


def _flags(spec) -> str:
    from acurank_cli.plugins import declared_options

    return ", ".join(f"`{decl.cli_flag}`" for _, decl in declared_options(spec.record)) or "-"


def thinking_section(fams, regs) -> list[str]:
    """What the thinking controls do per backend (``acurank_cli.rerankers.listwise.thinking.PER_BACKEND``), and which methods
    take ``--thinking gated`` (those whose steps say how uncertain each window is)."""
    from acurank_cli.rerankers.listwise.thinking import PER_BACKEND
    from acurank_cli.run import pipeline

    shown = [b for b in PER_BACKEND if b in regs]
    controls = list(PER_BACKEND[shown[0]])
    lines = ["", "## Thinking rerankers (`--thinking`, `--thinking-budget`, `--reasoning-effort`)", "",
             "See docs/thinking.md. Every backend's answer is read by one reader: never the thought.", "",
             "| control | " + " | ".join(f"`{b}`" for b in shown) + " |", "|---|" + "---|" * len(shown)]
    for control in controls:
        lines.append(f"| `{control}` | " + " | ".join(PER_BACKEND[b][control] for b in shown) + " |")
    gated = []
    for family, method in fams:
        try:
            takes = pipeline.method(method).knows_uncertainty
        except Exception:  # noqa: BLE001 - a family whose example needs options: not listed
            continue
        gated.append(f"`{method}` ({'yes' if takes else 'refused'})")
    lines += ["", "`--thinking gated` by method: " + ", ".join(gated) + "."]
    return lines


def compared_section() -> list[str]:
    """The "compared with" row: the peer (RankLLM) on the same engine, read from the committed results of
    benchmarks/peer.py (BENCHMARKS.md 20); nothing where they have not been measured."""
    import json

    lines = []
    for name, what in (("peer", "sw-1, text answers"), ("peer-first", "sw-1, `--answer logits` against FIRST")):
        path = ROOT / "benchmarks" / "results" / f"{name}.json"
        if not path.is_file():
            continue
        r = json.loads(path.read_text())
        if "ratio" not in r:
            continue
        walls = {t: sorted(x["wall"] for x in r["runs"] if x["tool"] == t) for t in ("acurank", "rankllm")}
        calls = {t: next(x["calls"] for x in r["runs"] if x["tool"] == t) for t in ("acurank", "rankllm")}
        lines.append(f"| RankLLM 0.26 `RankListwiseOSLLM` (`rerank_batch`) | `vllm:` ({what}) | SmolLM2-135M-Instruct "
                     f"{r['dtype']}, {len(r['qids'])} DL19 queries, window {r['window']}, {r['machine']['cores']} CPU "
                     f"cores | {calls['acurank']} / {calls['rankllm']} | "
                     f"{', '.join(map(str, walls['acurank']))} / {', '.join(map(str, walls['rankllm']))} | "
                     f"**{r['ratio']}** |")
    if not lines:
        return []
    return ["", "## Compared with", "",
            "The same windows on the same engine (vLLM), model and machine, each process timed whole "
            "(`benchmarks/peer.py`, BENCHMARKS.md 20). RankLLM has no transformers path for listwise reranking, so "
            "`hf:` has no row.", "",
            "| peer | acurank backend | setup | calls (acurank / peer) | wall s (acurank / peer) | ratio |",
            "|---|---|---|---|---|---|"] + lines


def generate() -> str:
    from acurank_cli.method.registry import METHODS

    fams = families()
    regs = backends()
    mark = {"works": "works", "engines": "engines env"}
    lines = ["# Support matrix", "",
             "Generated from the method and backend registries by `scripts/support_matrix.py` (do not edit: "
             "`tests/cli/test_support_matrix.py` fails when this page differs from a fresh generation, and runs every "
             "cell marked *works*). A method decides windows and a backend executes them, so every pairing is meant "
             "to work; *works* says a test runs it here, *engines env* that "
             + "; ".join(f"`{k}:` is tested in {v}" for k, v in ELSEWHERE.items()) + ".", "",
             "## Methods x backends", "",
             "| method | " + " | ".join(f"`{p}`" for p in regs) + " |",
             "|---|" + "---|" * len(regs)]
    cells = {(m, b): s for m, b, s in method_cells()}
    for family, method in fams:
        lines.append(f"| `{method}` ({family}) | " + " | ".join(mark[cells[method, p]] for p in regs) + " |")
    lines += ["", "## LLM backends: prompt formats x answer modes (`--prompt`, `--answer`)", "",
              "| backend | prompt format | " + " | ".join(f"`{a}`" for a in answer_modes()) + " |",
              "|---|---|" + "---|" * len(answer_modes())]
    llm = {(b, f, a): s for b, f, a, s in llm_cells()}
    for b in LLM_BACKENDS:
        if b not in regs:
            continue
        for f in prompt_formats(b):
            lines.append(f"| `{b}:` | `{f}` | " + " | ".join(mark[llm[b, f, a]] for a in answer_modes()) + " |")
    lines += thinking_section(fams, regs)
    lines += compared_section()
    lines += ["", "`openai:` sends chat messages (the server applies its template); `--answer constrained` there needs a "
              "vLLM or SGLang server (guided decoding), and `--answer logits` a server that returns `top_logprobs`.",
              "", "## Options", "", "Method options (each family takes those its record declares; `--help` shows the "
              "defaults):", "", "| option | families |", "|---|---|"]
    for name, opt in METHODS.table(strict=False).items():
        lines.append(f"| `{opt.flag}` | " + ", ".join(sorted({s.family for s, _ in opt.owners})) + " |")
    lines += ["", "Backend options:", "", "| backend | what | options |", "|---|---|---|"]
    for prefix, spec in regs.items():
        lines.append(f"| `{prefix}` | {spec.help} | {_flags(spec)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from generated_page import write_or_check

    write_or_check(PAGE, generate, ROOT)
