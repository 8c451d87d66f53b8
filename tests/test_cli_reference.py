"""The CLI reference page (docs/cli-reference.md) is the app's own help: a fresh generation equals the committed
page, so a changed option or help text cannot leave the docs stale (regenerate: python scripts/cli_reference.py)."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import cli_reference  # noqa: E402


def test_the_committed_cli_reference_equals_a_fresh_generation():
    fresh = cli_reference.generate()
    committed = cli_reference.PAGE.read_text(encoding="utf-8")
    assert committed == fresh, "docs/cli-reference.md is stale: run python scripts/cli_reference.py"
    for command in ("rerank", "baseline", "merge", "eval", "index", "retrieve", "convert", "report table",
                    "report trace"):
        assert f"## `acurank {command}`" in fresh and f"Usage: acurank {command} [OPTIONS]" in fresh
