# Quick start: `make run` serves the example server, `make test` runs every check.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MUTATE_STAMP := $(VENV)/.installed-mutate

.PHONY: run test lint unit conformance bench bench-ab bench-otel mutate mutate-sample clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: PORT ?= 8000
run: $(STAMP)
	$(BIN)/mrtr serve examples.bookings:app --host 127.0.0.1 --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks mutation
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint unit

conformance: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_conformance.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

# OpenTelemetry's cost (docs/operations.md): API installed without an SDK (`mrtr`), the package
# hidden (`mrtr-nootel`), and the SDK with batch exporters (`mrtr-otel-sdk`), side by side.
bench-ab: $(STAMP)
	$(BIN)/python -m benchmarks.paired $(BENCH_ARGS)

bench-otel: $(STAMP)
	$(BIN)/python -m benchmarks.run --only mrtr-nootel,mrtr,mrtr-otel-sdk \
		--workloads call1,mrtr2 --concurrency 32 $(BENCH_ARGS)

$(MUTATE_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,mutate]'
	touch $(MUTATE_STAMP)

# Mutation testing of the security core (mutation/scope.toml), one mutmut worker, each module's
# run bounded to 25 minutes. Slow: not part of `make test`. Options: docs/testing.md, e.g.
# make mutate MUTATE_ARGS="--module _sealing --record"
mutate: $(MUTATE_STAMP)
	$(BIN)/python -m mutation.run $(MUTATE_ARGS)

# A few minutes, fit for CI: 12 mutants per module by a fixed seed, 4 minutes per module at most;
# fails when a mutant survives that mutation/baseline.toml does not explain.
mutate-sample: $(MUTATE_STAMP)
	$(BIN)/python -m mutation.run --sample 12 --seed 20 --minutes 4 --check $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build/mutation
