# Two entry points, each self-sufficient from a fresh clone:
#   make run   - set up the virtual environment and replay the built-in fixtures
#   make test  - set up the virtual environment and run lint, type check and the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/sandbox-replay run --input fixtures/first_wave --out out/first_wave --acceptance-out out/first_wave/acceptance.json
	$(BIN)/sandbox-replay run-sandbox-bundle --input fixtures/bundles/exported_bundle --out out/exported_bundle

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

clean:
	rm -rf $(VENV) out
