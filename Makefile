# Two entry points, each self-sufficient from a fresh clone:
#   make run   - set up the virtual environment, replay the built-in fixtures and build the
#                report site into site/ (open site/index.html); `make site` is the same
#   make test  - set up the virtual environment and run lint, type check and the test suite
# The virtual environment is made from the distribution's CPython (/usr/bin/python3) when
# it is 3.11 or newer and can make one: Debian builds it with profile-guided and link-time
# optimisation and links libpython into the executable, which pyenv's default build (the
# first python3 on PATH on our machines) does not, and the replay took 16% less time on it
# on average (docs/performance-history.md, eleventh round). Otherwise the first python3 on
# PATH; `make PYTHON=...` picks another (then `make clean` first, so that .venv is made
# again).
SYSTEM_PYTHON := /usr/bin/python3
PYTHON ?= $(shell $(SYSTEM_PYTHON) -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && echo $(SYSTEM_PYTHON) || echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run site test lint typecheck venv clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,inspect]' -c constraints.txt
	$(BIN)/python -m compileall -q src/sandbox_replay
	touch $(STAMP)

venv: $(STAMP)

# The committed site/ is built with SOURCE_DATE_EPOCH unset, so it records no build time
# and a rebuild from unchanged fixtures and templates gives the same bytes.
run: site

# Bytecode is written first, as a wheel's install does: with PYTHONDONTWRITEBYTECODE set,
# an editable install would otherwise compile every edited module on every run.
site: $(STAMP)
	$(BIN)/python -m compileall -q src/sandbox_replay
	env -u SOURCE_DATE_EPOCH $(BIN)/sandbox-replay build fixtures --out site --rebuild

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest

clean:
	rm -rf $(VENV) out
