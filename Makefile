# The two README commands (`make demo`, `make test`) and the linters; each sets up .venv first.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# The main job kills the worker at the worst instant (the provider performed the effect, the
# outcome is not recorded yet), flushes Redis and resumes every run in a new process.
DEMO_ARGS ?= --runs 5 --kill-at after-provider-commit --seed 7

.PHONY: demo test lint venv stack-up stack-down

# (Re)install when pyproject.toml changes; pip's cache is used when present, never required.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/agentledger demo $(DEMO_ARGS)

test: venv
	$(BIN)/pytest -p no:cacheprovider --timeout=300 $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check services tests bench
	$(BIN)/mypy

stack-up: venv
	$(BIN)/agentledger stack up

stack-down: venv
	$(BIN)/agentledger stack down
