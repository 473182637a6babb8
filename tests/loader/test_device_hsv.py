"""Device HSV: the batched float transform matches worker HSV; unsupported setups refuse once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from lucidyolo.data import device_hsv
from lucidyolo.data.augment.hsv import apply_hsv
from lucidyolo.data.device_hsv import hsv_jitter, resolve_device_hsv


@pytest.mark.parametrize("gains", [[0.015, 0, 0], [0, 0.7, 0], [0, 0, -0.4], [-0.012, -0.5, 0.3], [0.01, 0.6, 0.4]])
def test_device_transform_matches_worker_hsv_within_8bit_quantisation(gains):
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)
    g = np.array(gains, np.float32)
    worker = apply_hsv(img, g).astype(np.float64)
    dev = hsv_jitter(torch.from_numpy(img).permute(2, 0, 1)[None].float(), torch.from_numpy(g)[None])[0]
    diff = np.abs(worker - dev.permute(1, 2, 0).double().numpy())
    # Pillow stores H, S, V in 8 bits on the way: ~0.5 levels mean, a few levels at worst
    assert diff.mean() < 1.5 and diff.max() <= 8


def test_zero_gains_are_identity_on_the_device_path():
    x = torch.randint(0, 256, (2, 3, 8, 8)).float()
    torch.testing.assert_close(hsv_jitter(x, torch.zeros(2, 3)), x, atol=1e-3, rtol=0)


def test_unsupported_backends_and_precisions_warn_once_and_fall_back(monkeypatch):
    monkeypatch.setattr(device_hsv, "_warned", set())
    assert resolve_device_hsv(False, "cpu", "32-true") is False
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert resolve_device_hsv(True, "cpu", "32-true") is False
        assert resolve_device_hsv(True, "cpu", "32-true") is False
        assert resolve_device_hsv(True, "cuda", "16-true") is False
        assert resolve_device_hsv(True, "cuda", "64-true") is False
        assert resolve_device_hsv(True, "cuda", "bf16-mixed", "fsdp") is False
        assert resolve_device_hsv(True, "mps", "16-mixed") is False
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 5 and sum("'cpu'" in m for m in msgs) == 1
    for prec in ("32-true", "16-mixed", "bf16-mixed"):
        assert resolve_device_hsv(True, "cuda", prec, "ddp") is True


@pytest.mark.gpu
def test_device_hsv_runs_on_cuda_and_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    x = torch.randint(0, 256, (4, 3, 64, 64)).float()
    g = torch.tensor([[0.01, 0.5, -0.2]] * 4)
    torch.testing.assert_close(hsv_jitter(x.cuda(), g.cuda()).cpu(), hsv_jitter(x, g), atol=1e-3, rtol=0)


def test_gains_are_applied_after_the_transfer_and_unpack_refuses_a_batch_still_carrying_them():
    from lucidyolo.data.device_hsv import apply_device_hsv
    from lucidyolo.structures.packed import PackedBatch, unpack

    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (2, 3, 8, 8), generator=g).float()
    gains = torch.tensor([[0.01, 0.5, -0.3], [0.0, 0.0, 0.0]])
    batch = PackedBatch(
        images=images, counts=torch.zeros(2, dtype=torch.long), boxes=torch.zeros(0, 4),
        labels=torch.zeros(0, dtype=torch.long), difficult=torch.zeros(0, dtype=torch.bool),
        meta=torch.zeros(2, 6, dtype=torch.float64), hsv_gains=gains,
    )
    with pytest.raises(ValueError, match="device-HSV"):
        unpack(batch)
    done = apply_device_hsv(batch)
    assert done.hsv_gains is None and batch.hsv_gains is not None  # a new batch; the loader's is untouched
    out, _, _ = unpack(done)
    torch.testing.assert_close(out, hsv_jitter(images, gains) / 255.0)
    torch.testing.assert_close(out[1], images[1] / 255.0, atol=1e-3, rtol=0)  # zero gains: identity
