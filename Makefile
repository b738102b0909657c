PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast lint bench reliability clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "python3.11 not found; set PY=/path/to/python3.11"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: where a local CPU wheel of 2.13.0 exists pip takes it; otherwise an unpinned
# dependency resolution could pull a newer multi-GB CUDA build
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	@# setuptools' editable-install banner is not something a user can act on
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/kb run

# every test (what CI runs); temporary files under the checkout (.pytest-tmp), where another pytest session on
# the machine cannot rotate them away (pytest keeps only its last three /tmp/pytest-of-<user> folders)
test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q --durations=10 --basetemp=.pytest-tmp

# the unit lane: tests that ask for no database and are neither slow nor live (marked in tests/conftest.py)
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m unit

bench: install
	$(BIN)/kb bench financebench --data ../shared/data/financebench-dev
	$(BIN)/kb bench docugami --data ../shared/data/docugami-10q

# the reliability suite (the tests marked live), long form: schemathesis with 200 examples per operation,
# fault and load tests, and the mixed-traffic probe across Postgres kills for 60 s
reliability: install
	KB_SCHEMATHESIS_EXAMPLES=200 KB_PROBE_SECONDS=60 $(BIN)/python -m pytest -q -m live --basetemp=.pytest-tmp

clean:
	rm -rf $(VENV) .kb .pytest-tmp
