"""Golden forward: a seeded nano model on a fixed input reproduces recorded output statistics.

Train mode (BatchNorm on batch statistics) is used because a freshly initialised
network in eval mode produces near-constant outputs that would pin nothing.
Regenerate deliberately with ``LUCID_REGEN_GOLDEN=1`` after an intended change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from lucidyolo.models import create_model

GOLDEN_PATH = Path(__file__).with_name("golden_forward.json")


def _stats() -> dict[str, list[float]]:
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


def test_seeded_nano_forward_matches_golden_statistics() -> None:
    stats = _stats()
    if os.environ.get("LUCID_REGEN_GOLDEN") == "1":
        GOLDEN_PATH.write_text(json.dumps({"rtol": 1e-3, "atol": 1e-5, "stats": stats}, indent=2))
    golden = json.loads(GOLDEN_PATH.read_text())
    assert stats.keys() == golden["stats"].keys()
    for name, values in golden["stats"].items():
        torch.testing.assert_close(
            torch.tensor(stats[name]), torch.tensor(values), rtol=golden["rtol"], atol=golden["atol"], msg=name
        )
