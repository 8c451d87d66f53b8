"""What the scripts that write a generated docs page share: write it, or with ``--check`` exit 1 when the committed
page differs from a fresh generation (what the tests run, in a fresh interpreter)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable


def write_or_check(page: Path, generate: Callable[[], str], root: Path) -> None:
    text = generate()
    if "--check" in sys.argv[1:]:
        sys.exit(0 if page.read_text(encoding="utf-8") == text else 1)
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page.relative_to(root)} ({len(text.splitlines())} lines)")
