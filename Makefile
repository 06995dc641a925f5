# graphstream: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
WORK   ?= work
DATASETS ?= ../shared/datasets

.PHONY: setup test demo clean

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e ".[train,test]"
	touch $@

setup: $(VENV)/.installed

# Runs the whole test suite (GPU tests skip without a GPU).
test: setup
	$(PY) -m pytest -q tests

# The main job end to end, on a generated graph and, when present, a real dataset.
demo: setup
	WORK=$(WORK) DATASETS=$(DATASETS) PY=$(PY) bash tools/demo.sh

clean:
	rm -rf $(WORK)
