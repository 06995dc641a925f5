# graphstream: the two commands a newcomer needs are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
WORK   ?= work
DATASETS ?= ../shared/datasets

.PHONY: setup browser test test-dgl demo clean lint

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e ".[train,test,pyg,lint,serve]"
	touch $@

setup: $(VENV)/.installed

# Headless Chromium for the service's page test (tests/test_serve_page.py): Debian's chromium and
# chromium-driver, installed by apt-get as root when missing (nothing to do when they are there).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium chromium-driver >/dev/null; \
	else echo "make browser: chromium and chromium-driver are missing; install them as root" \
	  "(apt-get install chromium chromium-driver); the page test skips without them unless CI is set"; fi

# Runs the whole test suite (GPU tests skip without a GPU).
test: setup browser
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
