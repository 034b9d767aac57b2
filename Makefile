# Shiftlab: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install llama-server models demo test test-fast lint services clean

# The venv itself (Python check, pip upgraded): the llama.cpp build only needs this much to start.
$(VENV)/bin/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Shiftlab needs Python 3.11+ (found %s)" % sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python requirements.txt requirements-dev.txt requirements-nodeps.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

# argilla-server (the local annotation UI) pins libraries that clash with ours: its own virtualenv.
ARGILLA_VENV := .venv-argilla
$(ARGILLA_VENV)/.installed: requirements-argilla-server.txt
	test -x $(ARGILLA_VENV)/bin/python || $(PYTHON) -m venv $(ARGILLA_VENV)
	$(ARGILLA_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ARGILLA_VENV)/bin/python -m pip install --quiet -r requirements-argilla-server.txt
	touch $@

## Everything, as fast as a fresh machine allows: llama.cpp compiles (once per machine, the only C++
## build) in the background while both virtualenvs install side by side; its log is var/log/llama-build.log.
## A second clone on the same machine finds the compiled server in ~/.cache/shiftlab and compiles nothing.
## With PREFETCH_LLM=NAME (make demo sets it) the LLM's weights download meanwhile too.
PREFETCH_LLM ?=
install: $(VENV)/bin/python
	@mkdir -p var/log; \
	scripts/build_llama_server.sh >var/log/llama-build.log 2>&1 & build=$$!; \
	$(MAKE) --no-print-directory -j2 $(VENV)/.installed $(ARGILLA_VENV)/.installed; status=$$?; \
	if [ -n "$(PREFETCH_LLM)" ] && [ $$status -eq 0 ]; then \
	  $(PY) manage.py llm_server --download-only --model $(PREFETCH_LLM) >var/log/llm-download.log 2>&1 || \
	    echo "The LLM's weights did not download now (var/log/llm-download.log); the LLM server tries again at start."; \
	fi; \
	if ! kill -0 $$build 2>/dev/null; then :; else echo "Waiting for llama.cpp to finish compiling (once per machine; log: var/log/llama-build.log) ..."; fi; \
	if wait $$build; then echo "llama-server: $$(tail -n 1 var/log/llama-build.log)"; \
	else tail -n 20 var/log/llama-build.log; \
	  echo "WARNING: llama-server did not build (see var/log/llama-build.log); the demo runs without the embedded LLM and the LLM tests skip (or fail under SHIFTLAB_REQUIRE_SERVICES=1)."; fi; \
	exit $$status

## llama.cpp's own llama-server (and llama-quantize), the embedded LLM's server (parallel slots: several
## requests decoded at once). Compiled once per machine (about 6 minutes on 2 cores) into
## ~/.cache/shiftlab/llama-server, keyed by the pinned llama.cpp and the CPU's features, so later runs and
## fresh clones (CI) reuse it. On CPUs with AMX, llama.cpp's AMX code segfaults on the first generation
## (llama.cpp issue 20824): the script leaves it out, and the server turns weight repacking off there.
llama-server: $(VENV)/bin/python
	scripts/build_llama_server.sh

## Download and verify the demo LLM (Qwen2.5-Coder-1.5B-Instruct, 1.1 GB) into ~/.cache/shiftlab/models.
DEMO_LLM := qwen2.5-coder-1.5b-instruct
models: install
	$(PY) manage.py llm_server --download-only --model $(DEMO_LLM)

## Start the platform with demo data on http://$(HOST):$(PORT)/ (Ctrl-C stops it).
demo: $(VENV)/bin/python
	@$(MAKE) --no-print-directory install PREFETCH_LLM=$(DEMO_LLM)
	HOST=$(HOST) PORT=$(PORT) scripts/demo.sh

## Run the whole test suite: SQLite, then PostgreSQL and Redis when they are available.
test: install
	scripts/test.sh

## The inner loop: lint, then the pure and service-layer tests on SQLite (no real model or service).
test-fast: install
	scripts/test.sh --fast

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo

services:
	scripts/services.sh start

clean:
	rm -rf var/test var/screenshots .pytest_cache
