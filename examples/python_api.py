"""Train, score, run and export a detector from Python with ``lucidyolo.Model``, without the ``lucid`` command.

    python examples/python_api.py --workdir /tmp/lucid-api
    python examples/python_api.py --data-root /data/my_set --workdir work \\
        --img-size 640 --epochs 100 --batch-size 16 --limit-batches 0
    python examples/python_api.py --data-root /data/my_set --weights runs/det/version_3 --finetune-epochs 5

Without ``--data-root`` a tiny synthetic set (coloured shapes, four classes) is
written into the work folder first. The defaults are small on purpose: one
epoch of two batches at 64 px finishes in seconds on a CPU, so the scores it
prints are near zero; the second command above is a real run.

Each step is the library call behind a ``lucid`` command, with the same
arguments and the same errors: every user mistake raises
:class:`lucidyolo.errors.UserError` (``ConfigError``, ``DataError``, ...) whose
message says what, why and how to fix it; anything else is a bug.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lucidyolo import Model
from lucidyolo.data.layouts import open_source
from lucidyolo.errors import UserError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", type=Path, help="COCO, YOLO or DOTA root (default: write a synthetic set)")
    p.add_argument("--workdir", type=Path, default=Path("lucid-api-work"), help="runs, reports and data go here")
    p.add_argument("--img-size", type=int, default=64, help="network input side, a multiple of 32")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--limit-batches", type=int, default=2, help="training batches per epoch; 0 = all")
    p.add_argument("--image", type=Path, help="image to predict on (default: the first val image)")
    p.add_argument("--conf", type=float, default=0.25, help="confidence threshold for predictions")
    p.add_argument("--weights", help="start step 2 from these weights (checkpoint, weights file, run folder, URL)")
    p.add_argument("--finetune-epochs", type=int, default=0,
                   help="then fine-tune from the run folder of step 2 for this many epochs (step 6)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir.resolve()
    # 1. An untrained model description. Tasks come from the same registry as `lucid fit det`
    #    (an alias such as "detect" works, and so do plugins' tasks, e.g. "cls").
    model = Model.new("det", variant="n")

    data_root = args.data_root
    if data_root is None:
        # The task's own synthetic-set hook (what the embedded `lucid fit det` run trains on).
        # Hooks take keyword arguments; a second call with the same arguments reuses the files.
        data_root = model.spec.make_synthetic(out_dir=workdir / "data", num_images=16, img_size=args.img_size, seed=0)
        print(f"synthetic set: {data_root}")

    # 2. Train. The config resolves exactly as the CLI's: schema defaults < packaged preset < files
    #    < overrides. Overrides are nested dicts here (`trainer={"max_epochs": 2}`); `trainer__max_epochs=2`
    #    and `**{"trainer.max_epochs": 2}` say the same. Unknown keys and bad values raise ConfigError
    #    before anything runs.
    trainer: dict[str, object] = {"max_epochs": args.epochs, "default_root_dir": str(workdir / "runs")}
    if args.limit_batches:
        trainer["limit_train_batches"] = args.limit_batches
    # num_workers 0 loads in this process: worker start-up would cost more than a tiny run.
    data = {"img_size": args.img_size, "batch_size": args.batch_size, "num_workers": 0}
    fit = model.fit(
        data_root,
        config="det_nano_smoke.yaml",  # a packaged preset by bare name; a YAML path works too
        weights=args.weights,  # `--model.weights`: classes are matched by name (fit.transfer says how)
        data=data,
        trainer=trainer,
    )
    cfg = fit.config
    print(f"config: variant {cfg['model']['variant']}, img_size {cfg['data']['img_size']}, "
          f"{cfg['trainer']['max_epochs']} epoch(s)")
    shown = ", ".join(f"{k} {fit.metrics[k]:.4f}" for k in model.spec.metrics.keys if k in fit.metrics)
    print(f"run folder {fit.run_dir}; best checkpoint {fit.best.name}; {shown}")
    # From here on `model` is that best checkpoint (model.checkpoint == fit.best).

    # 3. Score the val split with the task's protocol (pycocotools for det), both decode paths,
    #    at the size the model was trained at. The report is also written as JSON.
    report = model.evaluate(output=workdir / "eval.json")
    for path, by_type in report.paths.items():  # "e2e" (one-to-one top-k) and "nms"
        for iou_type in by_type:
            stats = report.stats_of(path, iou_type)
            print(f"eval {path} {iou_type}: AP {stats['AP']:.4f}, AP50 {stats['AP50']:.4f}")

    # 4. Predict on one image (a path, a folder, a glob, a numpy array (BGR, as cv2.imread gives, unless
    #    channels="rgb") or a PIL image); model(image) says the same. Tensors are in the image's own
    #    pixels; the checkpoint carries class names and training size.
    image = args.image or open_source(data_root, "val", model.spec.fields).image_path(0)
    (one,) = model.predict(image, conf=args.conf)
    print(f"{len(one)} detection(s) at conf >= {args.conf} in {image} ({one.width}x{one.height})")
    assert one.boxes is not None
    for box in one.boxes[:5]:  # one view per row: box.xyxy (1, 4), box.conf (1,), box.cls (1,)
        print(f"  {model.names[int(box.cls[0])]} {float(box.conf[0]):.3f} "
              f"box {[round(v, 2) for v in box.xyxy[0].tolist()]}")  # x1, y1, x2, y2
    drawn = one.save(workdir / "prediction.jpg")  # the task's drawing; one.plot() is the same as an array
    print(f"drawn: {drawn}")

    # 5. Export the deployed graph (trunk + o2o branch + top-k) to ONNX, beside the checkpoint.
    onnx = model.export("onnx")
    print(f"onnx: {onnx.path} (outputs {', '.join(onnx.details['outputs'])})")

    # 6. Fine-tune: a loaded model (here the run folder: its best checkpoint) starts from its weights
    #    (`model.weights`), the backbone frozen for the first epoch. tuned.transfer is transfer.json.
    if args.finetune_epochs:
        tuned = Model.load(fit.run_dir).fit(
            data_root, config="det_nano_smoke.yaml", data=data,
            trainer={**trainer, "max_epochs": args.finetune_epochs},
            model={"freeze": "backbone", "freeze_epochs": 1},
        )
        assert tuned.transfer is not None
        print(f"fine-tuned into {tuned.run_dir}: {tuned.transfer['summary']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as err:  # what / why / fix, as the CLI prints it; exit 2 like `lucid`
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
