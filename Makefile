# The task runner: every target runs in the virtual environment `bash .ci/setup` makes (.venv).
#
#   make demo           the sandbox demo on the API server emulator (ARGS="--pods 5 ...")
#   make demo-real      the same demo on the real Kubernetes control plane (builds it first)
#   make test           what CI runs (.ci/run): lint, then the whole suite; builds the real
#                       control plane first when a Go >= 1.26 is there (CI=true: it must be)
#   make fast           the unit tiers: no server, no subprocess, well under a minute
#   make lint           ruff, ruff format --check, mypy (strict over controller/, lenient over
#                       tests/ and bench/: mypy-tests.ini), lint-imports
#   make bench          bench/e2e --quick (ARGS="..." for a full run)
#   make control-plane  build the real control plane and the nodes' kubelet (.ci/build-control-plane)
#   make format         ruff format + ruff check --fix
#
# PYTEST_ARGS="..." is passed to pytest by test and fast (e.g. PYTEST_ARGS="-x tests/pod").
VENV ?= .venv
ARGS ?=
PYTEST_ARGS ?=
PY := $(VENV)/bin/python
# The console scripts, not `python -m`: with the repository root first on sys.path its `cmd`
# package would shadow the standard library's (pdb imports it).
BIN := $(VENV)/bin
PYTEST := $(BIN)/pytest -q -p no:cacheprovider
LINT_PATHS := controller cmd tests bench
# bench/'s scripts run as `python bench/<name>.py`: they import `harness` from bench/ (hence
# MYPYPATH) and the e2e package as `bench.e2e`, so mypy is given them as modules by those names.
BENCH_MODULES := -p bench.e2e -m harness \
	$(foreach f,$(filter-out bench/harness.py,$(wildcard bench/*.py)),-m bench.$(basename $(notdir $(f))))

# Subprocesses the tests and the demo start (python -m cmd.controller, lint-imports, helm) find
# the environment's interpreter and tools first.
export PATH := $(abspath $(VENV))/bin:$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: setup venv demo demo-real test fast lint format bench control-plane control-plane-if-go

setup:
	bash .ci/setup

venv:
	@test -x $(PY) || { echo "no $(VENV): run \`bash .ci/setup\` first (it makes it)" >&2; exit 1; }

demo: venv
	$(PY) -m controller.sandbox.demo $(ARGS)

demo-real: venv control-plane
	$(PY) -m controller.sandbox.demo --control-plane real $(ARGS)

# The slow tiers are marked by directory (tests/conftest.py); `server` marks the unit tests that
# start an ovsdb-server or a subprocess.
fast: venv
	$(PYTEST) -m "not slow and not server" $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/mypy --config-file mypy-tests.ini
	MYPYPATH=bench $(BIN)/mypy --config-file mypy-tests.ini $(BENCH_MODULES)
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format $(LINT_PATHS)
	$(BIN)/ruff check --fix $(LINT_PATHS)

test: venv control-plane-if-go lint
	$(PYTEST) $(PYTEST_ARGS)

bench: venv
	$(PY) bench/e2e $(or $(ARGS),--quick)

control-plane:
	bash .ci/build-control-plane

# Without a Go >= 1.26 the build script says so in one sentence (exit 3) and the realcp tests
# skip; under CI=true that is a failure, as CI must run them.
control-plane-if-go:
	@bash .ci/build-control-plane || { rc=$$?; \
	  if [ $$rc = 3 ] && [ "$${CI:-}" != true ]; then echo "make test: the realcp tests will be skipped (no Go >= 1.26 to build the real control plane)"; \
	  else exit $$rc; fi; }
