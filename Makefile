# The two README commands (`make demo`, `make test`) and the linters; each sets up .venv first.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test lint venv stack-up stack-down

# (Re)install when pyproject.toml changes; pip's cache is used when present, never required.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(BIN)/agentledger demo

test: venv
	$(BIN)/pytest -p no:cacheprovider --timeout=300 $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check services tests
	$(BIN)/mypy

stack-up: venv
	$(BIN)/agentledger stack up

stack-down: venv
	$(BIN)/agentledger stack down
