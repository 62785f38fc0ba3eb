# Elanus developer entry points. Every target creates .venv on first use, so a fresh
# machine needs only python3 (with venv) and make.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
PYTEST_ARGS ?=
ARGS   ?=
LINT_DIRS := elanus channels meta flight milvus webui cli segments index spark
WEBUI_PORT ?= 9091

.PHONY: venv dev bytecode run test test-unit lint format bench bench-quick clean

# The interpreter exists once the venv does; stamps record what was installed, and are
# refreshed when pyproject.toml changes.
$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PIP) install -e ".[spark,dev]"
	touch $@ $(VENV)/.installed

$(VENV)/.installed-bench: pyproject.toml | $(VENV)/.installed-dev
	$(PIP) install -e ".[spark,dev,bench]"
	touch $@

venv: $(VENV)/.installed          ## runtime install (idempotent)

dev: $(VENV)/.installed-dev       ## runtime + Spark + test/lint tools

# Every process imports the packages' sources; with PYTHONDONTWRITEBYTECODE set (as on the CI
# machines) none would be cached, and each process (a role, each elanus command) compiled
# them all again: ~0.45 s of a proxy's 1.6 s start. compileall writes the bytecode once;
# Python reads it whatever that variable says, and compiles a source edited since anew.
bytecode: | $(PY)                 ## compile the packages' sources (up to date: no work)
	@$(PY) -m compileall -q -j 0 $(LINT_DIRS) > /dev/null

run: venv bytecode                ## a standalone server in ./elanus-data, its console on :9091 (ARGS="--port 9000", WEBUI_PORT=0: off)
	$(VENV)/bin/elanus standalone --webui-port $(WEBUI_PORT) $(ARGS)

# Two phases. First every test not marked serial, in TEST_WORKERS pytest-xdist workers, each
# test file whole in one (its module-scoped stacks start once), the files that use Spark in
# one worker (one JVM), the longest first (tests/scheduling.py): most tests wait on the servers they start, so two workers on 2 cores take
# the suite from about 25 min to 13 (clean-clone runs: parallel 10:28-11:00, serial
# 2:33-2:44; three workers were measured when the phase took 12:04 and gave 10:47-10:57,
# but one run in two failed a connect timeout and a standalone's clean log). Then the serial tests alone, in one process: they hold time bounds that the
# other worker's load broke (a write stall after kill -9 of a nats-server, a Strong read's
# p99 under unthrottled writers), one run in three. TEST_WORKERS=0: the first phase in one
# process too. A phase that PYTEST_ARGS leaves empty (pytest's exit 5) passes.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
test: dev bytecode                ## the whole test suite
	@rc=0; echo "== make test: every test not marked serial, $(TEST_WORKERS) worker(s)"; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --phase parallel --durations=30 $(PYTEST_ARGS) || rc=$$?; \
	[ $$rc -eq 5 ] && rc=0; \
	rc2=0; echo "== make test: the serial tests, alone"; \
	$(PYTEST) --phase serial --durations=10 $(PYTEST_ARGS) || rc2=$$?; \
	[ $$rc2 -eq 5 ] && rc2=0; \
	[ $$rc -eq 0 ] && [ $$rc2 -eq 0 ]

# mypy and import-linter read the package-dir-mapped elanus namespace as one tree of links
# (.ci/nstree.py: build/namespace/elanus, rebuilt each run), so imports across packages resolve
test-unit: dev bytecode           ## the unit tier: no process, no server (tests/tiers.py), < 2 min
	$(PY) -m pytest -q -p no:cacheprovider -m "not integration" $(PYTEST_ARGS)

lint: dev                         ## ruff, mypy, the layering contracts
	$(VENV)/bin/ruff check $(LINT_DIRS) .ci tests
	$(VENV)/bin/ruff format --check $(LINT_DIRS) .ci tests
	$(PY) .ci/typecheck.py        # mypy over the namespace as one package
	$(PY) .ci/lint_imports.py     # lint-imports over the same tree

format: dev
	$(VENV)/bin/ruff format $(LINT_DIRS) .ci tests

bench: $(VENV)/.installed-bench bytecode  ## every bench/*.py script (not bench/_*.py, not quick.py), in name order
	@set -e; for script in $$(ls bench/[!_]*.py 2>/dev/null | sort); do \
		[ "$$script" = bench/quick.py ] && continue; \
		extra=""; [ "$$script" = bench/ingest.py ] && extra="--also-768"; \
		echo "== $$script $$extra $(ARGS)"; $(PY) $$script $$extra $(ARGS); \
	done

bench-quick: $(VENV)/.installed-dev bytecode  ## the key ratios in < 1 min, beside bench/README.md's (ARGS="--record")
	$(PY) bench/quick.py $(ARGS)

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
