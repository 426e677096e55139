# The two commands a newcomer needs (see README):
#   make run    install into .venv and run web + scheduler + worker on the embedded SQLite database
#   make test   install dev dependencies into .venv and run the whole test suite
# For the inner loop: make test-fast (unit tests and the SQLite half, no real processes).
# Both installs come from the lock files (exact versions with hashes); `make lock` remakes them after
# an edit of requirements.txt or requirements-dev.txt, and `make lint` fails while they disagree.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export FLASK_APP := app

.PHONY: run test test-fast lint lock bench faults install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Test workers: the suite is mostly waiting (real processes, sockets, PostgreSQL), so a couple
# more workers than cores keep both cores busy; each worker has its own PostgreSQL database.
TEST_WORKERS ?= 4
# Branch coverage of app/ and cli/ over both databases; the floor only ever goes up. A full
# `.ci/run` from a clean clone measured 89.2 %; the floor sits a few points under it, so that
# what the slowest tests cover on a loaded machine does not decide the run.
COVERAGE_FLOOR ?= 86
# A narrowed run (PYTEST_ARGS) covers a part of the code by design: it reports, the floor is not checked.
FLOOR = $(if $(strip $(PYTEST_ARGS)),0,$(COVERAGE_FLOOR))

$(VENV)/.runtime-installed: requirements.lock | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r requirements.lock
	touch $@

$(VENV)/.dev-installed: requirements.lock requirements-dev.lock | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r requirements-dev.lock
	touch $@ $(VENV)/.runtime-installed

install: $(VENV)/.runtime-installed
install-dev: $(VENV)/.dev-installed

run: install
	$(BIN)/flask db upgrade
	$(BIN)/flask ensure-dev-user
	$(BIN)/python scripts/run_all.py

# The second mypy checks the client package strictly with its own config
# (clients/python/pyproject.toml), which only applies when run from its folder.
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	cd clients/python && $(abspath $(BIN))/mypy
	$(BIN)/python scripts/dependency_lock.py check

lock: install-dev
	$(BIN)/python scripts/dependency_lock.py write

# Two passes: everything in parallel, then the benchmark smoke runs and the browser tests in one
# process. Those two start whole stacks of processes each and check that none is left behind, so
# they run alone rather than beside another worker's processes.
SERIAL_TESTS := tests/bench tests/e2e

# The parallel pass ends with its 20 slowest tests (set-up and teardown counted apart), so a run
# that got slower says where.
test: install-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(foreach path,$(SERIAL_TESTS),--ignore=$(path)) --cov --cov-report= --durations=20 $(PYTEST_ARGS)
	$(BIN)/python -m pytest $(SERIAL_TESTS) --cov --cov-append --cov-report=term:skip-covered --cov-fail-under=$(FLOOR) $(PYTEST_ARGS) || [ $$? -eq 5 ]

test-fast: install-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not postgres and not slow and not e2e and not soak" --ignore=tests/faults $(PYTEST_ARGS)

bench: install-dev
	$(BIN)/python -m bench

# The fault scenarios (private PostgreSQL clusters, real processes) with their figures in one
# table (docs/reliability.md); narrow with FAULTS_ARGS="-k failover".
faults: install-dev
	$(BIN)/python -m tests.faults.report $(FAULTS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis test-artifacts .coverage .coverage.*
