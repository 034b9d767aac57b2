# Shiftlab: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install demo test test-sqlite test-postgres lint services clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "Shiftlab needs Python 3.11+ (found %s)" % sys.version.split()[0]'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

## Start the platform with demo data on http://$(HOST):$(PORT)/ (Ctrl-C stops it).
demo: install
	HOST=$(HOST) PORT=$(PORT) scripts/demo.sh

## Run the whole test suite: SQLite, then PostgreSQL and Redis when they are available.
test: install
	scripts/test.sh

lint: install
	$(VENV)/bin/ruff check .

services:
	scripts/services.sh start

clean:
	rm -rf var/test var/screenshots .pytest_cache
