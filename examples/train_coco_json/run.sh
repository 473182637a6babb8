#!/usr/bin/env bash
# Check, train, score and run a detector on a COCO JSON export (image folders + JSON files).
#
#   examples/train_coco_json/run.sh TRAIN_IMAGES TRAIN_JSON VAL_IMAGES VAL_JSON [WORKDIR [extra `lucid fit` options...]]
#
# TRAIN_IMAGES, VAL_IMAGES  folders the JSON files' `file_name` entries are relative to.
# TRAIN_JSON, VAL_JSON      COCO instances files (images, annotations with bbox, categories).
# WORKDIR                   where runs/, eval/ and predictions/ are written (default: ./lucid-work).
# Anything after WORKDIR goes to `lucid fit` last, so it wins over the knobs below.
#
# Knobs (environment variables): IMG_SIZE (640), EPOCHS (100), CONF (0.25, for predict),
# LUCID (the lucid executable, default `lucid` on PATH).
#
# Files already in a recognised layout (e.g. train2017/ + annotations/instances_train2017.json)
# need none of this: pass the folder as --data-root (README.md lists the layouts).
set -euo pipefail

if [[ $# -lt 4 ]]; then
    sed -n '2,15p' "$0" >&2
    exit 2
fi
TRAIN_IMAGES=$1
TRAIN_JSON=$2
VAL_IMAGES=$3
VAL_JSON=$4
WORKDIR=${5:-lucid-work}
shift $(( $# >= 5 ? 5 : 4 ))
IMG_SIZE=${IMG_SIZE:-640}
EPOCHS=${EPOCHS:-100}
CONF=${CONF:-0.25}
LUCID=${LUCID:-lucid}

# 1. Read both JSON files the way training will: a malformed bbox, an undeclared category
#    id or a missing image file is named here, before any training.
"$LUCID" data check --train-images "$TRAIN_IMAGES" --train-ann-file "$TRAIN_JSON" \
    --val-images "$VAL_IMAGES" --val-ann-file "$VAL_JSON"

# 2. Train. The four paths are ordinary config keys (data.train_images, ...), so they are
#    saved in the run's config.yaml and checkpoints like every other setting. Category ids
#    need not be contiguous: they are mapped to class indices and back again in eval output.
RUNS=$WORKDIR/runs
"$LUCID" fit det --data.train_images "$TRAIN_IMAGES" --data.train_ann_file "$TRAIN_JSON" \
    --data.val_images "$VAL_IMAGES" --data.val_ann_file "$VAL_JSON" \
    --data.img_size "$IMG_SIZE" --trainer.max_epochs "$EPOCHS" --trainer.default_root_dir "$RUNS" "$@"

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
CKPT=$RUN/checkpoints/best.ckpt
[[ -f $CKPT ]] || CKPT=$RUN/checkpoints/last.ckpt
echo "checkpoint: $CKPT"

# 3. Score with pycocotools. No --data-root: eval reads the val paths from the checkpoint's
#    config (`lucid eval` takes no explicit JSON paths of its own).
"$LUCID" eval --checkpoint "$CKPT" --img-size "$IMG_SIZE" \
    --output "$WORKDIR/eval/report.json" --save-json "$WORKDIR/eval/detections.json"

# 4. Predict on the val images; boxes are in original-image pixels.
"$LUCID" predict --checkpoint "$CKPT" --source "$VAL_IMAGES" --conf "$CONF" \
    --save "$WORKDIR/predictions" --output "$WORKDIR/predictions.json"
