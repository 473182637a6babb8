"""Segmentation terms: hand cases, a per-positive loop reference, grad paths, padding, memory, Dice.

The reference mask loss below is written independently of the vectorised one:
a Python loop over positives, the full-resolution prototype mask ``c . P``
sampled with ``grid_sample`` (not ``roi_align``) at the crop points, and one
rasteriser call per instance.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from lucidyolo.assign.assignment import background_assignment
from lucidyolo.losses.criterion import DetectionCriterion
from lucidyolo.structures.box_coder import make_anchors
from lucidyolo.structures.rasterize import rasterize_rings
from lucidyolo.tasks.segment.mask_loss import MaskTerm, SemanticTerm, roi_protos

NUM_PROTOS = 32


def _targets(images: list[list[tuple]], num_slots: int | None = None) -> dict[str, torch.Tensor]:
    """Padded GT from ``images[b] = [(box xyxy, label, [ring (n, 2), ...]), ...]`` (polygon fields included)."""
    batch = len(images)
    m = num_slots if num_slots is not None else max([len(x) for x in images] + [0])
    boxes, labels, mask = torch.zeros(batch, m, 4), torch.zeros(batch, m, dtype=torch.long), torch.zeros(batch, m, dtype=torch.bool)
    points, lengths, ring_image, ring_slot = [], [], [], []
    for b, instances in enumerate(images):
        for s, (box, label, rings) in enumerate(instances):
            boxes[b, s] = torch.tensor(box, dtype=torch.float32)
            labels[b, s] = label
            mask[b, s] = True
            for ring in rings:
                ring = np.asarray(ring, np.float32).reshape(-1, 2)
                points.append(ring)
                lengths.append(len(ring))
                ring_image.append(b)
                ring_slot.append(s)
    return {
        "boxes": boxes, "labels": labels, "mask": mask,
        "poly_points": torch.tensor(np.concatenate(points or [np.zeros((0, 2), np.float32)])),
        "poly_ring_lengths": torch.tensor(lengths, dtype=torch.long),
        "poly_ring_image": torch.tensor(ring_image, dtype=torch.long),
        "poly_ring_slot": torch.tensor(ring_slot, dtype=torch.long),
    }


def _assignment(fg: torch.Tensor, gt_index: torch.Tensor):
    """An assignment with only what the mask term reads (fg_mask, gt_index) filled in."""
    a = background_assignment(fg.shape[0], fg.shape[1], torch.float32, fg.device)
    return a._replace(fg_mask=fg, gt_index=torch.where(fg, gt_index, torch.full_like(gt_index, -1)))


def _call(term, coeffs, protos, fg, gt_index, targets):
    branch = {"coeffs": coeffs, "protos": protos}
    return term(branch, _assignment(fg, gt_index), None, None, targets)["mask"]


def _box_ring(box) -> list[list[float]]:
    x1, y1, x2, y2 = box
    return [[x1, y1], [x2, y1], [x2, y2], [x1, y2]]


def _star(rng: np.random.Generator, box, n: int) -> np.ndarray:
    """A star-shaped ring inside ``box`` (xyxy)."""
    x1, y1, x2, y2 = box
    c = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
    half = np.array([(x2 - x1) / 2, (y2 - y1) / 2])
    ang = (np.arange(n) + rng.uniform(0.1, 0.9, n)) * (2 * np.pi / n)
    rad = rng.uniform(0.3, 1.0, n)[:, None]
    return c + rad * half * np.stack([np.cos(ang), np.sin(ang)], 1)


def reference_mask_loss(coeffs, protos, fg, gt_index, targets, crop=32, proto_stride=4.0) -> torch.Tensor:
    """Plain loop over positives: sample ``c . P`` at the box's bin centres with grid_sample."""
    h_in, w_in = protos.shape[-2] * proto_stride, protos.shape[-1] * proto_stride
    total, count = coeffs.sum() * 0.0, 0
    ring_image, ring_slot = targets["poly_ring_image"].tolist(), targets["poly_ring_slot"].tolist()
    offsets = [0, *np.cumsum(targets["poly_ring_lengths"].tolist()).tolist()]
    for b, a in fg.nonzero().tolist():
        g = int(gt_index[b, a])
        x1, y1, x2, y2 = targets["boxes"][b, g].tolist()
        w, h = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        full = torch.einsum("p,phw->hw", coeffs[b, a], protos[b])  # (Hp, Wp) mask logits
        xs = x1 + (torch.arange(crop) + 0.5) * w / crop
        ys = y1 + (torch.arange(crop) + 0.5) * h / crop
        gy, gx = torch.meshgrid(2 * ys / h_in - 1, 2 * xs / w_in - 1, indexing="ij")
        grid = torch.stack([gx, gy], -1)[None]  # align_corners=False: -1..1 spans the input edges
        z = F.grid_sample(full[None, None], grid, mode="bilinear", padding_mode="border", align_corners=False)[0, 0]
        rings = [r for r in range(len(ring_image)) if ring_image[r] == b and ring_slot[r] == g]
        pts = torch.cat([targets["poly_points"][offsets[r]:offsets[r + 1]] for r in rings] or [torch.zeros(0, 2)])
        t = rasterize_rings(
            pts, targets["poly_ring_lengths"][rings], torch.zeros(len(rings), dtype=torch.long), 1,
            torch.tensor([[x1, y1]]).expand(len(rings), 2), torch.tensor([[w / crop, h / crop]]).expand(len(rings), 2),
            crop, crop,
        )[0]
        total = total + F.binary_cross_entropy_with_logits(z, t.float())
        count += 1
    return total / max(count, 1)


def _random_case(seed: int, batch: int = 2, per_image: int = 6, size: int = 64, anchors: int = 60):
    """Random GT (star rings, some two-ring instances, a tiny box), positives (1-4 per GT), coeffs and protos."""
    rng = np.random.default_rng(seed)
    g = torch.Generator().manual_seed(seed)
    images = []
    for _ in range(batch):
        instances = []
        for k in range(per_image):
            lo = rng.uniform(0, size * 0.6, 2)
            hi = np.minimum(lo + rng.uniform(6, size * 0.4, 2), size)
            box = [lo[0], lo[1], hi[0], hi[1]]
            if k == 0:
                box = [lo[0], lo[1], lo[0] + 0.4, lo[1] + 3.0]  # thinner than 1 px: side floored at 1
            rings = [_star(rng, box, int(rng.integers(4, 12)))]
            if k % 3 == 1:  # a second part in the left half of the box (multi-part instance)
                rings.append(_star(rng, [box[0], box[1], (box[0] + box[2]) / 2, box[3]], 5))
            instances.append((box, int(rng.integers(0, 3)), rings))
        images.append(instances)
    targets = _targets(images, num_slots=per_image + 2)  # two padded slots per image
    fg = torch.zeros(batch, anchors, dtype=torch.bool)
    gt_index = torch.full((batch, anchors), -1, dtype=torch.long)
    for b in range(batch):
        perm = torch.randperm(anchors, generator=g).tolist()
        for k in range(per_image - 1):  # the last GT gets no positive
            for a in perm[:int(rng.integers(1, 5))]:
                fg[b, a], gt_index[b, a] = True, k
            perm = perm[4:]
    coeffs = torch.randn(batch, anchors, NUM_PROTOS, generator=g).tanh().requires_grad_()
    protos = (torch.randn(batch, NUM_PROTOS, size // 4, size // 4, generator=g) * 2).requires_grad_()
    return coeffs, protos, fg, gt_index, targets


# --------------------------------------------------------------------------- mask term
def _half_box_case(level: float):
    """One GT box (16, 16, 48, 48) in a 64 px input whose polygon is the box's left half;
    channel 0 of the prototypes is +level left of x = 32 and -level right of it."""
    box = [16.0, 16.0, 48.0, 48.0]
    targets = _targets([[(box, 0, [_box_ring([16.0, 16.0, 32.0, 48.0])])]])
    protos = torch.zeros(1, NUM_PROTOS, 16, 16)
    protos[0, 0, :, :8] = level  # prototype columns 0..7 cover input x in [0, 32)
    protos[0, 0, :, 8:] = -level
    coeffs = torch.zeros(1, 3, NUM_PROTOS)
    coeffs[0, 1, 0] = 1.0
    fg = torch.tensor([[False, True, False]])
    return coeffs, protos, fg, torch.tensor([[-1, 0, -1]]), targets


def test_exact_predicted_mask_gives_near_zero_loss_and_its_complement_a_large_one() -> None:
    coeffs, protos, fg, gt_index, targets = _half_box_case(200.0)
    # Crop 32 over a 32 px box: samples at the pixel centres x = 16.5 .. 47.5. Bilinear between
    # the prototype centres 30 (+200) and 34 (-200) gives 150, 50, -50, -150 at x = 30.5 .. 33.5;
    # every other sample is +-200 and on the right side of x = 32.
    loss = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
    assert loss.item() < 1e-6  # smallest |logit| 50: BCE ~ e^-50 per sample
    worse = _call(MaskTerm(), -coeffs, protos, fg, gt_index, targets)
    expected = 2 * (14 * 200 + 150 + 50) / 32  # BCE of a wrong logit z is |z| + log(1 + e^-|z|) ~ |z|
    assert worse.item() == pytest.approx(expected, rel=1e-4)


def test_constant_logit_gives_the_closed_form_bce() -> None:
    """Logit z everywhere, half the crop inside: 0.5 log(1 + e^-z) + 0.5 log(1 + e^z)."""
    coeffs, protos, fg, gt_index, targets = _half_box_case(0.0)
    z = 1.7
    protos[0, 5] = z
    coeffs[0, 1] = 0.0
    coeffs[0, 1, 5] = 1.0
    loss = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
    want = 0.5 * math.log1p(math.exp(-z)) + 0.5 * math.log1p(math.exp(z))
    assert loss.item() == pytest.approx(want, rel=1e-6)


def test_roi_protos_samples_the_bin_centres_of_the_box() -> None:
    """On a linear prototype f(x, y) = a x + b y + c (prototype pixel k valued at its centre 4k + 2),
    bilinear sampling is exact, so roi_protos returns f at its sample points: they must be the
    crop points x1 + (j + 0.5) w / S, y1 + (i + 0.5) h / S that the mask target is rasterised at."""
    wp = 20
    stride = 4.0
    centre = (torch.arange(wp, dtype=torch.float64) + 0.5) * stride
    a, b, c = 0.25, -0.5, 3.0
    protos = (a * centre[None, :] + b * centre[:, None] + c)[None, None].float()
    boxes = torch.tensor([[13.3, 9.1, 57.9, 31.0], [8.0, 8.0, 72.0, 72.0]])
    crop = 7
    got = roi_protos(protos, torch.zeros(2, dtype=torch.long), boxes, crop, stride)[:, 0]  # (2, S, S)
    for k, (x1, y1, x2, y2) in enumerate(boxes.tolist()):
        xs = x1 + (torch.arange(crop) + 0.5) * (x2 - x1) / crop
        ys = y1 + (torch.arange(crop) + 0.5) * (y2 - y1) / crop
        want = a * xs[None, :] + b * ys[:, None] + c
        torch.testing.assert_close(got[k], want, atol=1e-4, rtol=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_the_per_positive_loop_reference(seed: int) -> None:
    coeffs, protos, fg, gt_index, targets = _random_case(seed)
    got = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
    want = reference_mask_loss(coeffs, protos, fg, gt_index, targets)
    assert got.item() == pytest.approx(want.item(), abs=1e-5)
    # Same gradients as the reference, too.
    g_c, g_p = torch.autograd.grad(got, (coeffs, protos))
    r_c, r_p = torch.autograd.grad(want, (coeffs, protos))
    torch.testing.assert_close(g_c, r_c, atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(g_p, r_p, atol=1e-6, rtol=1e-4)


def test_other_crop_sizes_and_strides_match_the_reference() -> None:
    coeffs, protos, fg, gt_index, targets = _random_case(3)
    protos_8 = protos.detach()[..., ::2, ::2].contiguous()  # stride 8 prototypes of the same 64 px input
    for crop, stride, p in ((16, 4.0, protos), (28, 8.0, protos_8)):
        got = _call(MaskTerm(crop=crop, proto_stride=stride), coeffs, p, fg, gt_index, targets)
        want = reference_mask_loss(coeffs, p, fg, gt_index, targets, crop=crop, proto_stride=stride)
        assert got.item() == pytest.approx(want.item(), abs=1e-5)


def test_gradient_reaches_positive_coeffs_and_protos_only() -> None:
    coeffs, protos, fg, gt_index, targets = _random_case(4)
    _call(MaskTerm(), coeffs, protos, fg, gt_index, targets).backward()
    per_anchor = coeffs.grad.abs().sum(-1)
    assert (per_anchor[fg] > 0).all()
    assert (per_anchor[~fg] == 0).all()
    assert protos.grad.abs().sum() > 0 and torch.isfinite(protos.grad).all()


def test_no_positive_gives_a_zero_with_a_grad_path() -> None:
    coeffs, protos, fg, gt_index, targets = _random_case(5)
    fg = torch.zeros_like(fg)
    loss = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
    assert loss.shape == () and loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert (coeffs.grad == 0).all() and (protos.grad == 0).all()
    # An empty batch (no GT slots, no rings) too.
    empty = _targets([[], []])
    loss = _call(MaskTerm(), coeffs, protos, fg, torch.full_like(gt_index, -1), empty)
    assert loss.item() == 0.0 and loss.requires_grad


def test_batch_padding_does_not_change_the_value() -> None:
    """An extra empty image and extra padded GT slots leave the term unchanged."""
    coeffs, protos, fg, gt_index, targets = _random_case(6)
    base = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
    b, m = targets["boxes"].shape[:2]
    pad = 3
    padded = dict(targets)
    padded["boxes"] = torch.cat([F.pad(targets["boxes"], (0, 0, 0, pad)), torch.zeros(1, m + pad, 4)])
    padded["labels"] = torch.cat([F.pad(targets["labels"], (0, pad)), torch.zeros(1, m + pad, dtype=torch.long)])
    padded["mask"] = torch.cat([F.pad(targets["mask"], (0, pad)), torch.zeros(1, m + pad, dtype=torch.bool)])
    coeffs2 = torch.cat([coeffs, torch.randn(1, *coeffs.shape[1:])])
    protos2 = torch.cat([protos, torch.randn(1, *protos.shape[1:])])
    fg2 = torch.cat([fg, torch.zeros(1, fg.shape[1], dtype=torch.bool)])
    gt2 = torch.cat([gt_index, torch.full((1, fg.shape[1]), -1)])
    assert _call(MaskTerm(), coeffs2, protos2, fg2, gt2, padded).item() == pytest.approx(base.item(), abs=1e-6)
    # The empty image first instead (every real image index shifts by one).
    shifted = dict(padded)
    order = [b, *range(b)]
    for key in ("boxes", "labels", "mask"):
        shifted[key] = padded[key][order]
    shifted["poly_ring_image"] = targets["poly_ring_image"] + 1
    value = _call(MaskTerm(), coeffs2[order], protos2[order], fg2[order], gt2[order], shifted)
    assert value.item() == pytest.approx(base.item(), abs=1e-6)


def test_runs_under_strict_deterministic_algorithms_and_outside_autocast() -> None:
    """The CPU smoke presets train with strict determinism; mixed precision must not reach the BCE."""
    coeffs, protos, fg, gt_index, targets = _random_case(8)
    want = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets).item()
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        got = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
        sem = SemanticTerm()({"semantic": torch.zeros(2, 3, 8, 8)}, targets)["semantic"]
    finally:
        torch.use_deterministic_algorithms(was)
    assert got.item() == want and torch.isfinite(sem)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = _call(MaskTerm(), coeffs.bfloat16(), protos.bfloat16(), fg, gt_index, targets)
    assert low.dtype == torch.float32
    assert low.item() == pytest.approx(want, rel=2e-2)  # only the bf16 rounding of the inputs


@pytest.mark.gpu
def test_cuda_matches_cpu() -> None:
    coeffs, protos, fg, gt_index, targets = _random_case(9)
    cpu = _call(MaskTerm(), coeffs, protos, fg, gt_index, targets)
    g_cpu = torch.autograd.grad(cpu, (coeffs, protos))
    dev = {k: v.cuda() for k, v in targets.items()}
    c, p = coeffs.detach().cuda().requires_grad_(), protos.detach().cuda().requires_grad_()
    gpu = _call(MaskTerm(), c, p, fg.cuda(), gt_index.cuda(), dev)
    g_gpu = torch.autograd.grad(gpu, (c, p))
    assert gpu.item() == pytest.approx(cpu.item(), abs=1e-5)
    for a, b in zip(g_cpu, g_gpu, strict=True):
        torch.testing.assert_close(b.cpu(), a, atol=1e-5, rtol=1e-3)
    logits = torch.randn(2, 3, 8, 8)
    sem_cpu = SemanticTerm()({"semantic": logits}, targets)["semantic"]
    sem_gpu = SemanticTerm()({"semantic": logits.cuda()}, dev)["semantic"]
    assert sem_gpu.item() == pytest.approx(sem_cpu.item(), abs=1e-5)


class _LargestOutput(TorchDispatchMode):
    """Records the largest tensor any op produces while active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def _crowded_case(size: int, per_image: int = 150, batch: int = 2, anchors: int = 2100, seed: int = 7):
    """``per_image`` instances per image, each with 1-10 positives, GT boxes in a fixed 320 px region."""
    rng = np.random.default_rng(seed)
    g = torch.Generator().manual_seed(seed)
    images = []
    for _ in range(batch):
        instances = []
        for _ in range(per_image):
            lo = rng.uniform(0, 260, 2)
            box = [lo[0], lo[1], *(lo + rng.uniform(4, 60, 2))]
            instances.append((box, 0, [_star(rng, box, int(rng.integers(6, 30)))]))
        images.append(instances)
    targets = _targets(images)
    fg = torch.zeros(batch, anchors, dtype=torch.bool)
    gt_index = torch.full((batch, anchors), -1, dtype=torch.long)
    for b in range(batch):
        perm = torch.randperm(anchors, generator=g)
        taken = 0
        for k in range(per_image):
            n = int(rng.integers(1, 11))
            fg[b, perm[taken:taken + n]], gt_index[b, perm[taken:taken + n]] = True, k
            taken += n
    coeffs = torch.randn(batch, anchors, NUM_PROTOS, generator=g).tanh()
    protos = torch.randn(batch, NUM_PROTOS, size // 4, size // 4, generator=g)
    return coeffs, protos, fg, gt_index, targets


def test_many_instances_stay_within_the_stated_memory_bound() -> None:
    """B = 2 x 150 instances: no intermediate is larger than max(G P S^2, G K S^2), and the
    largest one does not grow with the image (the same GT on 320 and 640 px inputs)."""
    crop = 32
    largest = {}
    for size in (320, 640):
        coeffs, protos, fg, gt_index, targets = _crowded_case(size)
        with _LargestOutput() as probe:
            loss = _call(MaskTerm(crop=crop), coeffs, protos, fg, gt_index, targets)
        assert torch.isfinite(loss) and loss.item() > 0
        num_gt = 2 * 150  # every GT has a positive
        k = max(int((gt_index[b] == j).sum()) for b in range(2) for j in range(150))
        bound = max(num_gt * NUM_PROTOS * crop * crop, num_gt * k * crop * crop)
        assert probe.largest <= bound
        largest[size] = probe.largest
    assert largest[320] == largest[640]


# ------------------------------------------------------------------------- semantic term
def _semantic_case():
    """64 px input, stride 8 (8 x 8 cells, centres 4, 12, ..., 60), 2 classes; one class-1
    square (16, 16)-(48, 48) covering the cells with centres 20..44, i.e. cells 2..5."""
    targets = _targets([[([16.0, 16.0, 48.0, 48.0], 1, [_box_ring([16.0, 16.0, 48.0, 48.0])])]])
    want = torch.zeros(1, 2, 8, 8)
    want[0, 1, 2:6, 2:6] = 1.0
    return targets, want


def test_semantic_target_and_exact_prediction() -> None:
    targets, want = _semantic_case()
    term = SemanticTerm()
    torch.testing.assert_close(term.target(targets, (1, 2, 8, 8)).float(), want)
    logits = (want * 2 - 1) * 40.0
    assert term({"semantic": logits}, targets)["semantic"].item() < 1e-6


def test_semantic_dice_hand_case() -> None:
    """Logits 0 (p = 1/2): BCE = log 2; Dice class 1 = 1 - (2 * 8 + 1) / (32 + 16 + 1),
    class 0 (empty) = 1 - 1 / (32 + 0 + 1); the term is BCE + their mean."""
    targets, _ = _semantic_case()
    logits = torch.zeros(1, 2, 8, 8, requires_grad=True)
    value = SemanticTerm()({"semantic": logits}, targets)["semantic"]
    dice = ((1 - 17 / 49) + (1 - 1 / 33)) / 2
    assert value.item() == pytest.approx(math.log(2) + dice, rel=1e-6)
    value.backward()
    assert logits.grad.abs().sum() > 0


def test_semantic_union_per_class_and_crowd_and_padding_excluded() -> None:
    a = [0.0, 0.0, 24.0, 24.0]
    b = [16.0, 16.0, 40.0, 40.0]  # overlaps a, same class: union
    c = [40.0, 0.0, 64.0, 16.0]
    crowd = [0.0, 40.0, 24.0, 64.0]
    images = [
        [(a, 0, [_box_ring(a)]), (b, 0, [_box_ring(b)]), (c, 2, [_box_ring(c)]), (crowd, 1, [_box_ring(crowd)])],
        [(c, 1, [_box_ring(c), _box_ring(a)])],  # one instance of two parts
    ]
    targets = _targets(images, num_slots=5)
    targets["crowd"] = torch.zeros(2, 5, dtype=torch.bool)
    targets["crowd"][0, 3] = True
    got = SemanticTerm().target(targets, (2, 3, 8, 8))

    def cells(box):
        m = torch.zeros(8, 8, dtype=torch.bool)
        x1, y1, x2, y2 = (int(v) // 8 for v in box)
        m[y1:y2, x1:x2] = True  # boxes on multiples of 8: cells whose centre lies inside
        return m

    want = torch.zeros(2, 3, 8, 8, dtype=torch.bool)
    want[0, 0] = cells(a) | cells(b)
    want[0, 2] = cells(c)
    want[1, 1] = cells(c) | cells(a)
    torch.testing.assert_close(got, want)
    # A padded slot's ring (mask False) is ignored too.
    targets["mask"][0, 1] = False
    want[0, 0] = cells(a)
    torch.testing.assert_close(SemanticTerm().target(targets, (2, 3, 8, 8)), want)


# -------------------------------------------------------------------- through the criterion
def test_terms_plug_into_the_detection_criterion() -> None:
    size, classes = 64, 3
    g = torch.Generator().manual_seed(0)
    anchors, strides = make_anchors([(size // 8, size // 8), (size // 16, size // 16)], [8, 16])
    a = anchors.shape[0]
    protos = torch.randn(2, NUM_PROTOS, size // 4, size // 4, generator=g).requires_grad_()

    def branch() -> dict:
        return {
            "boxes": (torch.rand(2, a, 4, generator=g) * 2 + 0.5).requires_grad_(),
            "logits": (torch.randn(2, a, classes, generator=g) - 1).requires_grad_(),
            "coeffs": torch.randn(2, a, NUM_PROTOS, generator=g).tanh().requires_grad_(),
            "protos": protos,  # the same tensor in both branches
        }

    semantic = torch.randn(2, classes, size // 8, size // 8, generator=g).requires_grad_()
    outputs = {"o2m": branch(), "o2o": branch(), "anchors": anchors, "strides": strides,
               "protos": protos, "semantic": semantic}
    box1, box2 = [8.0, 10.0, 40.0, 50.0], [30.0, 4.0, 60.0, 30.0]
    targets = _targets([[(box1, 1, [_box_ring(box1)])], [(box2, 2, [_box_ring(box2)])]])
    criterion = DetectionCriterion(branch_terms=[MaskTerm()], global_terms=[SemanticTerm()])
    total, terms = criterion(outputs, targets, 0.5)
    for key in ("o2m/mask", "o2o/mask", "mask", "semantic"):
        assert torch.isfinite(terms[key]) and terms[key].item() > 0, key
    total.backward()
    assert protos.grad.abs().sum() > 0 and semantic.grad.abs().sum() > 0
    assert outputs["o2o"]["coeffs"].grad.abs().sum() > 0
