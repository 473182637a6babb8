"""Decoders from raw head outputs to fixed-size detections: end-to-end top-k and NMS."""

from lucidyolo.decode.e2e import e2e_topk
from lucidyolo.decode.nms import nms_decode

__all__ = ["e2e_topk", "nms_decode"]
