# Shiftlab: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install llama-server models demo test test-fast lint services clean

# On CPUs with AMX, llama.cpp's AMX code segfaults on the first generation (llama.cpp issue 20824): build
# llama-cpp-python without it (-march=native would compile it in). The server also turns weight
# repacking off at load time on such CPUs (transforms/cpu_features.py), whichever build it runs.
NO_AMX_FLAGS := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
NO_AMX_CMAKE := $(shell grep -qw -e amx_int8 -e amx_tile /proc/cpuinfo 2>/dev/null && \
  echo 'CFLAGS="$(NO_AMX_FLAGS)" CXXFLAGS="$(NO_AMX_FLAGS)"')

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-embedded.txt requirements-nodeps.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Shiftlab needs Python 3.11+ (found %s)" % sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	@echo "Installing llama-cpp-python (compiles llama.cpp: about 10 minutes the first time, cached afterwards) ..."
	$(NO_AMX_CMAKE) $(PY) -m pip install --quiet -r requirements-embedded.txt || \
	  echo "WARNING: llama-cpp-python did not install (needs a C++ compiler and CMake); the demo runs without the embedded LLM and its tests skip."
	touch $@

# argilla-server (the local annotation UI) pins libraries that clash with ours: its own virtualenv.
ARGILLA_VENV := .venv-argilla
$(ARGILLA_VENV)/.installed: requirements-argilla-server.txt
	test -x $(ARGILLA_VENV)/bin/python || $(PYTHON) -m venv $(ARGILLA_VENV)
	$(ARGILLA_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ARGILLA_VENV)/bin/python -m pip install --quiet -r requirements-argilla-server.txt
	touch $@

install: $(VENV)/.installed $(ARGILLA_VENV)/.installed llama-server

## llama.cpp's own llama-server, the embedded LLM's server (parallel slots: several requests decoded at once).
## Compiled once per machine (about 8 minutes, 929 CPU-seconds, on 2 cores) into ~/.cache/shiftlab/llama-server, keyed by the
## pinned llama.cpp and the CPU's features, so later runs and fresh clones (CI) reuse it. If it cannot be
## built, the embedded LLM falls back to llama-cpp-python's server (one request at a time).
llama-server: $(VENV)/.installed
	@scripts/build_llama_server.sh || \
	  echo "WARNING: llama-server did not build (see above); the embedded LLM falls back to llama-cpp-python's server, one request at a time."

## Download and verify the demo LLM (Qwen2.5-Coder-1.5B-Instruct, 1.1 GB) into var/models.
models: install
	$(PY) manage.py llm_server --download-only --model qwen2.5-coder-1.5b-instruct

## Start the platform with demo data on http://$(HOST):$(PORT)/ (Ctrl-C stops it).
demo: install
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

services:
	scripts/services.sh start

clean:
	rm -rf var/test var/screenshots .pytest_cache
