"""Flags declared once (cli/flags.py), one spelling per meaning, and --help grouped in panels a screen each."""

import re
from pathlib import Path

import pytest

from acurank_cli.cli.flags import BACKEND, PANELS, backend_panel
from acurank_cli.rerankers.backend import BACKEND_MODULES, BACKENDS
from tests.conftest import acurank

CLI = Path(__file__).resolve().parents[2] / "acurank_cli" / "cli"

#: flags several commands take: declared in flags.py, nowhere else (``--method`` twice: the method a command runs, and
#: the methods a report reads)
SHARED = ("--reranker", "--quiet", "--plot", "--batch-queries", "--cache", "--no-cache", "--overwrite",
          "--qids", "--ray", "--actors", "--gpus-per-actor")


def declarations(flag: str) -> dict[str, int]:
    """Module -> how many typer.Option declarations of ``flag`` it holds."""
    found = {}
    for path in sorted(CLI.glob("*.py")):
        n = len(re.findall(r'typer\.Option\([^)]*?"' + re.escape(flag) + r'"', path.read_text(), flags=re.S))
        if n:
            found[path.name] = n
    return found


@pytest.mark.parametrize("flag", SHARED)
def test_a_shared_flag_is_declared_once_in_flags_py(flag):
    assert declarations(flag) == {"flags.py": 1}, declarations(flag)


def test_method_is_declared_once_per_meaning():
    assert declarations("--method") == {"flags.py": 2}
    text = (CLI / "flags.py").read_text()
    assert "def method_option(" in text and "def methods_option(" in text


def panels_of(command: str) -> dict[str, list[str]]:
    """The --help's panels, each with its options' flags."""
    out, panel = {}, None
    for line in acurank(command, "--help").stdout.splitlines():
        if re.fullmatch(r"[A-Z][A-Za-z ]+:", line):
            panel = line[:-1]
            out[panel] = []
        elif panel is not None and panel != "Arguments" and line.startswith("  -"):
            out[panel].append(line.split()[0].rstrip(","))
    return out


@pytest.mark.parametrize("command", ["rerank", "baseline", "serve"])
def test_help_is_grouped_in_panels_of_at_most_20_options(command):
    panels = panels_of(command)
    panels.pop("Arguments", None)
    assert set(panels) <= {*PANELS, "Options"}, panels.keys()
    assert panels.pop("Options") == ["--help"]
    assert all(0 < len(flags) <= 20 for flags in panels.values()), {p: len(f) for p, f in panels.items()}
    assert list(panels) == [p for p in PANELS if p in panels]  # in the one order
    assert "--thinking" in panels["Thinking"] and "--sim-noise" in panels["Simulated reranker"]
    assert "--base-url" in panels["Remote servers"] and "--prompt" in panels["LLM prompt and answers"]
    assert "--reranker" in panels["Backend"] and "--cache" in panels["Performance"] and "--k" in panels["Method"]
    if command != "serve":
        assert "--depth" in panels["Input and output"] and "--batch-queries" in panels["Performance"]
    else:
        assert "--port" in panels["Server"]


def test_every_backend_option_is_in_a_panel_and_the_reranker_help_names_the_registry():
    for name, option in BACKENDS.table(strict=False).items():
        assert backend_panel(name, option) in PANELS, name
    assert backend_panel("device", BACKENDS.table(strict=False)["device"]) == BACKEND
    helped = " ".join(acurank("rerank", "--help").stdout.split())
    # the built-ins are registered first, one a module (plug-ins registered by other tests may follow)
    builtin = [f"{p}:MODEL" if s.takes_arg else p for p, s in list(BACKENDS.entries.items())[:len(BACKEND_MODULES)]]
    assert f"Backend: {' | '.join(builtin)} |" in helped and "| a plug" in helped
