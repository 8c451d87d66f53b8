"""No write touches a file the command reads: every writer flag of every command, aimed at every input the command
reads, through a plain path, a ``./`` path, a symbolic link and a hard link, is refused (exit 2, one line naming both)
and the input's bytes are unchanged; two outputs into one file are refused; an existing file is replaced only with
``--overwrite``. The cases run in this process (the CLI's own entry point).

``python tests/io/test_clobber.py`` prints the table of every case (command, writer, input, path kind, exit, unchanged).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the helpers in tests/
from conftest import SAMPLE, acurank, small_run  # noqa: E402

KINDS = ("plain", "./", "symlink", "hardlink")
SIM = ("--reranker", "simulated", "--no-cache")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _workspace(folder: Path) -> dict[str, Path]:
    """Two DL19 queries with their topics, passages, qrels, a qids file, stats, a trace, shards and a candidate file."""
    folder.mkdir(parents=True, exist_ok=True)
    run, qids = small_run(SAMPLE, folder, queries=2, depth=20)
    files = {"run": run}
    for name, src in (("topics", "topics.tsv"), ("corpus", "passages.jsonl.gz"), ("qrels", "qrels.txt")):
        files[name] = folder / f"in-{src}"
        shutil.copy(SAMPLE / "dl19" / src, files[name])
    files["qids"] = folder / "qids.txt"
    files["qids"].write_text("\n".join(qids) + "\n")
    common = ("--qrels", files["qrels"], "--topics", files["topics"], "--corpus", files["corpus"], *SIM)
    files["done"] = folder / "done.run"
    acurank("rerank", run, *common, "--method", "acurank", "-o", files["done"], "--trace", folder / "t.jsonl")
    files["stats"], files["trace"] = folder / "done.stats.jsonl", folder / "t.jsonl"
    for i in (1, 2):
        files[f"part{i}"] = folder / f"part{i}.run"
        acurank("baseline", run, *common, "--method", "sw-1", "--shard", f"{i}/2", "-o", files[f"part{i}"])
    topics = dict(line.split("\t", 1) for line in files["topics"].read_text().splitlines())
    files["cands"] = folder / "cands.jsonl"
    files["cands"].write_text("".join(json.dumps({"qid": q, "q_text": topics[q], "bm25_results": [
        {"pid": line.split()[2], "bm25_score": float(line.split()[4]), "text": "t"}
        for line in run.read_text().splitlines() if line.split()[0] == q]}) + "\n" for q in qids))
    return files


def _alias(target: Path, kind: str, folder: Path, n: int) -> str:
    """The path a user would type for ``target``: itself, ``./`` relative to the working folder, a symlink or a hard
    link to it."""
    if kind == "plain":
        return str(target)
    if kind == "./":
        return "./" + os.path.relpath(target, folder)
    link = folder / f"alias{n}{target.suffix}"
    if kind == "symlink":
        link.symlink_to(target)
    else:
        os.link(target, link)
    return str(link)


def _cases(f: dict[str, Path]) -> list[tuple[str, str, str, list]]:
    """(command, writer flag, input name, argv with {} where the writer's path goes) for every writer x input."""
    rr = ["--qrels", f["qrels"], "--topics", f["topics"], "--corpus", f["corpus"], "--qids", f"@{f['qids']}", *SIM]
    inputs = {"RUN": f["run"], "--qrels": f["qrels"], "--topics": f["topics"], "--corpus": f["corpus"], "--qids": f["qids"]}
    cases = []
    for command, method in (("rerank", "acurank"), ("baseline", "sw-1")):
        for flag in ("--output", "--stats", "--trace", "--cache") if command == "rerank" else ("--output", "--stats"):
            extra = ["--no-cache"] if flag != "--cache" else []
            for name in inputs:
                argv = [command, f["run"], "--method", method, *[a for a in rr if a != "--no-cache"], *extra, flag, "{}"]
                cases.append((command, flag, name, inputs[name], argv))
    ev = {"RUN": f["done"], "--qrels": f["qrels"], "--qids": f["qids"], "--stats": f["stats"], "--against": f["run"]}
    for name, path in ev.items():
        cases.append(("eval", "--output", name, path, ["eval", f["done"], "--qrels", f["qrels"], "--qids", f"@{f['qids']}",
                                                       "--stats", f["stats"], "--against", f["run"], "-o", "{}"]))
    for name in ("PART", "stats beside PART"):
        path = f["part1"] if name == "PART" else f["part1"].with_name("part1.stats.jsonl")
        cases.append(("merge", "--output", name, path, ["merge", f["part1"], f["part2"], "-o", "{}"]))
    report = ["--run", f"dl19:acurank={f['done']}", "--qrels", f"dl19={f['qrels']}"]
    for sub, flag in (("table", "--output"), ("efficiency", "--output"), ("pareto", "--plot"), ("allocation", "--plot")):
        for name, path in (("--run", f["done"]), ("--qrels", f["qrels"]), ("stats beside --run", f["stats"])):
            suffix = ["--plot", f["done"].with_name("p.png")] if sub == "pareto" and flag != "--plot" else []
            cases.append((f"report {sub}", flag, name, path, ["report", sub, *report, *suffix, flag, "{}"]))
    qid = json.loads(f["trace"].read_text().splitlines()[0])["qid"]
    for flag in ("--output", "--plot"):
        cases.append(("report trace", flag, "FILE", f["trace"], ["report", "trace", f["trace"], "--qid", qid, flag, "{}"]))
    for name, path in (("--topics", f["topics"]),):
        cases.append(("retrieve", "--output", name, path, ["retrieve", "--index", f["run"].parent, "--topics", f["topics"],
                                                          "-o", "{}"]))
    for name, path in (("CANDIDATES", f["cands"]), ("--qrels", f["qrels"])):
        cases.append(("convert", "--out-dir", name, path, ["convert", f["cands"], "--qrels", f["qrels"], "--out-dir", "{}"]))
    return cases


def matrix(tmp: Path) -> list[dict]:
    """Run every case; one row each."""
    f = _workspace(tmp / "ws")
    rows, n = [], 0
    for command, flag, name, target, argv in _cases(f):
        for kind in KINDS:
            n += 1
            before = {p: _sha(p) for p in f.values() if p.is_file()}
            if command == "convert":  # --out-dir takes a folder: the file it would overwrite is the input, by its name
                folder = tmp / f"conv{n}"
                folder.mkdir()
                out = folder / ("bm25.run" if name == "CANDIDATES" else "qrels.txt")
                if kind == "symlink":
                    out.symlink_to(target)
                elif kind == "hardlink":
                    os.link(target, out)
                else:
                    shutil.copy(target, out)  # a plain copy is another file: refused only because it exists
                path = str(folder) if kind != "./" else "./" + os.path.relpath(folder, Path.cwd())
            else:
                path = _alias(target, kind, tmp / "ws", n) if kind != "./" else "./" + os.path.relpath(target, Path.cwd())
            ran = acurank(*[path if a == "{}" else a for a in argv], check=False)
            after = {p: _sha(p) for p in before}
            rows.append({"command": command, "writer": flag, "input": name, "path": kind, "exit": ran.returncode,
                         "unchanged": after == before, "message": ran.stderr.strip().splitlines()[-1] if ran.stderr else ""})
            for p in (tmp / "ws").glob("alias*"):
                p.unlink()
    return rows


def test_no_writer_touches_an_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = matrix(tmp_path)
    assert len(rows) >= 200
    bad = [r for r in rows if r["exit"] != 2 or not r["unchanged"]]
    assert bad == [], bad[:5]
    for r in rows:  # one line naming the writer (or, for convert, the file in its folder) and what it would clobber
        assert r["message"].startswith("acurank: error: "), r
        assert (r["writer"] in r["message"] or r["command"] == "convert"), r


@pytest.mark.parametrize("second", ["--stats", "--trace"])
def test_two_outputs_into_one_file_are_refused(sample, tmp_path, second):
    run, _ = small_run(sample, tmp_path, queries=1, depth=20)
    qrels = sample / "dl19" / "qrels.txt"
    for alias in ("same.run", "./same.run"):
        ran = acurank("rerank", run, "--qrels", qrels, *SIM, "-o", tmp_path / "same.run", second, tmp_path / alias,
                      check=False)
        assert ran.returncode == 2 and "are the same file" in ran.stderr and not (tmp_path / "same.run").exists()


def test_existing_outputs_need_overwrite_and_are_replaced_whole(sample, tmp_path):
    run, _ = small_run(sample, tmp_path, queries=2, depth=20)
    qrels = sample / "dl19" / "qrels.txt"
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    for argv in (["eval", run, "--qrels", qrels, "-o", notes], ["rerank", run, "--qrels", qrels, *SIM, "--stats", notes],
                 ["report", "table", run, "--qrels", qrels, "-o", notes]):
        ran = acurank(*argv, check=False)
        assert ran.returncode == 2 and "exists: pass --overwrite" in ran.stderr and notes.read_text() == "my notes\n"
    acurank("eval", run, "--qrels", qrels, "-o", notes, "--overwrite")
    assert notes.read_text().startswith("ndcg_cut_10\tall\t")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    # a device is written as it is (never replaced, never "exists")
    assert acurank("eval", run, "--qrels", qrels, "-o", "/dev/null").returncode == 0 and Path("/dev/null").exists()


def test_index_never_replaces_its_input_nor_an_index_without_overwrite(tmp_path):
    """``acurank index``'s output is a folder whose contents are replaced: an input in it (or it) is refused, and so
    is a folder that holds something, without --overwrite (before the JVM starts)."""
    corpus = tmp_path / "c" / "corpus.jsonl"
    corpus.parent.mkdir()
    corpus.write_text('{"id": "d1", "contents": "tiger"}\n')
    before = _sha(corpus)
    for index in (corpus.parent, tmp_path / "c" / ".", tmp_path):
        ran = acurank("index", "--input", corpus, "--index", index, check=False)
        assert ran.returncode == 2 and "--input" in ran.stderr and "--index" in ran.stderr, ran.stderr
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "segments_1").write_text("x")
    ran = acurank("index", "--input", corpus, "--index", tmp_path / "old", check=False)
    assert ran.returncode == 2 and "--overwrite" in ran.stderr, ran.stderr
    assert _sha(corpus) == before and (tmp_path / "old" / "segments_1").read_text() == "x"


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        found = matrix(Path(tmp))
    print("| command | writer | input | path | exit | input unchanged |")
    print("|---|---|---|---|---|---|")
    for r in found:
        print(f"| {r['command']} | {r['writer']} | {r['input']} | {r['path']} | {r['exit']} | "
              f"{'yes' if r['unchanged'] else 'NO'} |")
    print(f"\n{len(found)} cases, {sum(r['exit'] == 2 and r['unchanged'] for r in found)} refused with the input unchanged")
