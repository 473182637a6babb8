"""Golden forward: a seeded nano model on a fixed input reproduces recorded output statistics.

The recipe and the only writer of the golden file live in
``tests/models/golden_forward.py``; this test only reads the file, so no
environment variable or flag can make it pass by rewriting its own expectation.
"""

from __future__ import annotations

import json

import torch

from tests.models.golden_forward import GOLDEN_PATH, forward_stats


def test_seeded_nano_forward_matches_golden_statistics() -> None:
    stats = forward_stats()
    golden = json.loads(GOLDEN_PATH.read_text())
    assert stats.keys() == golden["stats"].keys()
    for name, values in golden["stats"].items():
        torch.testing.assert_close(
            torch.tensor(stats[name]), torch.tensor(values), rtol=golden["rtol"], atol=golden["atol"], msg=name
        )

