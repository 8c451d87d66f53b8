"""The CLI reference page (docs/cli-reference.md) is the app's own help: a fresh generation, in a fresh interpreter
(no plug-in another test registered), equals the committed page, so a changed option or help text cannot leave the
docs stale (regenerate: python scripts/cli_reference.py)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ENV, ROOT


def test_the_committed_cli_reference_equals_a_fresh_generation():
    env = {k: v for k, v in ENV.items() if k not in ("ACURANK_METHODS", "ACURANK_BACKENDS")}
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, f"docs/cli-reference.md is stale: run python scripts/cli_reference.py\n{check.stderr}"
    page = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    for command in ("rerank", "baseline", "merge", "eval", "index", "retrieve", "convert", "report table",
                    "report trace", "report provenance"):
        assert f"## `acurank {command}`" in page and f"Usage: acurank {command} [OPTIONS]" in page
