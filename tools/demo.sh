#!/usr/bin/env bash
# The main job end to end (run by `make demo`): a generated graph, and, when the
# shared datasets are present, real ones, from edge file to trained model.
# Each step prints one readable line; the full --json output of every command is
# kept under $WORK/json/ (NN-step.json), and the end prints what was produced.
#   WORK      scratch folder for every output (default: work)
#   DATASETS  folder of the real datasets (default: ../shared/datasets)
#   PY        python of the project's environment (default: .venv/bin/python)
set -euo pipefail
WORK=${WORK:-work}
DATASETS=${DATASETS:-../shared/datasets}
PY=${PY:-.venv/bin/python}
SCALE=${SCALE:-18}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$WORK/json"
step() { printf '\n== %s\n' "$*" >&2; }
# run NAME FILE ARGS...: graphstream ARGS --json > $WORK/json/FILE.json, then its summary line
run() {
    local name=$1 file="$WORK/json/$2.json"; shift 2
    "$PY" -m graphstream "$@" --json > "$file"
    "$PY" "$HERE/demo_report.py" step "$name" "$file" >&2
}
finish() { "$PY" "$HERE/demo_report.py" final "$WORK" >&2; }

step "1. Generate a Graph500 R-MAT graph (scale $SCALE, edge factor 16) into a Zarr graph store"
run generate 1-generate generate rmat "$WORK/rmat.zarr" --scale "$SCALE" --edge-factor 16 --seed 1 --overwrite
step "2. Its statistics, computed by streaming"
run info 2-info info "$WORK/rmat.zarr"
step "3. Partition it into 8 parts (default partitioner: coarse-refine), build the partitioned dataset, verify it"
run partition 3-partition partition "$WORK/rmat.zarr" -k 8 --out "$WORK/rmat-parts" --overwrite
run verify 3-verify verify "$WORK/rmat-parts"

if [ ! -d "$DATASETS" ]; then
    step "No datasets folder at $DATASETS: skipping the real-data part (set DATASETS=...)"
    finish
    exit 0
fi

step "4. Ingest a real edge file (SNAP web-NotreDame, gzip) and describe it"
run ingest 4-ingest ingest "$DATASETS/snap/web-NotreDame.txt.gz" "$WORK/notredame.zarr" --overwrite
run info 4-info info "$WORK/notredame.zarr"
step "5. Partition it with every streaming partitioner at k=8 (replication factor = owned + halo / nodes)"
for algo in coarse-refine spring 2ps-l hdrf dbh hash; do
    run partition "5-partition-$algo" partition "$WORK/notredame.zarr" -k 8 --algo "$algo"
done

step "6. Cora with node data: partition into 4 parts with features split, then train GCN by model averaging"
run dataset 6-dataset dataset cora "$WORK/cora" --root "$DATASETS" --overwrite
run partition 6-partition partition "$WORK/cora/graph.zarr" -k 4 --algo spring --out "$WORK/cora-parts" \
    --nodes "$WORK/cora" --overwrite
run train 6-train-averaged train "$WORK/cora-parts" --model gcn --workers 2 --epochs 100
step "   ... and the same model trained on the whole graph, for comparison"
run train 6-train-central train "$WORK/cora-parts" --model gcn --centralized --epochs 100

step "7. A dynamic graph: CollegeMsg events -> snapshots (keyframes + deltas) -> PGC partitions -> T-GCN"
run ingest 7-ingest ingest "$DATASETS/temporal/CollegeMsg.txt" "$WORK/collegemsg.zarr" --one-based \
    --time-column 2 --overwrite
run snapshots 7-snapshots snapshots "$WORK/collegemsg.zarr" "$WORK/collegemsg-snap.zarr" --num-snapshots 30 \
    --edge-life 4 --overwrite
run partition 7-partition partition "$WORK/collegemsg-snap.zarr" -k 4 --algo pgc --out "$WORK/collegemsg-parts" \
    --overwrite
run train 7-train train "$WORK/collegemsg-parts" --model tgcn --workers 2 --epochs 5 --transfer delta
finish
