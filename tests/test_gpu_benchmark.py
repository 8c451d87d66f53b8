"""benchmarks/gpu.py, the GPU path's benchmark, runs end to end on this CPU with a tiny random model (what a lent
device machine runs at full size): the chip, the bare forward on the backend's own prompts, hf: in every answer mode,
the profile, and its JSON and table."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ENV, ROOT

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_the_gpu_benchmark_runs_on_cpu_with_a_tiny_shape():
    name = "gpu_test_cpu_tiny"
    results = ROOT / "benchmarks" / "results"
    try:
        ran = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--shape", "tiny", "--device", "cpu",
                              "--queries", "1", "--depth", "20", "--methods", "sw-1", "--profile-queries", "1",
                              "--name", name], capture_output=True, text=True, env=ENV, timeout=900, cwd=ROOT)
        assert ran.returncode == 0, ran.stderr[-2000:]
        report = json.loads((results / f"{name}.json").read_text())
        assert report["device"] == "cpu" and report["parameters"] > 0 and report["chip"]["tflops"] > 0
        bare = report["bare_forward"]["8"]
        assert bare["windows"] == 1 and bare["windows_per_s"] > 0  # 20 documents: one first-pass window
        modes = {(r["answer"], r["method"]) for r in report["backend"]}
        assert modes == {("logits", "sw-1"), ("text", "sw-1"), ("constrained", "sw-1")}
        logits = next(r for r in report["backend"] if r["answer"] == "logits")
        assert logits["calls"] == 1 and logits["tokens_decoded_per_call"] == 1.0  # one window, one forward
        assert all(r["ratio_to_bare"] > 0 for r in report["backend"]) and report["profile"]
        assert "bare forward, batch 8" in (results / f"{name}.md").read_text()
    finally:
        for suffix in (".json", ".md"):
            (results / f"{name}{suffix}").unlink(missing_ok=True)
