"""Train, score and run a detector from Python, without the ``lucid`` command.

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

from lucidyolo.config.resolve import resolve_config
from lucidyolo.data.layouts import open_source
from lucidyolo.errors import UserError
from lucidyolo.tasks.registry import get_task


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
                   help="then fine-tune from the best checkpoint of step 2 for this many epochs (step 5)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir.resolve()
    # The task registry is the same one `lucid fit det` uses; plugins' tasks are found the same way.
    spec = get_task("det")

    data_root = args.data_root
    if data_root is None:
        # The task's own synthetic-set hook (what the embedded `lucid fit det` run trains on).
        # Hooks take keyword arguments; a second call with the same arguments reuses the files.
        data_root = spec.make_synthetic(out_dir=workdir / "data", num_images=16, img_size=args.img_size, seed=0)
        print(f"synthetic set: {data_root}")

    # 1. Resolve a config exactly as the CLI does: schema defaults < packaged preset < files
    #    < overrides. Overrides are nested dicts here, where the CLI has --section.key options.
    #    Unknown keys and bad values raise ConfigError before anything runs.
    trainer: dict[str, object] = {"max_epochs": args.epochs, "default_root_dir": str(workdir / "runs")}
    if args.limit_batches:
        trainer["limit_train_batches"] = args.limit_batches
    cfg = resolve_config(
        spec,
        configs=["det_nano_smoke.yaml"],  # a packaged preset by bare name; a YAML path works too
        overrides={
            # num_workers 0 loads in this process: worker start-up would cost more than a tiny run.
            "data": {"img_size": args.img_size, "batch_size": args.batch_size, "num_workers": 0},
            "trainer": trainer,
            # `model.weights` is `--model.weights`: classes are matched by name (the report says how).
            **({"model": {"weights": args.weights}} if args.weights else {}),
        },
        data_root=data_root,
    )
    print(f"config: variant {cfg.model.variant}, img_size {cfg.data.img_size}, {cfg.trainer.max_epochs} epoch(s)")

    # 2. Train. Only the three documented keys of the returned dict are used here.
    from lucidyolo.engine.fit import run_fit

    result = run_fit(spec, cfg)
    run_dir, best, metrics = Path(result["run_dir"]), Path(result["best"]), result["metrics"]
    shown = ", ".join(f"{k} {metrics[k]:.4f}" for k in spec.metrics.keys if k in metrics)
    print(f"run folder {run_dir}; best checkpoint {best.name}; {shown}")

    # 3. Score the val split with the task's protocol (pycocotools for det), both decode paths.
    #    img_size is passed because eval otherwise uses the task's default (640), not the run's.
    from lucidyolo.engine.evaluate import run_eval

    report = run_eval(checkpoint=best, data_root=data_root, img_size=args.img_size, output=workdir / "eval.json")
    for path, by_type in report["paths"].items():  # "e2e" (one-to-one top-k) and "nms"
        for iou_type, result_of_type in by_type.items():
            stats = result_of_type["stats"]
            print(f"eval {path} {iou_type}: AP {stats['AP']:.4f}, AP50 {stats['AP50']:.4f}")

    # 4. Predict on one image. The checkpoint carries the class names and the training size.
    from lucidyolo.engine.predict import run_predict

    image = args.image or open_source(data_root, "val", spec.fields).image_path(0)
    (one,) = run_predict(best, str(image), conf=args.conf)
    print(f"{len(one['predictions'])} detection(s) at conf >= {args.conf} in {image} ({one['width']}x{one['height']})")
    for p in one["predictions"][:5]:
        print(f"  {p['name']} {p['score']:.3f} box {p['box']}")  # box: x1, y1, x2, y2 in image pixels

    # 5. Fine-tune: the same config with `model.weights` (here the run folder: its best checkpoint),
    #    the backbone frozen for the first epoch. result["transfer"] is the run's transfer.json.
    if args.finetune_epochs:
        tuned_cfg = cfg.model_copy(update={
            "model": cfg.model.model_copy(update={"weights": str(run_dir), "freeze": "backbone", "freeze_epochs": 1}),
            "trainer": cfg.trainer.model_copy(update={"max_epochs": args.finetune_epochs}),
        })
        tuned = run_fit(spec, tuned_cfg)
        print(f"fine-tuned into {tuned['run_dir']}: {tuned['transfer']['summary']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as err:  # what / why / fix, as the CLI prints it; exit 2 like `lucid`
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
