# graphstream: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
WORK   ?= work
DATASETS ?= ../shared/datasets

.PHONY: setup test test-dgl demo clean lint

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e ".[train,test,pyg,lint,serve]"
	touch $@

setup: $(VENV)/.installed

# Runs the whole test suite (GPU tests skip without a GPU).
test: setup
	$(PY) -m pytest -q tests

# The DGL export tests, in their own environment (DGL 2.1 needs torch<=2.2.1, numpy<2).
test-dgl:
	bash tools/dgl-env.sh
	.venv-dgl/bin/python -m pytest -q tests/dgl

# The main job end to end, on a generated graph and, when present, a real dataset.
demo: setup
	WORK=$(WORK) DATASETS=$(DATASETS) PY=$(PY) bash tools/demo.sh

clean:
	rm -rf $(WORK)

# Style and layering: ruff (pyproject [tool.ruff]) and import-linter (pyproject [tool.importlinter]).
lint: setup
	$(VENV)/bin/ruff check graphstream trainer tools tests
	$(VENV)/bin/lint-imports
