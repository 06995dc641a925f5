#!/usr/bin/env bash
# The main job end to end (run by `make demo`): a generated graph, and, when the
# shared datasets are present, real ones, from edge file to trained model.
#   WORK      scratch folder for every output (default: work)
#   DATASETS  folder of the real datasets (default: ../shared/datasets)
#   PY        python of the project's environment (default: .venv/bin/python)
set -euo pipefail
WORK=${WORK:-work}
DATASETS=${DATASETS:-../shared/datasets}
PY=${PY:-.venv/bin/python}
SCALE=${SCALE:-18}
gs() { "$PY" -m graphstream "$@"; }
step() { printf '\n== %s\n' "$*" >&2; }
mkdir -p "$WORK"

step "1. Generate a Graph500 R-MAT graph (scale $SCALE, edge factor 16) into a Zarr graph store"
gs generate rmat "$WORK/rmat.zarr" --scale "$SCALE" --edge-factor 16 --seed 1 --overwrite --json
step "2. Its statistics, computed by streaming"
gs info "$WORK/rmat.zarr" --json
step "3. Partition it into 8 parts (default partitioner: coarse-refine) and build the partitioned dataset"
gs partition "$WORK/rmat.zarr" -k 8 --out "$WORK/rmat-parts" --overwrite --json

if [ ! -d "$DATASETS" ]; then
    step "No datasets folder at $DATASETS: skipping the real-data part (set DATASETS=...)"
    exit 0
fi

step "4. Ingest a real edge file (SNAP web-NotreDame, gzip) and describe it"
gs ingest "$DATASETS/snap/web-NotreDame.txt.gz" "$WORK/notredame.zarr" --overwrite --json
gs info "$WORK/notredame.zarr" --json
step "5. Partition it with every streaming partitioner at k=8 (replication factor = owned + halo / nodes)"
for algo in coarse-refine spring 2ps-l hdrf dbh hash; do
    gs partition "$WORK/notredame.zarr" -k 8 --algo "$algo" --json
done

step "6. Cora with node data: partition into 4 parts with features split, then train GCN by model averaging"
gs dataset cora "$WORK/cora" --root "$DATASETS" --overwrite --json
gs partition "$WORK/cora/graph.zarr" -k 4 --algo spring --out "$WORK/cora-parts" --nodes "$WORK/cora" --overwrite --json
gs train "$WORK/cora-parts" --model gcn --workers 2 --epochs 100 --json
step "   ... and the same model trained on the whole graph, for comparison"
gs train "$WORK/cora-parts" --model gcn --centralized --epochs 100 --json

step "7. A dynamic graph: CollegeMsg events -> snapshots (keyframes + deltas) -> PGC partitions -> T-GCN"
gs ingest "$DATASETS/temporal/CollegeMsg.txt" "$WORK/collegemsg.zarr" --one-based --time-column 2 --overwrite --json
gs snapshots "$WORK/collegemsg.zarr" "$WORK/collegemsg-snap.zarr" --num-snapshots 30 --edge-life 4 --overwrite --json
gs partition "$WORK/collegemsg-snap.zarr" -k 4 --algo pgc --out "$WORK/collegemsg-parts" --overwrite --json
gs train "$WORK/collegemsg-parts" --model tgcn --workers 2 --epochs 5 --transfer delta --json
step "Done: outputs are in $WORK/"
