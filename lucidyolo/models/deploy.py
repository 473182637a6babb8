"""The deployed graph: trunk + one-to-one branch, BatchNorm folded, end-to-end top-k decode."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

from torch import Tensor, nn

from lucidyolo.decode.e2e import e2e_topk, gather_kept
from lucidyolo.models.fuse import fold_batchnorm
from lucidyolo.models.yolo26 import YOLO26, AnchorCache, extra_output_names, run_extras
from lucidyolo.structures.box_coder import BoxDecoder, decode_xyxy, make_anchors


class DeployModel(nn.Module):
    """Inference-only YOLO26: no o2m branch, no training-only submodules, BN folded.

    ``forward(images (B, 3, H, W))`` returns ``(B, k, 6)`` rows
    ``[x1, y1, x2, y2, score, class]`` in input pixels (zero rows as padding);
    a model with task stems or extras returns ``(detections, *stems, *extras)``
    instead, each stem's o2o output gathered by the kept anchor index to
    ``(B, k, *shape)`` (zeros on padding rows), each extra output as its module
    returns it (seg prototypes ``(B, P, Hp, Wp)``), in :attr:`output_names` order.

    Args:
        backbone: the trunk's backbone (already a copy, BN folded).
        neck: the trunk's neck (already a copy, BN folded).
        branch: the o2o head branch (already a copy, BN folded).
        strides: stride of each level.
        k: rows of the top-k decode.
        extras: the model's task modules (already copies, training-only submodules removed).
        decode_stems: ``decode_stems(raw) -> {name: (B, A, *shape)}``, the per-anchor
            outputs to gather instead of the raw task stems (keypoints decoded to
            pixels from their offsets, anchors and strides); ``raw`` is
            :meth:`forward_raw`'s dict. ``None``: the task stems as they are.
        stem_outputs: the names ``decode_stems`` returns, in output order.
        box_decoder: ``box_decoder(raw, anchors, strides) -> (B, A, D)``, the
            boxes the rows carry (default ``xyxy`` px from the raw ltrb; a rotated
            task decodes ``[cx, cy, w, h, theta]``, so rows are ``(B, k, D + 2)``).
        box_stems: task stems ``box_decoder`` consumes (the rotated angle); they are
            part of the rows, not separate outputs.
    """

    def __init__(self, backbone: nn.Module, neck: nn.Module, branch: nn.Module, strides: tuple[int, ...], k: int = 300,
                 extras: nn.ModuleDict | None = None,
                 decode_stems: Callable[[Mapping[str, Tensor]], Mapping[str, Tensor]] | None = None,
                 stem_outputs: tuple[str, ...] = (), box_decoder: BoxDecoder | None = None,
                 box_stems: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.backbone = backbone
        self.neck = neck
        self.branch = branch
        self.extras = extras if extras is not None else nn.ModuleDict()
        self.strides = tuple(strides)
        self.k = k
        self.anchor_cache = AnchorCache(self.strides)
        self.fixed_size: tuple[int, int] | None = None
        if (decode_stems is None) != (not stem_outputs):
            raise ValueError("decode_stems and stem_outputs go together")
        self.decode_stems = decode_stems
        self.stem_outputs = tuple(stem_outputs)
        self.box_decoder: BoxDecoder = box_decoder or decode_xyxy
        self.box_stems = tuple(box_stems)

    def bake_anchors(self, height: int, width: int) -> None:
        """Store anchors for one input size as buffers so an exported graph holds them as constants."""
        sizes = [(height // s, width // s) for s in self.strides]
        anchors, strides = make_anchors(sizes, self.strides)
        ref = next(self.parameters())
        self.register_buffer("anchors", anchors.to(ref), persistent=False)
        self.register_buffer("anchor_strides", strides.to(ref), persistent=False)
        self.fixed_size = (height, width)

    def forward_raw(self, images: Tensor) -> dict[str, Tensor]:
        """The o2o branch outputs: ``{"boxes": (B, A, 4) raw ltrb, "logits": (B, A, C), "anchors": (A, 2), "strides": (A,)}``
        plus the task stems and the extras' outputs."""
        feats = self.neck(self.backbone(images))
        out = dict(self.branch(feats))
        out.update(run_extras(self.extras, feats))
        if self.fixed_size is not None and tuple(images.shape[2:]) == self.fixed_size:
            out["anchors"], out["strides"] = self.anchors, self.anchor_strides
        else:
            out["anchors"], out["strides"] = self.anchor_cache(feats)
        return out

    @property
    def stem_names(self) -> tuple[str, ...]:
        """The gathered per-anchor outputs: :attr:`stem_outputs`, else the o2o task stems in head order."""
        return self.stem_outputs or tuple(
            n for n in self.branch.output_names if n not in ("boxes", "logits", *self.box_stems)
        )

    @property
    def extra_names(self) -> tuple[str, ...]:
        """The extras' outputs (seg prototypes), in module order."""
        return extra_output_names(self.extras)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of :meth:`forward`'s outputs (the ONNX output names)."""
        return ("detections", *self.stem_names, *self.extra_names)

    def forward(self, images: Tensor) -> Tensor | tuple[Tensor, ...]:
        """Images ``(B, 3, H, W)`` in ``[0, 1]`` to detections ``(B, k, 6)`` (plus gathered task stems)."""
        raw = self.forward_raw(images)
        boxes = self.box_decoder(raw, raw["anchors"], raw["strides"])  # (B, A, D) px
        dets, index = e2e_topk(boxes, raw["logits"], self.k)
        if not self.stem_names and not self.extra_names:
            return dets
        per_anchor = raw if self.decode_stems is None else self.decode_stems(raw)
        stems = [gather_kept(per_anchor[name], index) for name in self.stem_names]  # (B, k, *shape) each
        return (dets, *stems, *(raw[name] for name in self.extra_names))


def make_deploy_model(model: YOLO26, k: int = 300,
                      decode_stems: Callable[[Mapping[str, Tensor]], Mapping[str, Tensor]] | None = None,
                      stem_outputs: tuple[str, ...] = (), box_decoder: BoxDecoder | None = None,
                      box_stems: tuple[str, ...] = ()) -> DeployModel:
    """Copy the trunk and o2o branch of ``model``, fold BatchNorm, and return an eval-mode :class:`DeployModel`.

    The original model is not modified.

    Args:
        model: a trained (or freshly built) YOLO26.
        k: rows of the top-k decode.
        decode_stems, stem_outputs, box_decoder, box_stems: see :class:`DeployModel`.
    """
    backbone = copy.deepcopy(model.backbone)
    neck = copy.deepcopy(model.neck)
    branch = copy.deepcopy(model.head.o2o)
    extras = copy.deepcopy(model.extras)
    for module in extras.values():
        for name in getattr(module, "train_only", ()):
            setattr(module, name, None)
    deployed = DeployModel(backbone, neck, branch, model.strides, k=k, extras=extras, decode_stems=decode_stems,
                           stem_outputs=stem_outputs, box_decoder=box_decoder, box_stems=box_stems)
    deployed.eval()  # BN folding uses running statistics
    fold_batchnorm(deployed)
    deployed.requires_grad_(False)
    return deployed
