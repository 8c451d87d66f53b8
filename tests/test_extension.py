"""A new method and a new backend are each one module with one registry line.

The two toy modules below are the whole diff a contributor writes: a strategy that only decides windows
(``blocks``: one pass of disjoint windows of m, top down) and a backend that only executes them
(``reverse``: every window answered in reverse presented order). Each has exactly one line that touches a
registry, and both then run through the command line like the built-in ones.
"""

from __future__ import annotations

import textwrap

import pytest

from acurank_cli.method import registry
from conftest import acurank, small_run

TOY_METHOD = textwrap.dedent('''
    from dataclasses import dataclass

    from acurank_cli.method.strategy import Strategy, apply, chunks
    from acurank_cli.method.shared_options import WINDOW
    from acurank_cli.method.registry import MethodSpec, register_method
    from acurank_cli.records import Phase, Ranked, Step


    @dataclass(frozen=True)
    class Blocks(Strategy):
        """One top-down pass of disjoint windows of m; each window keeps its slice of the list."""

        name: str
        m: int = WINDOW(20)  # the shared --window option: its flag, help and domain come with it

        def plan(self, task):
            windows = tuple(tuple(w) for w in chunks([c.docid for c in task.candidates], self.m))
            perms = yield Step(windows=windows, phase=Phase.pass_, iteration=1)
            return tuple(Ranked(d, None) for w, p in zip(windows, perms) for d in apply(w, p))


    register_method(MethodSpec(r"blocks", lambda match, opts: Blocks(match.group(0), **opts), True, "blocks", Blocks))
''')

TOY_BACKEND = textwrap.dedent('''
    from acurank_cli import RerankerBase, RerankResult, register


    @register("reverse", takes_arg=False, help="answers every window in reverse presented order", needs_texts=False)
    class Reverse(RerankerBase):  # needs_texts: the registration says it (once is enough)
        name = "reverse"

        def rerank_batch(self, requests):
            return [RerankResult(order=tuple(reversed(range(len(r.docids))))) for r in requests]
''')


def registry_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if "register" in line and not line.startswith(("from", "import"))]


def test_one_module_and_one_registry_line_each(sample, tmp_path, monkeypatch, request):
    assert len(registry_lines(TOY_METHOD)) == 1 and len(registry_lines(TOY_BACKEND)) == 1
    (tmp_path / "toy_method.py").write_text(TOY_METHOD)
    (tmp_path / "toy_backend.py").write_text(TOY_BACKEND)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry.METHODS, "entries", dict(registry.METHODS.load()))  # the toy leaves no trace
    request.addfinalizer(lambda: setattr(registry.METHODS, "_table", None))  # in other tests
    import toy_method  # noqa: F401 - registers "blocks"

    assert "blocks" in registry.known_methods(baseline_only=True)
    run, qids = small_run(sample, tmp_path, queries=2, depth=45)
    out = tmp_path / "blocks.run"
    proc = acurank("baseline", run, "--method", "blocks", "--reranker", "reverse", "--window", "20", "-o", out,
                   env={"ACURANK_BACKENDS": "toy_backend"})
    assert "blocks with reranker reverse on 2 queries" in proc.stderr
    first = {q: [line.split()[2] for line in run.read_text().splitlines() if line.split()[0] == q] for q in qids}
    got = {q: [line.split()[2] for line in out.read_text().splitlines() if line.split()[0] == q] for q in qids}
    for q in qids:  # by hand: windows [0, 20), [20, 40), [40, 45), each reversed
        docs = first[q]
        assert got[q] == docs[19::-1] + docs[39:19:-1] + docs[44:39:-1]
    stats = [line for line in (tmp_path / "blocks.stats.jsonl").read_text().splitlines()]
    assert all('"calls": 3' in line for line in stats)  # ceil(45 / 20) windows a query


def test_import_failures_name_their_cause(sample, tmp_path):
    """A plug-in module that fails to import, and a backend whose own import fails when it is built (a package
    that is installed but broken, as a transformers that cannot load a kernel): one line naming the module and
    the real message, exit 2; a package that is missing: the package and the extra to install."""
    import subprocess
    import sys

    from conftest import ENV

    (tmp_path / "broken_load.py").write_text('raise ImportError("libcuda.so.1: cannot open shared object file")\n')
    (tmp_path / "broken_build.py").write_text(textwrap.dedent('''
        from acurank_cli import RerankerBase, register


        @register("late", takes_arg=True, help="imports its engine when built", needs_texts=False)
        def build(arg, options):
            if arg == "broken":
                raise ImportError("cannot import name 'GenerationMixin' from 'transformers'", name="transformers")
            import no_such_engine_pkg  # noqa: F401
    '''))
    run, _ = small_run(sample, tmp_path, queries=1, depth=20)

    def cli(module, reranker):
        env = {**ENV, "PYTHONPATH": f"{tmp_path}:{ENV.get('PYTHONPATH', '')}", "ACURANK_BACKENDS": module}
        return subprocess.run([sys.executable, "-m", "acurank_cli", "baseline", str(run), "--method", "sw-1",
                               "--reranker", reranker, "-o", str(tmp_path / "x.run")],
                              capture_output=True, text=True, env=env, cwd=tmp_path)

    load = cli("broken_load", "simulated")
    assert load.returncode == 2 and "Traceback" not in load.stderr
    assert load.stderr.strip() == ("acurank: error: cannot import reranker module 'broken_load' (ImportError: "
                                   "libcuda.so.1: cannot open shared object file)")
    broken = cli("broken_build", "late:broken")
    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert ("error: importing 'transformers' failed: ImportError: cannot import name 'GenerationMixin' from "
            "'transformers' (an installed package is broken") in broken.stderr
    assert "None" not in broken.stderr
    missing = cli("broken_build", "late:missing")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert ("error: this needs the Python package 'no_such_engine_pkg' (No module named 'no_such_engine_pkg'): "
            "pip install 'acurank[all]'") in missing.stderr


def test_a_backend_spec_argument_is_used_or_refused():
    """Minilm:BAAI/bge-small-en-v1.5 and simulated:X ran the default model and said nothing."""
    import pytest

    from acurank_cli.errors import InputError
    from acurank_cli.rerankers.backend import lookup

    for spec in ("minilm:BAAI/bge-small-en-v1.5", "simulated:X", "simulated:"):
        with pytest.raises(InputError, match="takes no argument"):
            lookup(spec)
    assert lookup("simulated")[1] == "" and lookup("hf:some/model")[1] == "some/model"
    with pytest.raises(InputError, match="needs an argument"):
        lookup("hf")


def test_readme_custom_method_runs_as_written_and_as_a_plug_in(sample, tmp_path):
    """The README's custom method (its own option included), extracted and run in a fresh
    interpreter; then as a plug-in module through ACURANK_METHODS: its option is a baseline flag, checked."""
    import subprocess
    import sys

    from conftest import ENV, run_readme_block

    proc = run_readme_block("custom-method", tmp_path / "blocks_method.py")
    assert proc.returncode == 0, proc.stderr
    # by hand: windows (a b) (c d); grades b=1, d=2: b > a, d > c; the second pass keeps it; 2 + 2 calls
    assert proc.stdout.strip() == "['b', 'a', 'd', 'c'] 4"
    env = {**ENV, "ACURANK_METHODS": "blocks_method", "PYTHONPATH": f"{tmp_path}:{ENV.get('PYTHONPATH', '')}"}
    run, _ = small_run(sample, tmp_path, queries=2, depth=40)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "acurank_cli", *map(str, args)], capture_output=True, text=True,
                              env=env, cwd=tmp_path)

    assert "--passes" in cli("baseline", "--help").stdout
    ok = cli("baseline", run, "--method", "blocks", "--passes", "3", "--reranker", "simulated", "--qrels",
             sample / "dl19" / "qrels.txt", "-o", tmp_path / "b.run")
    assert ok.returncode == 0, ok.stderr
    assert all('"calls": 6' in line for line in (tmp_path / "b.stats.jsonl").read_text().splitlines())  # 3 x 2
    bad = cli("baseline", run, "--method", "blocks", "--passes", "0", "--reranker", "simulated", "--qrels",
              sample / "dl19" / "qrels.txt", "-o", tmp_path / "c.run")
    assert bad.returncode == 2 and "--passes" in bad.stderr and "Traceback" not in bad.stderr


def test_an_installed_distribution_s_entry_point_registers_its_method_and_none_costs_a_metadata_scan(sample, tmp_path):
    """A plug-in installed as a distribution (its ``entry_points.txt`` declaring ``acurank.methods``) is found and
    runs; where no distribution declares acurank's groups, no entry-point scan is made for them (issue 85: the scan
    and importlib.metadata's import cost every command about 0.1 s of start-up), and ``--version`` imports
    importlib.metadata not at all."""
    import subprocess
    import sys

    from conftest import ENV, run_readme_block

    site = tmp_path / "site"
    site.mkdir()
    assert run_readme_block("custom-method", site / "blocks_method.py").returncode == 0
    info = site / "acurank_blocks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acurank-blocks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nblocks = blocks_method:main\n")
    clean = {k: v for k, v in ENV.items() if k not in ("ACURANK_METHODS", "ACURANK_BACKENDS")}
    env = {**clean, "PYTHONPATH": f"{site}:{ENV.get('PYTHONPATH', '')}"}
    # every scan of an acurank group is counted (importlib.metadata's own entry_points, wrapped)
    probe = ("import sys, importlib.metadata as m; seen = []; scan = m.entry_points\n"
             "def counted(**kw):\n    seen.append(kw.get('group'))\n    return scan(**kw)\n"
             "m.entry_points = counted\nfrom acurank_cli.cli.app import main; code = main(sys.argv[1:])\n"
             "print('scanned', sorted(g for g in seen if str(g).startswith('acurank')), code)")

    def cli(*args, script=probe):
        return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                              env=env, cwd=tmp_path)

    version = cli("--version", script="import sys; from acurank_cli.cli.app import main; main(sys.argv[1:]); "
                                      "print('importlib.metadata' in sys.modules)")
    assert version.stdout.split() == ["acurank", "0.1.0", "False"], version.stderr
    other_group = cli("baseline", "--help")
    assert other_group.stdout.strip().endswith("scanned [] 0") and "--passes" not in other_group.stdout
    (info / "entry_points.txt").write_text("[console_scripts]\nblocks = blocks_method:main\n\n"
                                           "[acurank.methods]\nblocks = blocks_method\n")
    declared = cli("baseline", "--help")
    assert "--passes" in declared.stdout and declared.stdout.strip().endswith("scanned ['acurank.methods'] 0")
    run, _ = small_run(sample, tmp_path, queries=2, depth=40)
    ok = cli("baseline", run, "--method", "blocks", "--passes", "3", "--reranker", "simulated", "--qrels",
             sample / "dl19" / "qrels.txt", "-o", tmp_path / "b.run")
    assert ok.returncode == 0 and ok.stdout.strip().endswith("0"), ok.stderr
    assert all('"calls": 6' in line for line in (tmp_path / "b.stats.jsonl").read_text().splitlines())  # 3 x 2


def test_methods_and_backends_are_one_registry_type(monkeypatch):
    """Built-ins register as plug-ins do (one call each), both kinds fill one options table the same way, and an
    option declared twice differently is refused in the same words for a method and for a backend."""
    from dataclasses import dataclass

    from acurank_cli.errors import InputError
    from acurank_cli.params import Option, at_least
    from acurank_cli.plugins import Registry
    from acurank_cli.rerankers import backend as base

    import pytest

    assert type(registry.METHODS) is type(base.BACKENDS) is Registry
    assert base.REGISTRY is base.BACKENDS.entries  # the name the package exports is the registry's own entries
    families = [s.family for s in registry.methods()]
    assert families[:6] == ["acurank", "acurank-auto", "sw-x", "tourrank-x", "ts-c1-...", "blitz-kW"]
    k = registry.METHODS.table()["k"]  # AcuRank's, acurank-auto's and BlitzRank's cutoff: one declaration
    assert [s.family for s, _ in k.owners] == ["acurank", "acurank-auto", "blitz-kW"] and k.flag == "--k"
    assert registry.METHODS.table()["m"].flag == "--window"  # a flag that is not the keyword's spelling
    batch = base.BACKENDS.table()["batch_size"]
    assert [b.prefix for b, _ in batch.owners] == ["minilm", "ce", "hf"] and batch.decl.kind is int

    @dataclass(frozen=True)
    class OtherK:
        k: int = Option("k", int, "another k", at_least(1))(5)

    monkeypatch.setattr(registry.METHODS, "entries", dict(registry.METHODS.load()))
    monkeypatch.setattr(registry.METHODS, "_table", None)
    registry.register_method(registry.MethodSpec(r"otherk", lambda match, opts: None, True, "otherk", OtherK))
    with pytest.raises(InputError) as exc:
        registry.METHODS.table()
    assert str(exc.value) == ("method 'otherk' declares --k differently from acurank, acurank-auto, blitz-kW: "
                              "share one declaration (acurank_cli/method/shared_options.py)")

    @dataclass(frozen=True)
    class OtherBatch:
        batch_size: int = Option(help="another batch size", domain=at_least(1))(2)

    monkeypatch.setattr(base.BACKENDS, "entries", dict(base.BACKENDS.load()))
    monkeypatch.setattr(base.BACKENDS, "_table", None)
    base.register("otherbatch", takes_arg=False, help="a clash", options=OtherBatch)(lambda arg, options: None)
    with pytest.raises(InputError) as exc:
        base.BACKENDS.table()
    assert str(exc.value) == ("reranker 'otherbatch' declares --batch-size differently from minilm, ce, hf: "
                              "share one declaration (acurank_cli/rerankers/option_groups.py)")
    monkeypatch.setattr(registry.METHODS, "_table", None)  # undone with the entries: rebuilt without the clash
    monkeypatch.setattr(base.BACKENDS, "_table", None)


#: The plug-in recipes the previous release documented (docs/extending.md before records took keywords), verbatim
#: in what they import (modules since moved: ``method.base``, ``method.options``) and build: ``RerankResult(order)``
#: and ``Step(windows, phase, iteration)`` by position.
PREVIOUS_RELEASE = textwrap.dedent('''
    from dataclasses import dataclass

    from acurank_cli import Option, RerankerBase, RerankResult, register
    from acurank_cli.method.base import Strategy, apply, chunks
    from acurank_cli.method.options import WINDOW, Option as MethodOption  # noqa: F401 - the old page imported it
    from acurank_cli.method.registry import MethodSpec, register_method
    from acurank_cli.records import Phase, Ranked, Step


    @dataclass(frozen=True)
    class OverlapOptions:
        lowercase: bool = Option(help="compare words case-insensitively")(True)


    @register("overlap", takes_arg=False, help="rank a window by word overlap with the query", options=OverlapOptions)
    class Overlap(RerankerBase):
        name = "overlap"

        def __init__(self, options: OverlapOptions):
            self.norm = str.lower if options.lowercase else str

        def rerank_batch(self, requests):
            results = []
            for r in requests:
                query = set(self.norm(r.query).split())
                shared = [len(query & set(self.norm(d.text).split())) for d in r.docs]
                results.append(RerankResult(tuple(sorted(range(len(r.docs)), key=lambda i: -shared[i]))))
            return results


    @dataclass(frozen=True)
    class Blocks(Strategy):
        name: str
        m: int = WINDOW(20)

        def plan(self, task):
            order = [c.docid for c in task.candidates]
            windows = tuple(tuple(w) for w in chunks(order, self.m))
            perms = yield Step(windows, Phase.pass_, 1)
            order = [d for w, p in zip(windows, perms) for d in apply(w, p)]
            return tuple(Ranked(d, None) for d in order)


    register_method(MethodSpec(r"blocks", lambda match, opts: Blocks(match.group(0), **opts), True, "blocks", Blocks))
''')


def test_the_previous_releases_plugin_recipe_runs_unchanged(sample, tmp_path, monkeypatch, request):
    """Positional ``RerankResult(order)`` and ``Step(windows, phase, iteration)`` (the last release's documented
    recipe) run through the CLI and the API; each window is ordered by word overlap with the query, by hand."""
    (tmp_path / "old_plugins.py").write_text(PREVIOUS_RELEASE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry.METHODS, "entries", dict(registry.METHODS.load()))
    request.addfinalizer(lambda: setattr(registry.METHODS, "_table", None))
    with pytest.warns(DeprecationWarning, match="method.base moved to acurank_cli.method.strategy"):
        import old_plugins  # noqa: F401 - registers "overlap" and "blocks"

    from acurank_cli import Reranker

    docs = ["Cats sleep a lot.", "France is in Europe.", "Paris is the capital of France.", "capital gains"]
    with Reranker("overlap", method="blocks", m=2, cache=None) as rr:
        out = rr.rerank("capital of France", docs)
    # windows [0, 1] and [2, 3]: overlap (lower-cased words) 0 < 1, and "paris is the capital of france." shares 2
    # ("capital", "of") against 1: each window keeps its slice, ordered by overlap
    assert [d.text for d in out] == [docs[1], docs[0], docs[2], docs[3]] and out.calls == 2
    proc = acurank("baseline", "sample_runs/dl19/bm25.run", "--qids", "264014,1110199", "--method", "blocks",
                   "--reranker", "overlap", "-o", tmp_path / "old.run",
                   "--stats", tmp_path / "old.stats.jsonl")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    stats = (tmp_path / "old.stats.jsonl").read_text().splitlines()
    assert len(stats) == 2 and all('"calls": 5' in line and '"parse_counts": {"ok": 5}' in line for line in stats)
