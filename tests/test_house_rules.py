"""The house's size rules (issue 82, item 6), read from the source: no function body over 60 lines, and no function,
method or call with more than 6 positional arguments, outside the compiled kernels (functions declared with
``@jit(...)``, and the calls that reach them: numba's factor-graph steps take their arrays one by one).

A function's length is its body's, from its first statement (the docstring) to its end: a command's signature is its
flags' declaration (the issue lets a command declare them as a record; Typer reads them from the signature), each
flag keyword-only after a ``*``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "acurank_cli"
MOST_LINES = 60
MOST_POSITIONAL = 6


def _kernels(tree: ast.Module) -> set[str]:
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and any(isinstance(d, ast.Call) and getattr(d.func, "id", "") == "jit" for d in node.decorator_list)}


def _positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    return len(names) - (names[:1] in (["self"], ["cls"]))


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def breaches(source: str, where: str) -> list[str]:
    """Every breach of the rules in one module's source, as ``where:line: what``."""
    tree = ast.parse(source)
    kernels = _kernels(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in kernels:
            lines = node.end_lineno - node.body[0].lineno + 1
            if lines > MOST_LINES:
                found.append(f"{where}:{node.lineno}: {node.name} is {lines} lines")
            if _positional(node) > MOST_POSITIONAL:
                found.append(f"{where}:{node.lineno}: {node.name} takes {_positional(node)} positional arguments")
        if isinstance(node, ast.Call) and len(node.args) > MOST_POSITIONAL and _callee(node) not in kernels:
            found.append(f"{where}:{node.lineno}: a call of {_callee(node) or 'a function'} passes "
                         f"{len(node.args)} positional arguments")
    return found


def test_the_rules_find_what_they_name():
    """The reader itself, on sources made for it: a 61-line body, 7 parameters, 7 positional arguments in a
    call, each found; 60 lines (a long signature not counted), 6 parameters (and self), keywords, a kernel and its
    calls, none."""
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    assert breaches(f"def f():\n{body}\n    return 1\n    return 2\n", "m") == ["m:1: f is 61 lines"]
    assert breaches(f"def f(\n    *,\n    a=1,\n    b=2,\n):\n{body}\n    return 1\n", "m") == []
    assert breaches("def f(a, b, c, d, e, f, g): pass\n", "m") == ["m:1: f takes 7 positional arguments"]
    assert breaches("class C:\n    def f(self, a, b, c, d, e, f, *, g): pass\n", "m") == []
    assert breaches("g(1, 2, 3, 4, 5, 6, 7)\n", "m") == ["m:1: a call of g passes 7 positional arguments"]
    assert breaches("g(1, 2, 3, 4, 5, 6, h=7)\ng(*cells)\n", "m") == []
    kernel = "@jit(error_model='numpy')\ndef k(a, b, c, d, e, f, g):\n" + body + "\n    return k(1, 2, 3, 4, 5, 6, 7)\n"
    assert breaches(kernel, "m") == []


def test_no_function_is_long_or_takes_many_positional_arguments():
    found = [b for path in sorted(PACKAGE.rglob("*.py"))
             for b in breaches(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE.parent)))]
    assert found == [], "\n".join(found)
