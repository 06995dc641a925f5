#!/usr/bin/env bash
# Creates the DGL environment .venv-dgl in one command: Python 3.11, DGL 2.1.0 (the newest on PyPI),
# torch 2.2.1, numpy 1.26, torchdata 0.7.1, pandas, pydantic, PyYAML, and graphstream itself
# (editable, with its test extras), every version pinned by tools/dgl-constraints.txt.
#
#   bash tools/dgl-env.sh                  # then: .venv-dgl/bin/python -m pytest -q tests/dgl
#
# DGL 2.1 ships native parts built against torch 2.0.0 .. 2.2.1 only, hence its own environment
# (the main .venv has torch 2.13 and numpy 2). PyPI's torch 2.2.1 is the CUDA 12.1 build
# (about 2.6 GB with its nvidia-* wheels; PyPI has no CPU build); it runs on CPU as well.
# Re-running is a no-op while .venv-dgl is newer than this script, the constraints and pyproject.toml.
# Env: DGL_VENV (default .venv-dgl), PYTHON311 (default python3.11).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=${DGL_VENV:-.venv-dgl}
PY=${PYTHON311:-python3.11}
STAMP="$VENV/.installed"

if [[ -f $STAMP && $STAMP -nt tools/dgl-constraints.txt && $STAMP -nt pyproject.toml && $STAMP -nt tools/dgl-env.sh ]]; then
    echo "dgl-env: $VENV is up to date" >&2
    exit 0
fi
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "dgl-env: $PY not found: DGL 2.1.0 has wheels for Python 3.8 to 3.11 only (set PYTHON311)" >&2
    exit 2
fi
start=$(date +%s)
"$PY" -m venv --clear "$VENV"
# One resolve for everything, so that the pins hold jointly.
"$VENV/bin/pip" install -q --disable-pip-version-check -c tools/dgl-constraints.txt \
    dgl torch torchdata numpy pandas pydantic pyyaml -e ".[test]"
"$VENV/bin/python" - <<'EOF'
import dgl, dgl.distributed, numpy, torch
import graphstream.export.dgl  # noqa: F401
assert dgl.__version__ == "2.1.0" and numpy.__version__.startswith("1.26"), (dgl.__version__, numpy.__version__)
print(f"dgl-env: dgl {dgl.__version__}, torch {torch.__version__}, numpy {numpy.__version__}")
EOF
touch "$STAMP"
echo "dgl-env: $VENV ready in $(( $(date +%s) - start )) s" >&2
