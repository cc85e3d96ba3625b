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

# The Avro readers compiled with mypyc (agentledger/events/avro_compiled.py); NATIVE=0 (or no
# compiler) leaves them interpreted. A build older than its sources is never used (hash check).
NATIVE ?= 1
NATIVE_STAMP := $(VENV)/.native
NATIVE_SOURCES := $(addprefix services/agentledger/events/,avro_fast.py avro_compiled.py models.py) \
  $(wildcard schemas/*.avsc)
$(NATIVE_STAMP): $(STAMP) $(NATIVE_SOURCES)
ifeq ($(NATIVE),1)
	@$(BIN)/python -m agentledger.events.avro_compiled >$(VENV)/native-build.log 2>&1 \
	  || echo "[make] compiled Avro readers not built (see $(VENV)/native-build.log): interpreted"
else
	rm -f services/agentledger/events/_avro_readers*
endif
	@touch $@

venv: $(STAMP) $(NATIVE_STAMP)

demo: venv
	$(BIN)/agentledger demo $(DEMO_ARGS)

test: venv
	$(BIN)/pytest -p no:cacheprovider --timeout=300 $(PYTEST_ARGS)

# mypy --strict checks the package and bench/ (pyproject.toml: [tool.mypy] packages).
lint: venv
	$(BIN)/ruff check services tests bench
	$(BIN)/ruff format --check services tests bench
	$(BIN)/mypy

stack-up: venv
	$(BIN)/agentledger stack up

stack-down: venv
	$(BIN)/agentledger stack down
