"""TorchScript export of the deployed graph: ``torch.jit.trace`` of the module the ONNX export traces.

The file runs with ``torch.jit.load`` in Python or ``torch::jit::load`` in libtorch (C++), no lucid
needed. Anchors are baked for the export size, as in the ONNX graph; the batch dimension stays
free (the tracer records it as a size). ``torch.jit.trace`` is deprecated in torch 2.14 and warns
on every call: the warning is silenced here, the format kept while torch can load it (docs/DECISIONS.md).
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from lucidyolo.atomic_write import atomic_open
from lucidyolo.export.onnx import INPUT_NAME, OUTPUT_NAME, _size

META_FILE = "lucid.json"
"""The extra file stored in the archive: input and output names, export size (``torch.jit.load(..., _extra_files=)``)."""


def export_torchscript(
    deployed: nn.Module, path: str | Path, img_size: int | tuple[int, int] = 640,
    output_names: Sequence[str] = (OUTPUT_NAME,),
) -> Path:
    """Trace ``deployed`` (a task's deployed graph, BN folded) at the export size and write it atomically.

    Input ``(B, 3, H, W)`` float in ``[0, 1]``; the module returns the outputs in ``output_names``'
    order (one tensor, or a tuple), which :data:`META_FILE` inside the archive records.

    Returns:
        The written path.
    """
    h, w = _size(img_size)
    deployed = deployed.eval()
    if hasattr(deployed, "bake_anchors"):  # anchor grids become constants of the export size
        deployed.bake_anchors(h, w)
    ref = next(deployed.parameters())
    dummy = torch.zeros(1, 3, h, w, dtype=ref.dtype, device=ref.device)
    meta = {"input": INPUT_NAME, "outputs": list(output_names), "img_size": [h, w], "batch": "dynamic"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the deprecation and the tracer's shape-derived ints are expected
        traced = torch.jit.trace(deployed, (dummy,), check_trace=False)
        buffer = io.BytesIO()  # into memory, then one atomic write: never a partial archive
        torch.jit.save(traced, buffer, _extra_files={META_FILE: json.dumps(meta)})
    path = Path(path)
    with atomic_open(path, "wb") as f:
        f.write(buffer.getbuffer())
    return path
