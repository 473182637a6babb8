"""Batched prediction answers as one image at a time does, for images of different sizes in one batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from lucidyolo import Model
from tests.cli.tiny_run import write_tiny_run


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    base = tmp_path_factory.mktemp("batches")
    ckpt, root = write_tiny_run(base)
    images = base / "images"
    images.mkdir()
    for i, f in enumerate(sorted((root / "train").glob("*.jpg"))):
        im = Image.open(f).convert("RGB")
        if i % 2:  # other sizes and aspect ratios: each is letterboxed on its own
            im = im.resize((90 + 7 * i, 50 + 3 * i))
        im.save(images / f"{i:03d}.png")
    return ckpt, images


def _rows(decoded: torch.Tensor) -> np.ndarray:
    """``(n, 6)`` rows with a score: ``x1, y1, x2, y2, score, class``."""
    d = decoded.double().numpy()
    return d[d[:, 4] > 0]


def _same_rows(a: np.ndarray, b: np.ndarray, tol: float) -> None:
    """Every row of ``a`` has a row of ``b`` of its class within ``tol`` (box px and score), and back: top-k may
    order near-equal scores differently."""
    assert a.shape == b.shape
    for x, y in ((a, b), (b, a)):
        other_class = x[:, None, 5] != y[None, :, 5]  # (n, n)
        gap = np.abs(x[:, None, :5] - y[None, :, :5]).max(-1) + 1e9 * other_class  # (n, n)
        assert gap.min(1).max() < tol


def test_batch_of_16_gives_the_predictions_of_batch_1(folder):
    ckpt, images = folder
    model = Model.load(ckpt)
    predictor = model._predictor("e2e", None, "cpu")
    arrays = [np.asarray(Image.open(f).convert("RGB")) for f in sorted(images.glob("*.png"))]
    assert len({a.shape for a in arrays}) > 1
    one = [predictor(a, 0.0) for a in arrays]
    many = predictor.batch(arrays, 0.0)
    for o, m in zip(one, many, strict=True):
        assert o.letterbox == m.letterbox
        _same_rows(_rows(o.decoded), _rows(m.decoded), 1e-3)
    by16 = model.predict(images, conf=0.0, device="cpu", batch_size=16)
    by1 = model.predict(images, conf=0.0, device="cpu", batch_size=1)
    for a, b in zip(by16, by1, strict=True):
        assert a.path == b.path and len(a) == len(b) > 0
        ra = a.boxes.data.numpy()  # [x1, y1, x2, y2, conf, cls]
        rb = b.boxes.data.numpy()
        _same_rows(ra, rb, 0.011)  # predict dicts round boxes to 0.01 px, scores to 1e-4
