"""Long documents whose answer sits at the start, in the middle or at the end (issue 81, item 3).

    PYTHONPATH=. python benchmarks/long_answers.py [--work DIR] [--queries N] [--max-passages 80] [--passages 150:75]

The corpus is built from DL19 (sample_runs/dl19), deterministically (seed 81). For each judged query:

- the answer: the query's first passage in BM25 order judged 3 (else 2);
- seven documents of 2,000-5,000 words (uniform), each made of whole MS MARCO passages:
  - one answer document: off-topic filler (passages of the other queries judged 0 for theirs) with the answer
    passage at the start (queries 0, 3, 6, ...), in the middle (1, 4, ...) or as the last words (2, 5, ...);
  - six distractors: the same filler with three of the query's own passages judged 0 spread through it
    (on-topic, not the answer: what BM25 would bring up);
- a first-stage run in which the answer document is LAST: scores 20, 19, ..., 14, the answer document 14 (the
  trial's 7/7: every passage of the answer document starts with the lowest prior).

The qrels judge the answer document 3 and the distractors 0. Each configuration is one ``acurank rerank`` with the
MiniLM reranker. First MiniLM's own view: every passage in one window (``sw-1 --window 100000``; MiniLM scores each
passage on its own); a query counts where that puts the answer document first (on the others MiniLM prefers a
distractor's on-topic passage, and no method over MiniLM should put the answer first). Per configuration: how many
of those queries put the answer document at #1, its mean rank, the calls a query, how often the reported best
passage (the stats' ``passages.best``) holds at least half of the answer's words; and over every query, how often
the top document is MiniLM's own top. ``--before REV --before-tree DIR`` adds the acurank methods run from a checkout
of REV. Results: benchmarks/results/long_answers.json (BENCHMARKS.md section 27).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from acurank_cli.io.run_files import read_stats  # noqa: E402
from acurank_cli.io.runs import read_run  # noqa: E402

DL19 = ROOT / "sample_runs" / "dl19"
DOCS = 7
WHERE = ("start", "middle", "end")


def _passages() -> dict[str, str]:
    with gzip.open(DL19 / "passages.jsonl.gz", "rt", encoding="utf-8") as f:
        return {r["_id"]: r["text"] for r in map(json.loads, f)}


def _qrels() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in (DL19 / "qrels.txt").read_text().splitlines():
        qid, _, docid, grade = line.split()
        out.setdefault(qid, {})[docid] = int(grade)
    return out


def _run_order() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (DL19 / "bm25.run").read_text().splitlines():
        qid, _, docid, *_ = line.split()
        out.setdefault(qid, []).append(docid)
    return out


def build(work: Path, queries: int | None = None) -> dict:
    """The corpus, topics, run and qrels under ``work``; returns each query's answer and where it sits."""
    rng = random.Random(81)
    texts, qrels, order = _passages(), _qrels(), _run_order()
    topics = dict(line.split("\t", 1) for line in (DL19 / "topics.tsv").read_text().splitlines())
    qids = [q for q in order if q in qrels and any(qrels[q].get(d, 0) >= 2 for d in order[q])]
    qids = qids[:queries] if queries else qids
    corpus, run, judged, answers = [], [], [], {}
    for i, qid in enumerate(qids):
        best = max(qrels[qid].get(d, 0) for d in order[qid])
        answer = next(d for d in order[qid] if qrels[qid].get(d, 0) == best)
        own_zero = [d for d in order[qid] if qrels[qid].get(d) == 0 and d in texts]
        filler = [d for q in qids if q != qid for d in order[q][:60]
                  if qrels.get(q, {}).get(d) == 0 and d in texts and d not in qrels[qid]]
        where = WHERE[i % 3]
        for j in range(DOCS):
            words = rng.randint(2000, 5000)
            body: list[str] = []
            while sum(len(t.split()) for t in body) < words:
                body.append(texts[rng.choice(filler)])
            docid = f"{qid}_d{j}"
            if j == DOCS - 1:  # the answer document: last in the first stage
                at = {"start": 0, "middle": len(body) // 2, "end": len(body)}[where]
                body.insert(at, texts[answer])
                first = sum(len(t.split()) for t in body[:at])  # the answer's words in the document
                answers[qid] = {"docid": docid, "where": where, "words": [first, first + len(texts[answer].split())]}
                judged.append(f"{qid} 0 {docid} 3")
            else:
                for d in rng.sample(own_zero, min(3, len(own_zero))):
                    body.insert(rng.randrange(len(body) + 1), texts[d])
                judged.append(f"{qid} 0 {docid} 0")
            corpus.append({"_id": docid, "title": "", "text": " ".join(body)})
            run.append(f"{qid} Q0 {docid} {j + 1} {20 - j} built")
    work.mkdir(parents=True, exist_ok=True)
    with gzip.open(work / "corpus.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in corpus)
    (work / "topics.tsv").write_text("".join(f"{q}\t{topics[q]}\n" for q in qids))
    (work / "first.run").write_text("\n".join(run) + "\n")
    (work / "qrels.txt").write_text("\n".join(judged) + "\n")
    (work / "answers.json").write_text(json.dumps(answers, indent=1))
    return answers


def measure(name: str, flags: list[str], args, answers: dict, checkout: Path = ROOT) -> dict:
    out = args.work / f"{name}.run"
    command = [sys.executable, "-P", "-m", "acurank_cli", "rerank", str(args.work / "first.run"), "--reranker", "minilm",
               "--corpus", str(args.work / "corpus.jsonl.gz"), "--topics", str(args.work / "topics.tsv"),
               "-o", str(out), "-q", "--overwrite", *flags]
    started = time.perf_counter()
    if not out.exists() or args.again:
        subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(checkout),
                                                          "ACURANK_CACHE": str(args.work / "calls.sqlite")})
    wall = time.perf_counter() - started
    ranking = _orders(out)
    stats = read_stats(out.with_suffix(".stats.jsonl"))
    rows = {}
    for qid, a in answers.items():
        rank = ranking[qid].index(a["docid"]) + 1
        s = stats[qid]
        span = s.passages.best.get(a["docid"]) if s.passages is not None else None
        start, end = a["words"]  # the best passage holds the answer: at least half of its words
        holds = span is not None and min(end, span.end) - max(start, span.start) >= (end - start) / 2
        rows[qid] = {"where": a["where"], "rank": rank, "calls": s.calls, "best_holds_answer": holds,
                     "best_passage": None if span is None else span.index}
    by = {}
    for where in (*WHERE, "all"):
        r = [v for v in rows.values() if where in ("all", v["where"])]
        by[where] = {"queries": len(r), "at_1": sum(v["rank"] == 1 for v in r),
                     "mean_rank": round(sum(v["rank"] for v in r) / max(1, len(r)), 2),
                     "best_holds": sum(v["best_holds_answer"] for v in r),
                     "calls": round(sum(v["calls"] for v in r) / max(1, len(r)), 2)}
    return {"name": name, "flags": " ".join(flags), "wall_s": round(wall, 1), "by_where": by, "queries": rows}


def _orders(path: Path) -> dict[str, list[str]]:
    return {q: [d for d, _ in sorted(s.items(), key=lambda x: -x[1])] for q, s in read_run(path).scores().items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=ROOT / "out" / "long_answers")
    ap.add_argument("--queries", type=int, default=None)
    ap.add_argument("--passages", default="150:75")
    ap.add_argument("--max-passages", type=int, default=80)
    ap.add_argument("--methods", default="acurank,sw-1")
    ap.add_argument("--again", action="store_true")
    ap.add_argument("--before", default=None, help="a commit to compare with (its worktree: --before-tree)")
    ap.add_argument("--before-tree", type=Path, default=None, help="a checkout of --before")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "long_answers.json")
    args = ap.parse_args()
    answers = build(args.work, args.queries)
    passages = ["--passages", args.passages, "--max-passages", str(args.max_passages)]
    # the reranker's own view: every passage in one window (MiniLM scores each passage on its own), so a query
    # counts only where MiniLM itself puts the answer document first
    oracle = measure("oracle", ["--method", "sw-1", "--window", "100000", *passages], args, answers)
    kept = {q: a for q, a in answers.items() if oracle["queries"][q]["rank"] == 1}
    print(f"{len(kept)} of {len(answers)} queries: MiniLM, reading every passage in one window, puts the answer "
          "document first", flush=True)
    results = [{"name": "oracle", "queries_kept": sorted(kept), "dropped": sorted(set(answers) - set(kept))}]
    runs = [(f"{m}", ["--method", m, *passages], ROOT) for m in args.methods.split(",")]
    runs += [(f"{m}@{args.before[:7]}", ["--method", m, *passages], args.before_tree)
             for m in args.methods.split(",") if args.before and m.startswith("acurank")]
    for name, flags, checkout in runs:
        r = measure(name.replace("@", "-at-"), flags, args, kept, checkout)
        r["name"] = name
        # every query, kept or not: the top document is MiniLM's own top (the oracle's), the answer's mean rank
        ranked, best = _orders(args.work / f"{name.replace('@', '-at-')}.run"), _orders(args.work / "oracle.run")
        r["all_queries"] = {"queries": len(answers), "top_is_oracles": sum(ranked[q][0] == best[q][0] for q in answers),
                            "answer_mean_rank": round(sum(ranked[q].index(a["docid"]) + 1 for q, a in answers.items())
                                                      / len(answers), 2)}
        results.append(r)
        print(f"{name:24} " + "  ".join(f"{w}: {b['at_1']}/{b['queries']} at #1, mean rank {b['mean_rank']}, "
                                        f"best passage holds {b['best_holds']}, calls {b['calls']}"
                                        for w, b in r["by_where"].items())
              + f"  | all {r['all_queries']['queries']} queries: top = MiniLM's own top "
                f"{r['all_queries']['top_is_oracles']}, answer's mean rank {r['all_queries']['answer_mean_rank']}",
              flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
