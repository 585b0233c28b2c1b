# Two commands do all set-up on a fresh machine with Python 3.11 and pip: `make demo`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
SANDBOX_PORT ?= 8765

.PHONY: install bytecode test lint demo dev sync sandbox lock clean bench bench-install

# Installs exactly what uv.lock pins. uv itself is pinned and lives in the venv, so nothing
# outside the repository is needed; --inexact keeps it there. --compile-bytecode writes the
# .pyc files at install: where PYTHONDONTWRITEBYTECODE is set, every process would otherwise
# compile Dagster anew (4 s a process, measured).
$(VENV)/.synced: pyproject.toml uv.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"
	$(BIN)/uv sync --locked --inexact --compile-bytecode --quiet
	touch $@

# The product's own modules are not installed in the venv, so --compile-bytecode does not
# reach them: compiled here (only what changed since), or where PYTHONDONTWRITEBYTECODE is set
# every command would compile them anew (0.05-0.09 s of each sync's start, bench: peer).
bytecode: $(VENV)/.synced
	$(BIN)/python -m compileall -q -j 0 pipelines assets cli sandbox demo bench

install: $(VENV)/.synced bytecode

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# worksteal: a worker that runs out takes tests queued behind the other's long one (the soak,
# put first by tests/conftest.py), instead of leaving them to run after it. Two workers, one
# a core: a third made the timing of the shared-budget tests fail on a busy run.
test: lint
	$(BIN)/python -m pytest -n 2 --dist worksteal --durations=10

demo: install
	$(BIN)/python -m demo --port $(SANDBOX_PORT)

# The Dagster UI on the demo's setup: a live sandbox, both receivers, `dg dev`, all under
# data/dev/ (its instance settings from instance/dagster.yaml). Ctrl-C stops every process.
dev: install
	$(BIN)/python -m demo.dev --port $(SANDBOX_PORT)

# Benchmarks on large sandboxes (bench/README.md): not part of `make test`. Each prints
# its table and writes bench/results/<figure>.json; one at a time, so they do not share cores.
# The `bench` dependency group (dlt, the peer in bench.peer) is installed here only: `install`
# syncs the default groups, so `make test` never pulls it.
BENCHES := pull peer rate budget parallel incremental backfill warehouse webhooks agent push push_history year soak
$(VENV)/.synced-bench: $(VENV)/.synced
	$(BIN)/uv sync --locked --inexact --compile-bytecode --quiet --group bench
	touch $@

bench-install: $(VENV)/.synced-bench

bench: bench-install
	@for figure in $(BENCHES); do $(BIN)/python -m bench.$$figure || exit 1; done

# A sandbox that keeps running, for exploring the services by hand.
sandbox: install
	$(BIN)/python -m sandbox --port $(SANDBOX_PORT) --frozen

lock:
	$(BIN)/uv lock

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache
