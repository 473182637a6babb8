#!/usr/bin/env bash
# Check, train, score and run a detector on your own YOLO-format dataset folder.
#
#   examples/train_yolo_folder/run.sh DATA_ROOT [WORKDIR [extra `lucid fit` options...]]
#
# DATA_ROOT  the folder holding data.yaml (or the yaml file itself); see README.md.
# WORKDIR    where runs/, eval/ and predictions/ are written (default: ./lucid-work).
# Anything after WORKDIR goes to `lucid fit` last, so it wins over the knobs below,
# e.g. `--model.variant s --data.batch_size 32 --trainer.devices 2`.
#
# Knobs (environment variables):
#   IMG_SIZE  network input side, a multiple of 32 (default 640)
#   EPOCHS    training epochs (default 100)
#   CONF      confidence threshold for `lucid predict` (default 0.25)
#   SOURCE    image, folder or quoted glob to predict on (default DATA_ROOT/images/val)
#   LUCID     the lucid executable (default: `lucid` on PATH, e.g. .venv/bin/lucid)
set -euo pipefail

if [[ $# -lt 1 ]]; then
    sed -n '2,16p' "$0" >&2
    exit 2
fi
DATA_ROOT=$1
WORKDIR=${2:-lucid-work}
shift $(( $# >= 2 ? 2 : 1 ))
IMG_SIZE=${IMG_SIZE:-640}
EPOCHS=${EPOCHS:-100}
CONF=${CONF:-0.25}
SOURCE=${SOURCE:-$DATA_ROOT/images/val}
LUCID=${LUCID:-lucid}

# 1. Read every label file the way training will. A malformed row stops here with its
#    file:line in seconds, instead of an epoch into training.
"$LUCID" data check --data-root "$DATA_ROOT"

# 2. Train. num_classes is read from data.yaml's names. Each run gets a fresh
#    runs/version_N folder (config.yaml, results.csv, TensorBoard logs, checkpoints/).
RUNS=$WORKDIR/runs
"$LUCID" fit det --data-root "$DATA_ROOT" --data.img_size "$IMG_SIZE" \
    --trainer.max_epochs "$EPOCHS" --trainer.default_root_dir "$RUNS" "$@"

# `lucid fit` prints the run folder but does not hand it to a script, so take the
# highest version number: the run that just finished.
RUN=
latest=-1
for dir in "$RUNS"/version_*; do
    n=${dir##*/version_}
    if [[ $n =~ ^[0-9]+$ ]] && (( n > latest )); then
        latest=$n
        RUN=$dir
    fi
done
# best.ckpt holds the epoch with the highest val mAP50-95; last.ckpt exists even when
# validation never ran (trainer.check_val_every_n_epoch > EPOCHS).
CKPT=$RUN/checkpoints/best.ckpt
[[ -f $CKPT ]] || CKPT=$RUN/checkpoints/last.ckpt
echo "checkpoint: $CKPT"

# 3. Score the val split with pycocotools (both decode paths: one-to-one top-k and NMS).
#    --img-size is given because eval otherwise uses the task's default (640), not the run's.
"$LUCID" eval --checkpoint "$CKPT" --data-root "$DATA_ROOT" --img-size "$IMG_SIZE" \
    --output "$WORKDIR/eval/report.json" --save-json "$WORKDIR/eval/detections.json"

# 4. Run the model on images: one line per detection, boxes in original-image pixels,
#    drawn copies in predictions/ and everything in predictions.json.
"$LUCID" predict --checkpoint "$CKPT" --source "$SOURCE" --conf "$CONF" \
    --save "$WORKDIR/predictions" --output "$WORKDIR/predictions.json"
