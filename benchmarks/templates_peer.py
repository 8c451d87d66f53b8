"""acurank's prompts from RankLLM's template files against RankLLM 0.26's own rendering of the same files.

For every listwise template in RankLLM 0.26's wheel (``rank_llm/rerank/prompt_templates``: single-turn and the
multi-turn RankGPT), for acurank's own worked template (docs/templates/) and for shapes the wheel does not ship
(benchmarks/peer_side/shapes/), without and with few-shot examples (RankLLM's few-shot file format, 2 examples):

* **messages**: both tools rerank the same DL19 queries (BM25 top 100, window 20, step 10: acurank's ``sw-1``,
  RankLLM's sliding window) against one loopback OpenAI-compatible server, which answers every window with its
  presented order in the template's form (so both tools see the same windows). acurank's prompts are its
  ``--log-prompts`` lines (``acurank baseline --reranker openai:DIR --prompt T.yaml``), RankLLM's its invocation
  history (``RankListwiseOSLLM(base_url=...)``, in its own venv, ``make setup-peer``);
* **text**: the model text of the same windows, acurank's as its ``hf:`` backend builds it (the tokenizer's chat
  template over the messages, ftfy-fixed) and RankLLM's from its ``create_prompt`` on its in-process path.

The model is the test suite's tiny random Llama (its tokenizer and chat template; no weights are run). A large
context (16,384) keeps both tools' fitting loops out of it: the comparison is of the rendering. Writes
benchmarks/results/templates_peer.json and prints the table (windows equal / windows, per template).

    .venv/bin/python benchmarks/templates_peer.py [--qids 264014,104861]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from common import ROOT, save, table  # noqa: E402

PEER_PYTHON = ROOT / ".venv-peer" / "bin" / "python"
SIDE = Path(__file__).resolve().parent / "peer_side" / "templates_side.py"
DATA = ROOT / "sample_runs" / "dl19"
CONTEXT = 16384
FEW_SHOT = [
    {"conversations": [
        {"role": "user", "value": "I will provide you with 2 passages. Rank them for the query: cat food.\n[1] Dogs "
                                  "bark.\n[2] Cats eat fish.\nRank the 2 passages."},
        {"role": "assistant", "value": "[2] > [1]"}]},
    {"conversations": [
        {"role": "user", "value": "Rank for the query: capital of France.\n[1] Paris is the capital of France.\n[2] "
                                  "Lyon has a river."},
        {"role": "assistant", "value": "[1] > [2]"}]},
]


def peer_templates() -> list[Path]:
    """RankLLM 0.26's listwise template files, from the peer's venv."""
    found = subprocess.run([str(PEER_PYTHON), "-c", "import rank_llm.rerank.prompt_templates as t, os; "
                            "print(os.path.dirname(t.__file__))"], capture_output=True, text=True, check=True)
    folder = Path(found.stdout.strip())
    return sorted(p for p in folder.glob("*.yaml") if "listwise" in p.read_text(encoding="utf-8").split("\n")[0] or
                  re.search(r"^method:\s*\"?(single|multi)turn_listwise", p.read_text(encoding="utf-8"), re.M))


class Identity:
    """A loopback chat server answering each window with its presented order, in the current template's form."""

    def __init__(self):
        self.form = " > ".join(f"[{i}]" for i in range(1, 21))
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # /v1/models
                self._send({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._send({"id": "x", "object": "chat.completion", "created": 0, "model": "tiny",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": owner.form, "reasoning": None}}],
                            "usage": {"prompt_tokens": 100, "completion_tokens": 60, "total_tokens": 160}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def acurank_messages(model: Path, url: str, template: Path, few_shot: Path | None, qids: str, work: Path) -> list:
    log = work / "acurank.prompts.jsonl"
    log.unlink(missing_ok=True)
    extra = ["--few-shot", str(few_shot), "--few-shot-count", "2"] if few_shot else []
    subprocess.run([str(ROOT / ".venv" / "bin" / "acurank"), "baseline", str(DATA / "bm25.run"), "--method", "sw-1",
                    "--reranker", f"openai:{model}", "--base-url", url, "--prompt", str(template), *extra,
                    "--qids", qids, "--depth", "100", "--topics", str(DATA / "topics.tsv"),
                    "--corpus", str(DATA / "passages.jsonl.gz"), "--context-size", str(CONTEXT),
                    "--log-prompts", str(log), "--no-cache", "--quiet", "-o", str(work / "acurank.run"),
                    "--overwrite"], check=True, capture_output=True, text=True)
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def acurank_texts(model: Path, template: Path, few_shot: Path | None, calls: list) -> list[tuple[str, str]]:
    """(qid, text) for each logged window: what acurank's hf: backend would feed the model."""
    from acurank_cli.io.collection_files import iter_corpus
    from acurank_cli.rerankers.backends.checkpoints import resolve_model
    from acurank_cli.rerankers.listwise.prompt_builder import prompt_builder
    from acurank_cli.rerankers.backends.hf import HFOptions
    from acurank_cli.rerankers.listwise.templates import template_of
    from transformers import AutoTokenizer

    options = HFOptions(prompt_format=str(template), few_shot=str(few_shot) if few_shot else None,
                        few_shot_count=2 if few_shot else None, context_size=CONTEXT)
    fmt, tpl = template_of(options, "hf")
    tok = AutoTokenizer.from_pretrained(model)
    builder = prompt_builder(resolve_model(str(model), "hf"), tok, prompt_format=fmt, context_size=CONTEXT,
                             max_positions=None, double_bos=False, backend="hf", options=options, template=tpl)
    topics = dict(line.rstrip("\n").split("\t", 1) for line in open(DATA / "topics.tsv", encoding="utf-8"))
    wanted = {d for call in calls for d in call["docids"]}
    corpus = {doc.docid: doc for doc in iter_corpus(DATA / "passages.jsonl.gz") if doc.docid in wanted}
    scores = {}
    for line in open(DATA / "bm25.run", encoding="utf-8"):
        qid, _, docid, _, score, _ = line.split()
        scores[(qid, docid)] = float(score)
    out = []
    for call in calls:
        docs = tuple(corpus[d] for d in call["docids"])
        window_scores = tuple(scores[(call["qid"], d)] for d in call["docids"])
        out.append((call["qid"], builder.build(topics[call["qid"]], docs, None, window_scores).text))
    return out


def compare(template: Path, letters: bool, few_shot: Path | None, model: Path, server: Identity, qids: str,
            work: Path) -> dict:
    ids = [chr(64 + i) if letters else str(i) for i in range(1, 21)]
    text = template.read_text(encoding="utf-8")
    form = re.search(r"^# answer form: (.*)$", text, re.M)  # a shape of ours says how its answer is written
    if form:
        server.form = " > ".join(form.group(1).replace("{i}", i) for i in ids)
    elif "PASSAGE" in text.split("output_extraction_regex")[-1]:
        server.form = "[" + ", ".join(f"PASSAGE{i}" for i in ids) + "]"
    elif "rankstart" in text:
        server.form = "[rankstart] " + " > ".join(f"[{i}]" for i in ids) + " [rankend]"
    else:
        server.form = " > ".join(f"[{i}]" for i in ids)
    peer_out = work / "peer.jsonl"
    cmd = [str(PEER_PYTHON), str(SIDE), "--model", str(model), "--base-url", server.url, "--template", str(template),
           "--run", str(DATA / "bm25.run"), "--passages", str(DATA / "passages.jsonl.gz"), "--topics",
           str(DATA / "topics.tsv"), "--qids", qids, "--context-size", str(CONTEXT), "--out", str(peer_out)]
    if letters:
        cmd.append("--alpha")
    if few_shot:
        cmd += ["--few-shot", str(few_shot), "--few-shot-count", "2"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    peer = [json.loads(line) for line in peer_out.read_text(encoding="utf-8").splitlines()]
    mine = acurank_messages(model, server.url, template, few_shot, qids, work)
    row = {"template": template.name, "few_shot": 2 if few_shot else 0}
    for kind, theirs, ours in (
        ("messages", [(p["qid"], p["prompt"]) for p in peer if p["kind"] == "messages"],
         [(c["qid"], c["messages"]) for c in mine]),
        ("text", [(p["qid"], p["prompt"]) for p in peer if p["kind"] == "text"],
         acurank_texts(model, template, few_shot, mine)),
    ):
        theirs_by = {q: [json.dumps(p, ensure_ascii=False) for qq, p in theirs if qq == q] for q in qids.split(",")}
        ours_by = {q: [json.dumps(p, ensure_ascii=False) for qq, p in ours if qq == q] for q in qids.split(",")}
        windows = sum(len(v) for v in theirs_by.values())
        equal = sum(a == b for q in theirs_by for a, b in zip(theirs_by[q], ours_by[q]))
        same_count = all(len(theirs_by[q]) == len(ours_by[q]) for q in theirs_by)
        row[kind] = f"{equal}/{windows}" + ("" if same_count else " (window counts differ)")
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qids", default="264014,104861")
    ap.add_argument("--name", default="templates_peer")
    ap.add_argument("--only", default="", help="only the templates whose file name holds this")
    args = ap.parse_args()
    if not PEER_PYTHON.exists():
        print("RankLLM's venv is missing: make setup-peer", file=sys.stderr)
        sys.exit(2)
    from tiny_models import build_model_dir

    work = Path(tempfile.mkdtemp(prefix="templates-peer-"))
    model = work / "tiny"
    build_model_dir(model, "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
                           "{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
    few_shot = work / "few_shot.json"
    few_shot.write_text(json.dumps(FEW_SHOT, indent=1), encoding="utf-8")
    server = Identity()
    templates = [*peer_templates(), ROOT / "docs" / "templates" / "scientific-claim.yaml",
                 *sorted((Path(__file__).resolve().parent / "peer_side" / "shapes").glob("*.yaml"))]
    rows = []
    for template in (t for t in templates if args.only in t.name):
        letters = "[A-Z]" in template.read_text(encoding="utf-8")
        for shots in (None, few_shot):
            row = compare(template, letters, shots, model, server, args.qids, work)
            rows.append(row)
            print(row, flush=True)
    save(args.name, {"qids": args.qids.split(","), "context_size": CONTEXT, "rows": rows})
    print(table(rows, ["template", "few_shot", "messages", "text"]))


if __name__ == "__main__":
    main()
