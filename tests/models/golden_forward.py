"""The golden-forward recipe, and the only writer of ``golden_forward.json``.

Not collected by pytest (the name has no ``test_`` prefix): the test reads the
file and can never rewrite it. After an intended change to the model's
arithmetic or initialisation, regenerate deliberately from the repository root
and commit the new file with the reason::

    .venv/bin/python -m tests.models.golden_forward
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from lucidyolo.models import create_model

GOLDEN_PATH = Path(__file__).with_name("golden_forward.json")
RTOL, ATOL = 1e-3, 1e-5


def forward_stats() -> dict[str, list[float]]:
    """``{"o2m.boxes": [mean, std, max |x|], ...}`` of a seeded nano on a fixed input, train mode.

    Train mode (BatchNorm on batch statistics): a freshly initialised network in
    eval mode produces near-constant outputs that would pin nothing.
    """
    torch.manual_seed(0)
    model = create_model("n", num_classes=80).train()
    images = torch.rand(2, 3, 128, 160, generator=torch.Generator().manual_seed(123))
    with torch.no_grad():
        out = model(images)
    stats = {}
    for branch in ("o2m", "o2o"):
        for key in ("boxes", "logits"):
            t = out[branch][key].double()
            stats[f"{branch}.{key}"] = [t.mean().item(), t.std().item(), t.abs().max().item()]
    return stats


def main() -> None:
    stats = forward_stats()
    GOLDEN_PATH.write_text(json.dumps({"rtol": RTOL, "atol": ATOL, "stats": stats}, indent=2))
    print(f"wrote {GOLDEN_PATH}")
    for name, values in stats.items():
        print(f"  {name}: mean {values[0]:.6g}, std {values[1]:.6g}, max|x| {values[2]:.6g}")


if __name__ == "__main__":
    main()
