"""``acurank prompt render`` prints what ``--log-prompts`` records for the same inputs, byte for byte, with no model
call; ``acurank prompt list`` names the formats. The log comes from real runs against a loopback chat server (and,
for ``hf:``, the tiny random Llama's real generation)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ENV, ROOT, acurank
from fake_chat_server import FakeServer

DL19 = ROOT / "sample_runs" / "dl19"
QID = "264014"
SHOTS = json.dumps([{"conversations": [{"role": "user", "value": "Rank [1] mice [2] fleas for: fleas."},
                                       {"role": "assistant", "value": "[2] > [1]"}]}])

#: the prompt's fields of a --log-prompts line, in the order the log writes them
FIELDS = ("qid", "docids", "backend", "format", "counter", "messages", "text", "prompt_tokens", "max_length",
          "answer_tokens")


def _prompt_part(line: str) -> str:
    rec = json.loads(line)
    return json.dumps({k: rec[k] for k in FIELDS if k in rec}, ensure_ascii=False)


def _first_round_from_the_log(log, rendered: list[str]) -> list[str]:
    """The log's lines of the first round: those whose windows render printed (the log is in answer order)."""
    by_docids = {tuple(json.loads(l)["docids"]): _prompt_part(l) for l in reversed(log.read_text().splitlines())}
    return [by_docids.get(tuple(json.loads(r)["docids"]), "(not sent)") for r in rendered]


def _shots(tmp_path):
    path = tmp_path / "shots.json"
    path.write_text(SHOTS)
    return path


CASES = {
    "published": lambda tmp: [],
    "instruction": lambda tmp: ["--instruction", "Prefer passages that give a number of days."],
    "few-shot and a system message": lambda tmp: ["--few-shot", _shots(tmp), "--system-message", "You rank."],
    "docs/templates/scientific-claim.yaml": lambda tmp: ["--prompt", ROOT / "docs" / "templates" / "scientific-claim.yaml"],
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("method", ["acurank", "sw-1"])
def test_render_equals_the_prompt_log_of_the_same_run_byte_for_byte(tmp_path, case, method):
    extra = CASES[case](tmp_path)
    common = [DL19 / "bm25.run", "--method", method, "--reranker", "openai:gpt-4o-mini", *extra]
    log = tmp_path / "prompts.jsonl"
    with FakeServer(lambda q, a: ("ok", 0.0)) as srv:
        acurank("rerank", *common, "--qids", QID, "--base-url", srv.base_url, "--no-cache", "--log-prompts", log,
                "-o", tmp_path / "x.run")
        sent = len(srv.bodies)
    ran = acurank("prompt", "render", *common, "--qid", QID, "-f", "json")
    rendered = ran.stdout.splitlines()
    # acurank's first pass: 5 disjoint windows of 20 over 100 candidates; sw-1's first window: the bottom 20
    assert len(rendered) == (5 if method == "acurank" else 1) and sent > len(rendered)
    assert _first_round_from_the_log(log, rendered) == rendered
    assert all(json.loads(r)["qid"] == QID and len(json.loads(r)["docids"]) == 20 for r in rendered)
    if method == "sw-1":  # the window sliding windows send first is the list's bottom 20, bottom first as presented
        bottom = [l.split()[2] for l in (DL19 / "bm25.run").read_text().splitlines() if l.split()[0] == QID][80:100]
        assert json.loads(rendered[0])["docids"] == bottom


def test_the_nth_window_and_the_text_form(tmp_path):
    ran = acurank("prompt", "render", DL19 / "bm25.run", "--reranker", "openai:gpt-4o-mini", "--qid", QID,
                  "--nth", "3")
    out = ran.stdout
    assert out.startswith(f"# query {QID}, window 3 of 5 in acurank's first round; openai:gpt-4o-mini, format messages")
    assert "--- system ---\nYou are RankLLM" in out and "--- user ---\nI will provide you with 20 passages" in out
    assert "--- the model text" not in out  # a chat endpoint is sent messages; no tokenizer given: no text shown
    every = acurank("prompt", "render", DL19 / "bm25.run", "--reranker", "openai:gpt-4o-mini", "--qid", QID,
                    "-f", "json").stdout.splitlines()
    third = acurank("prompt", "render", DL19 / "bm25.run", "--reranker", "openai:gpt-4o-mini", "--qid", QID,
                    "--nth", "3", "-f", "json").stdout.splitlines()
    assert third == [every[2]]


def test_refusals_are_one_line_before_any_model(tmp_path):
    for args, words in (
        (["--reranker", "simulated"], "reranker 'simulated' reads no prompt"),
        (["--reranker", "minilm"], "prompts are rendered for simulated, hf:, vllm:, openai:"),
        (["--nth", "6"], "--nth 6: query 264014's first round under acurank has 5 windows (1-5)"),
        (["--format", "yaml"], "--format yaml: must be text or json"),
        # held out (stop 100): the flag named as render takes it; a score refused naming its file, as rerank does
        (["--qid", "999"], "--qid names 1 query the run does not have (e.g. 999)"),
        (["--reranker", "simulated"], "reads no prompt with these options"),
        (["RUN", str(tmp_path / "neg.run")], f"{tmp_path / 'neg.run'}: query 264014 doc "),
    ):
        first = [line.split() for line in (DL19 / "bm25.run").read_text().splitlines()[:2]]  # 264014's top two
        (tmp_path / "neg.run").write_text("".join(f"{q} Q0 {d} {r} -{s} x\n" for q, _, d, r, s, _ in first))
        run = args[1] if args[0] == "RUN" else DL19 / "bm25.run"
        extra = ["--topics", DL19 / "topics.tsv", "--corpus", DL19 / "passages.jsonl.gz", "--skip-missing"] if (
            args[0] == "RUN") else []
        args = [] if args[0] == "RUN" else args
        ran = acurank("prompt", "render", run, "--qid", QID, *extra, *args, check=False)
        assert ran.returncode == 2 and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
        assert words in ran.stderr, ran.stderr


def test_prompt_list_names_every_format():
    out = acurank("prompt", "list").stdout
    for name in ("rankzephyr", "rankvicuna", "chat", "messages"):
        assert f"  {name} " in out, out


def test_hf_render_loads_no_weights_and_equals_the_log_of_a_real_generation(tmp_path):
    """hf:: the tokenizer and config only (the weights file removed from a copy renders the same), and the text equals
    what the tiny Llama was sent."""
    pytest.importorskip("transformers")
    import shutil

    from tiny_models import CHAT_TEMPLATE, build_model_dir

    model = build_model_dir(tmp_path / "tiny-llama", CHAT_TEMPLATE)
    args = [DL19 / "bm25.run", "--method", "sw-1", "--reranker", f"hf:{model}", "--prompt", "rankzephyr",
            "--context-size", "1024", "--depth", "20"]
    log = tmp_path / "prompts.jsonl"
    subprocess.run([sys.executable, "-m", "acurank_cli", "rerank", *map(str, args), "--qids", QID, "--device", "cpu",
                    "--no-cache", "--log-prompts", str(log), "-o", str(tmp_path / "x.run")], check=True,
                   capture_output=True, text=True, env={**ENV, "HF_HUB_OFFLINE": "1"})
    weightless = tmp_path / "no-weights"
    shutil.copytree(model, weightless)
    for f in weightless.glob("*.safetensors"):
        f.unlink()
    rendered = acurank("prompt", "render", *[str(a).replace(str(model), str(weightless)) for a in args], "--qid", QID,
                       "-f", "json", env={"HF_HUB_OFFLINE": "1"}).stdout.splitlines()
    assert len(rendered) == 1 and "text" in json.loads(rendered[0])
    expected = json.loads(_first_round_from_the_log(log, rendered)[0])
    got = json.loads(rendered[0])
    assert got.pop("backend") == f"hf:{weightless}" and expected.pop("backend") == f"hf:{model}"
    assert got.pop("counter").endswith("no-weights") and expected.pop("counter").endswith("tiny-llama")
    assert got == expected and got["text"].startswith("<|system|>\n")
