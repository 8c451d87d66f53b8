"""``--log-prompts FILE``: one JSON line per model call, flushed as the answer arrives.

Each line holds the qid, the window's docids in presented order, the exact text (local models) or
messages (chat endpoints) sent, tokens in/out, the word cap and answer budget used, the raw answer
and its parse outcome. Credentials never reach it: backends hand over prompts, not requests.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from ..errors import InputError


class PromptLog:
    """An append-only JSONL file of model calls (safe to write from a backend's worker threads)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._fh = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write the prompt log: {exc.strerror or exc}", str(path)) from None
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        self._fh.close()
