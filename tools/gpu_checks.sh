#!/usr/bin/env bash
# The checks that need a CUDA device or many cores, in one bounded run: the GPU tests, the trainer's
# transfer and GPU figures, and bench_distributed with 1..N workers. Each step has its own time limit
# and writes its output under OUT as it goes, so a run cut short keeps what it finished.
#
#   OUT=/tmp/gpu-checks [PYTHON=.venv/bin/python] [BD_SCALE=21] [BD_WORKERS="1 16 8 4 2"] \
#       [GPU_SCALE=18] [T_TESTS=130] [T_BD=400] [T_TRANSFER=120] [T_GPU=150] bash tools/gpu_checks.sh
#
# Then, here: tools/bench_distributed.py --render-log OUT/bd.jsonl --doc docs/distributed.md --section 16-core
# and tools/bench_train.py --render OUT/bt_merged.json --doc docs/trainer.md --section gpu (merge the
# transfer and gpu JSONs first). Figures from 2026-11-25 (one H200, 16 vCPUs): docs/distributed.md, docs/trainer.md.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:?set OUT to the folder for the results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 GRAPHSTREAM_PROGRESS=0
t0=$(date +%s)
elapsed() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$OUT/steps.txt"; }
{ nproc; lscpu | grep -E "Model name"; "$PYTHON" -c "import numba, numpy, torch, zarr, dask
print('numba', numba.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__, 'zarr', zarr.__version__,
      'dask', dask.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')"
} > "$OUT/env.txt" 2>&1
timeout "${T_TESTS:-130}" "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider tests/test_trainer.py \
  tests/test_trainer_dynamic.py > "$OUT/gpu_tests.txt" 2>&1
elapsed "gpu tests" $?
# shellcheck disable=SC2086   # the worker counts are words
timeout "${T_BD:-400}" "$PYTHON" tools/bench_distributed.py --scale "${BD_SCALE:-21}" --workers ${BD_WORKERS:-1 16 8 4 2} \
  --workdir /tmp/gpu-checks-bd --log "$OUT/bd.jsonl" > "$OUT/bd.json" 2> "$OUT/bd.err"
elapsed "bench_distributed" $?
timeout "${T_TRANSFER:-120}" "$PYTHON" tools/bench_train.py --sections transfer --work /tmp/gpu-checks-bt \
  > "$OUT/bt_transfer.json" 2> "$OUT/bt_transfer.err"
elapsed "bench_train transfer" $?
timeout "${T_GPU:-150}" "$PYTHON" tools/bench_train.py --sections gpu --gpu-scale "${GPU_SCALE:-18}" \
  --work /tmp/gpu-checks-bt > "$OUT/bt_gpu.json" 2> "$OUT/bt_gpu.err"
elapsed "bench_train gpu" $?
