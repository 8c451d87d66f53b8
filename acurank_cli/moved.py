"""Modules that moved, importable under their old names, so that plug-ins written against the previous release
keep working (docs/extending.md): ``import acurank_cli.method.base`` gives :mod:`acurank_cli.method.strategy`, the
same module object, with a DeprecationWarning naming the new path. Installed by ``import acurank_cli``.

The standard library's import machinery does the aliasing (a meta-path finder whose loader hands back the module
that moved); no module exists twice."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

#: old module name -> where it lives now (the renames of 2026-11-27: no two modules with one file name; of 2026-11-28:
#: the rerankers' two rooms)
MOVED = {f"acurank_cli.{old}": f"acurank_cli.{new}" for old, new in {
    "cli.options": "cli.flags",
    "method.options": "method.shared_options",
    "method.params": "method.acurank_params",
    "method.base": "method.strategy",
    "report.provenance": "report.provenance_table",
    "rerankers.base": "rerankers.backend",
    "rerankers.options": "rerankers.option_groups",
    "run.allocation": "run.budget_grants",
    "serve.app": "serve.routes",
    # 2026-11-28: rerankers/ in two rooms, the backends and the listwise LLM machinery
    "rerankers.llm": "rerankers.backends.hf",
    "rerankers.vllm_backend": "rerankers.backends.vllm",
    "rerankers.vllm_permutations": "rerankers.backends.vllm_permutations",
    "rerankers.openai_backend": "rerankers.backends.openai",
    "rerankers.transport": "rerankers.backends.openai_transport",
    "rerankers.minilm": "rerankers.backends.minilm",
    "rerankers.cross_encoder": "rerankers.backends.cross_encoder",
    "rerankers.simulated": "rerankers.backends.simulated",
    "rerankers.embeddings": "rerankers.backends.embeddings",
    "rerankers.checkpoints": "rerankers.backends.checkpoints",
    "rerankers.prompts": "rerankers.listwise.prompts",
    "rerankers.templates": "rerankers.listwise.templates",
    "rerankers.answers": "rerankers.listwise.answers",
    "rerankers.thinking": "rerankers.listwise.thinking",
    "rerankers.parsing": "rerankers.listwise.parsing",
}.items()}


class MovedModules:
    """Finds an old name of :data:`MOVED` and loads it as the module that moved: a meta-path finder and its loader
    by protocol (``find_spec``; ``create_module``, ``exec_module``), not by subclassing :mod:`importlib.abc`, whose
    import (with :mod:`importlib.resources`) would cost every command 20 ms of start-up."""

    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {MOVED[spec.name]}; the old name will go in a later release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module) -> None:
        """The module that moved is already executed."""


def install() -> None:
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())
