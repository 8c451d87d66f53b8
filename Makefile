# Two entry points (see README): `make demo` runs the main job offline on sample_runs, `make test` runs the tests.
# Both create .venv and install everything first: the CPU build of torch (pinned, from local disk), then the project.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ACURANK := $(VENV)/bin/acurank
OUT ?= out
DATASET ?= dl19
RERANKER ?= minilm

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all]"
	touch $@

demo: setup
	mkdir -p $(OUT)
	$(ACURANK) rerank sample_runs/$(DATASET)/bm25.run --method acurank --reranker $(RERANKER) \
		--qrels sample_runs/$(DATASET)/qrels.txt --output $(OUT)/$(DATASET).acurank.run \
		--stats $(OUT)/$(DATASET).acurank.stats.jsonl --overwrite
	$(ACURANK) eval sample_runs/$(DATASET)/bm25.run $(OUT)/$(DATASET).acurank.run --qrels sample_runs/$(DATASET)/qrels.txt

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(OUT)
