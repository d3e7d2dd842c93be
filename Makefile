# Quick start: `make run` serves the example server, `make test` runs every check.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint unit conformance bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: PORT ?= 8000
run: $(STAMP)
	$(BIN)/mrtr serve examples.bookings:app --host 127.0.0.1 --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint unit

conformance: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_conformance.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
