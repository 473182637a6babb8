"""Cost of the detection objective (both assigners + dual loss, forward and backward) on CPU.

Compares, in one process and interleaved so the ratio is fair on a shared
machine: (a) the objective region alone, run on leaf copies of real n-model
outputs; (b) the assignment alone (both branches); (c) a full training step's
forward + objective + backward of the n model. Prints ONE JSON line with the
median times and the objective's share of the full step.

Usage: python benchmarks/objective.py [--batch 16] [--imgsz 640] [--gts 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from lucidyolo.losses.criterion import DetectionCriterion
from lucidyolo.models import create_model
from lucidyolo.structures.box_coder import ltrb_to_xyxy


def padded_targets(
    batch: int, imgsz: int, gts: int, num_classes: int, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Random GTs, sides 2-40 % of the image, every image holding ``gts`` real boxes."""
    g = torch.Generator().manual_seed(seed)
    side = (torch.rand(batch, gts, 2, generator=g) * 0.38 + 0.02) * imgsz
    centre = side / 2 + torch.rand(batch, gts, 2, generator=g) * (imgsz - side)
    return {
        "boxes": torch.cat([centre - side / 2, centre + side / 2], -1),
        "labels": torch.randint(0, num_classes, (batch, gts), generator=g),
        "mask": torch.ones(batch, gts, dtype=torch.bool),
    }


def leaf_outputs(outputs: dict) -> dict:
    """Detached, grad-requiring copies of the branch tensors (so backward stops at the head)."""
    copy = dict(outputs)
    for name in ("o2m", "o2o"):
        copy[name] = {k: v.detach().clone().requires_grad_() for k, v in outputs[name].items()}
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--gts", type=int, default=50)
    parser.add_argument("--classes", type=int, default=80)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = create_model("n", num_classes=args.classes).train()
    criterion = DetectionCriterion()
    images = torch.rand(args.batch, 3, args.imgsz, args.imgsz)
    targets = padded_targets(args.batch, args.imgsz, args.gts, args.classes)
    with torch.no_grad():
        reference = model(images)
    anchors, strides = reference["anchors"], reference["strides"]

    def objective() -> None:
        out = leaf_outputs(reference)
        total, _ = criterion(out, targets, 0.5)
        total.backward()

    def assignment() -> None:
        for branch, assigner in (("o2m", criterion.o2m_assigner), ("o2o", criterion.o2o_assigner)):
            boxes = ltrb_to_xyxy(reference[branch]["boxes"], anchors, strides)
            assigner(
                reference[branch]["logits"].sigmoid(),
                boxes,
                anchors,
                targets["labels"],
                targets["boxes"],
                targets["mask"],
            )

    def full_step() -> None:
        model.zero_grad(set_to_none=True)
        total, _ = criterion(model(images), targets, 0.5)
        total.backward()

    timings: dict[str, list[float]] = {"objective": [], "assignment": [], "full_step": []}
    runs = {"objective": objective, "assignment": assignment, "full_step": full_step}
    for fn in runs.values():  # warm-up
        fn()
    for _ in range(args.repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            timings[name].append((time.perf_counter() - start) * 1000)
    med = {k: statistics.median(v) for k, v in timings.items()}
    print(
        json.dumps(
            {
                "benchmark": "objective",
                "device": "cpu",
                "threads": torch.get_num_threads(),
                "batch": args.batch,
                "imgsz": args.imgsz,
                "gts_per_image": args.gts,
                "num_classes": args.classes,
                "anchors": int(anchors.shape[0]),
                "repeats": args.repeats,
                "assignment_ms": round(med["assignment"], 1),
                "objective_fwd_bwd_ms": round(med["objective"], 1),
                "full_step_ms": round(med["full_step"], 1),
                "objective_share_of_step": round(med["objective"] / med["full_step"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
