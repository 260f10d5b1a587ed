# Two set-up commands for a fresh Debian/Ubuntu machine: `make demo` and `make test`.
# Both install what they need: Debian packages (when root), a virtualenv, the package (editable).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSTEM_PACKAGES := openmpi-bin libopenmpi-dev openfoam openfoam-examples iproute2 gcc make procps binutils
PYTEST_ARGS ?=

.PHONY: all setup system-deps venv pmpi demo test lint format crds clean

all: test

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "system packages: present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing system packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else echo "warning: missing system packages:$$missing (not root: install them with apt-get)"; fi

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# hatchling's editable install is a plain .pth entry: no import hook on `flux run`'s start-up, no warning
	$(PY) -m pip install -q -e '.[dev]'
	@# byte-compile once: CLI start-up matters (`flux run` latency) and PYTHONDONTWRITEBYTECODE may be set
	@$(PY) -m compileall -q broker miniclusters elasticity bursting >/dev/null
	@touch $(STAMP)

venv: $(STAMP)

pmpi: venv
	@$(BIN)/minicluster pmpi build >/dev/null && echo "PMPI profiler: built"

setup: system-deps venv pmpi

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: setup lint
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

crds: venv
	$(BIN)/minicluster crd --output crds/miniclusters.dev_miniclusters.yaml

demo: setup
	bash examples/demo.sh

clean:
	rm -rf $(VENV) build *.egg-info
