"""Write docs/cli-reference.md from the Typer app itself: every command's and subcommand's ``--help``, as
``acurank COMMAND --help`` prints it. Never edited by hand: tests/cli/test_cli_reference.py fails when the committed page
differs from a fresh generation (then run this script).

    python scripts/cli_reference.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "cli-reference.md"
HEADER = """# CLI reference

Generated from the command-line app by `scripts/cli_reference.py` (do not edit: `tests/cli/test_cli_reference.py`
fails when this page and the app differ). Each command's `--help`, as `acurank COMMAND --help` prints it.
"""


def _help(argv: list[str]) -> str:
    import typer
    from typer.testing import CliRunner

    from acurank_cli.cli.app import app

    runner = CliRunner()
    with runner.isolation(env={"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}) as (out, err, _):
        typer.main.get_command(app).main([*argv, "--help"], prog_name="acurank", standalone_mode=False)
        sys.stdout.flush()
        text = out.getvalue().decode("utf-8")
    return text.rstrip() + "\n"


def _commands() -> list[list[str]]:
    """Every command path of the app, in its order (groups first, then their subcommands)."""
    import typer

    from acurank_cli.cli.app import app

    out: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:
        out.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


def generate() -> str:
    parts = [HEADER]
    for path in _commands():
        title = " ".join(["acurank", *path])
        parts.append(f"\n## `{title}`\n\n```text\n{_help(path)}```\n")
    return "".join(parts)


if __name__ == "__main__":
    from generated_page import write_or_check

    write_or_check(PAGE, generate, ROOT)
