# The two commands a newcomer needs (see README):
#   make run    install into .venv and run web + scheduler + worker on the embedded SQLite database
#   make test   install dev dependencies into .venv and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export FLASK_APP := app

.PHONY: run test lint bench faults install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@ $(VENV)/.runtime-installed

install: $(VENV)/.runtime-installed
install-dev: $(VENV)/.dev-installed

run: install
	$(BIN)/flask db upgrade
	$(BIN)/flask ensure-dev-user
	$(BIN)/python scripts/run_all.py

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: install-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install-dev
	$(BIN)/python -m bench

# The fault scenarios (private PostgreSQL clusters, real processes) with their figures in one
# table (docs/reliability.md); narrow with FAULTS_ARGS="-k failover".
faults: install-dev
	$(BIN)/python -m tests.faults.report $(FAULTS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis test-artifacts
