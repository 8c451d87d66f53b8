"""Seeded fuzzing of every input the CLI reads: each case ends in exit 0 with a valid run, or exit 2
with one line that names an input file. Never a traceback, never a hang.

Mutated: TREC runs, topics, qrels, corpora, and RankGPT / AcuRank / RankLLM candidate files; the
classes the reliability issue listed (unreadable files, huge JSON integers, deep nesting, zero
candidates, extreme or non-finite scores, wrong JSON types, duplicate docids, empty / whitespace /
NUL ids, a byte-order mark, conflicting duplicates, truncation, binary junk) and random line edits.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import signal
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path


from acurank_cli.cli import run as cli_run
from acurank_cli.io.runs import read_run

SEED = 20261122
CASES = int(os.environ.get("ACURANK_FUZZ_CASES", "320"))
QUERIES, DEPTH = 3, 25


class Hang(Exception):
    pass


def _base(sample: Path) -> dict[str, str]:
    """Small, valid inputs of every kind, built from the DL19 sample."""
    lines = (sample / "dl19" / "bm25.run").read_text().splitlines()
    qids = list(dict.fromkeys(l.split()[0] for l in lines))[:QUERIES]
    run = [l for l in lines if l.split()[0] in qids and int(l.split()[3]) <= DEPTH]
    topics = {l.split("\t")[0]: l.split("\t")[1] for l in (sample / "dl19" / "topics.tsv").read_text().splitlines()}
    qrels = [l for l in (sample / "dl19" / "qrels.txt").read_text().splitlines() if l.split()[0] in qids]
    wanted = {l.split()[2] for l in run}
    docs = {}
    with gzip.open(sample / "dl19" / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["_id"] in wanted:
                docs[rec["_id"]] = rec
    per_q: dict[str, list[tuple[str, float]]] = {}
    for l in run:
        q, _, d, _, s, _ = l.split()
        per_q.setdefault(q, []).append((d, float(s)))
    rankgpt = [{"query": topics[q], "hits": [{"qid": q, "docid": d, "score": s, "content": docs[d]["text"]}
                                             for d, s in c]} for q, c in per_q.items()]
    acur = [{"qid": q, "q_text": topics[q], "bm25_results": [{"pid": d, "bm25_score": s, "text": docs[d]["text"]}
                                                             for d, s in c],
             "qrels": {l.split()[2]: int(l.split()[3]) for l in qrels if l.split()[0] == q}} for q, c in per_q.items()]
    rankllm = [{"query": {"qid": q, "text": topics[q]},
                "candidates": [{"docid": d, "score": s, "doc": {"segment": docs[d]["text"]}} for d, s in c]}
               for q, c in per_q.items()]
    return {
        "run": "\n".join(run) + "\n",
        "topics": "".join(f"{q}\t{topics[q]}\n" for q in qids),
        "qrels": "\n".join(qrels) + "\n",
        "corpus": "".join(json.dumps(docs[d]) + "\n" for d in sorted(docs)),
        "rankgpt": json.dumps(rankgpt),
        "acurank": "".join(json.dumps(r) + "\n" for r in acur),
        "rankllm": "".join(json.dumps(r) + "\n" for r in rankllm),
    }


BAD_NUMBERS = ["nan", "inf", "-inf", "-1", "0", "1.7e308", "1e-300", "5e-324", "abc", "", "1e400", "0x10"]
BAD_IDS = ["", " ", "a b", "x\x00y", "\t", "q\u200bq", "\u00a0"]
JSON_VALUES = ["[]", '"s"', "7", "null", "{}", "true", "1" * 5000, "[" * 50000 + "]" * 50000, "-0.0", "1e999"]


def _mutate_text(text: str, rng: random.Random, kind: str) -> str | bytes:
    lines = text.splitlines(keepends=True)
    op = rng.choice(["delete", "duplicate", "swap", "truncate", "junk", "field", "id", "bom", "nul", "empty",
                     "blank", "crlf", "json_value", "json_number", "json_key"])
    if op == "delete" and lines:
        del lines[rng.randrange(len(lines))]
    elif op == "duplicate" and lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i] if rng.random() < 0.5 else lines[i].replace("1", "2", 1))
    elif op == "swap" and len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "truncate":
        return text[: rng.randrange(len(text) + 1)]
    elif op == "junk":
        cut = rng.randrange(len(text) + 1)
        return text[:cut].encode() + bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) + text[cut:].encode()
    elif op == "field" and lines:
        i = rng.randrange(len(lines))
        parts = lines[i].rstrip("\n").split(" " if kind in ("run", "qrels") else "\t")
        parts[rng.randrange(len(parts))] = rng.choice(BAD_NUMBERS)
        lines[i] = (" " if kind in ("run", "qrels") else "\t").join(parts) + "\n"
    elif op == "id" and lines:
        i = rng.randrange(len(lines))
        parts = lines[i].rstrip("\n").split(" " if kind in ("run", "qrels") else "\t")
        parts[rng.choice([0, min(2, len(parts) - 1)])] = rng.choice(BAD_IDS)
        lines[i] = (" " if kind in ("run", "qrels") else "\t").join(parts) + "\n"
    elif op == "bom":
        return "\ufeff" + text
    elif op == "nul" and lines:
        i = rng.randrange(len(lines))
        lines[i] = lines[i][: len(lines[i]) // 2] + "\x00" + lines[i][len(lines[i]) // 2 :]
    elif op == "empty":
        return ""
    elif op == "blank":
        return "\n\n  \n"
    elif op == "crlf":
        return text.replace("\n", "\r\n")
    elif op == "json_value":  # replace some JSON value by one of another type
        values = [m for m in range(len(text)) if text[m] == ":"]
        if values:
            i = rng.choice(values)
            end = i + 1
            depth = 0
            while end < len(text) and (depth > 0 or text[end] not in ",}]"):
                depth += text[end] in "[{"
                depth -= text[end] in "]}"
                end += 1
            return text[: i + 1] + " " + rng.choice(JSON_VALUES) + text[end:]
    elif op == "json_number":  # a score or id number made extreme
        import re

        nums = list(re.finditer(r"(?<=: )-?\d+(\.\d+)?([eE][-+]?\d+)?", text))
        if nums:
            m = rng.choice(nums)
            return text[: m.start()] + rng.choice(["1e308", "1.7e308", "1e-300", "5e-324", "-5", "0", "1" * 4400,
                                                   "NaN", "Infinity"]) + text[m.end():]
    elif op == "json_key":
        for key in ("hits", "bm25_results", "candidates", "qrels", "score", "docid", "pid", "query", "q_text",
                    "segment", "contents"):
            if f'"{key}"' in text and rng.random() < 0.3:
                return text.replace(f'"{key}"', f'"{key}_x"', 1)
        return text.replace('"score": ', '"score": [', 1).replace(', "content"', '], "content"', 1)
    return "".join(lines)


def _valid_run(path: Path) -> None:
    runs = read_run(path)  # 6 columns, finite scores, ids without whitespace, no docid twice per query
    for cands in runs.values():
        scores = [c.score for c in cands]
        assert scores == sorted(scores, reverse=True)


def _cases(base: dict[str, str], rng: random.Random):
    commands = [
        ("rerank", "run", ["--method", "acurank", "--reranker", "simulated"]),
        ("rerank", "run", ["--method", "acurank-9", "--reranker", "simulated"]),
        ("baseline", "run", ["--method", "sw-1", "--reranker", "simulated"]),
        ("baseline", "run", ["--method", "ts-5-2-2-1", "--reranker", "simulated"]),
        ("rerank", "rankgpt", ["--method", "acurank", "--reranker", "simulated"]),
        ("rerank", "acurank", ["--method", "acurank", "--reranker", "simulated"]),
        ("rerank", "rankllm", ["--method", "acurank-9", "--reranker", "simulated"]),
        ("eval", "run", []),
    ]
    for n in range(CASES):
        command, main, extra = commands[n % len(commands)]
        files = dict(base)
        target = rng.choice([main, main, main, "topics", "qrels", "corpus"] if main == "run" else [main, main, "qrels"])
        special = rng.random()
        yield n, command, main, extra, files, target, special


def test_fuzzed_inputs_exit_0_with_a_valid_run_or_2_with_one_line(sample, tmp_path, capsys):
    rng = random.Random(SEED)
    base = _base(sample)
    totals = {"cases": 0, "exit 0": 0, "exit 2": 0, "tracebacks": 0}
    failures = []

    def on_alarm(signum, frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        for n, command, main, extra, files, target, special in _cases(base, rng):
            case = tmp_path / f"c{n}"
            case.mkdir()
            paths = {}
            for kind, text in files.items():
                paths[kind] = case / f"{kind}.txt"
                data = _mutate_text(text, rng, kind) if kind == target else text
                if special < 0.04 and kind == target:
                    data = text  # unreadable file
                if isinstance(data, bytes):
                    paths[kind].write_bytes(data)
                else:
                    paths[kind].write_text(data, encoding="utf-8")
                if special < 0.04 and kind == target:
                    os.chmod(paths[kind], 0)
                elif 0.04 <= special < 0.06 and kind == target:
                    gz = paths[kind].with_suffix(".gz")
                    gz.write_bytes(gzip.compress(paths[kind].read_bytes())[: rng.randrange(10, 60)])
                    paths[kind] = gz
            out = case / "out.run"
            if command == "eval":
                argv = ["eval", str(paths["run"]), "--qrels", str(paths["qrels"]), "--format", "tsv"]
            else:
                argv = [command, str(paths[main]), *extra, "--qrels", str(paths["qrels"]), "-o", str(out),
                        "--quiet", "--no-cache"]
                if main == "run":
                    argv += ["--topics", str(paths["topics"]), "--corpus", str(paths["corpus"])]
            stdout, stderr = io.StringIO(), io.StringIO()
            code = None
            signal.alarm(30)
            try:
                with redirect_stdout(stdout), redirect_stderr(stderr):
                    sys.argv = ["acurank", *argv]
                    cli_run()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Hang:
                failures.append((n, argv, "hang"))
                continue
            except BaseException as exc:  # noqa: BLE001 - a traceback would have escaped
                totals["tracebacks"] += 1
                failures.append((n, argv, f"{type(exc).__name__}: {exc}"[:300]))
                continue
            finally:
                signal.alarm(0)
                for p in paths.values():
                    if p.exists():
                        os.chmod(p, 0o644)
            totals["cases"] += 1
            err = [l for l in stderr.getvalue().splitlines() if l.startswith("acurank: error:")]
            if code == 0:
                totals["exit 0"] += 1
                if command != "eval":
                    try:
                        _valid_run(out)
                    except Exception as exc:  # noqa: BLE001
                        failures.append((n, argv, f"exit 0 but invalid run: {exc}"))
            elif code == 2:
                totals["exit 2"] += 1
                names = {p.name for p in paths.values()}
                if len(err) != 1 or not any(name in err[0] for name in names) or "Traceback" in stderr.getvalue():
                    failures.append((n, argv, f"exit 2 but not one line naming a file: {stderr.getvalue()!r}"[:400]))
            else:
                failures.append((n, argv, f"exit {code}: {stderr.getvalue()!r}"[:400]))
    finally:
        signal.signal(signal.SIGALRM, old)
    with capsys.disabled():
        print(f"\nfuzz: {totals}")
    assert not failures, "\n".join(map(str, failures[:20]))
    assert totals["cases"] == CASES and totals["exit 0"] > 0 and totals["exit 2"] > 0
