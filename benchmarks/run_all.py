"""Run every benchmark in turn (each prints its table and writes benchmarks/results/<name>.json).

    python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = {
    "trueskill_update.py": [],
    "engine_overhead.py": [],
    "scaling.py": [],
    "batching.py": [],
    "openai_concurrency.py": [],
}
QUICK = {"engine_overhead.py": ["--queries", "5", "--queries-1000", "2"], "scaling.py": ["--queries", "5"],
         "batching.py": ["--queries", "4"]}


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    failed = []
    for script, args in BENCHMARKS.items():
        extra = QUICK.get(script, []) if quick else args
        print(f"== {script} {' '.join(extra)}", flush=True)
        if subprocess.run([sys.executable, str(HERE / script), *extra]).returncode != 0:
            failed.append(script)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
