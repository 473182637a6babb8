"""OpenVINO IR export: the ONNX graph of the deployed model, read by OpenVINO's ONNX frontend.

Written as a pair, ``<name>.xml`` (the graph) and ``<name>.bin`` (the float32 weights) beside it,
OpenVINO's own layout: ``Core().read_model("<name>.xml")`` finds the ``.bin``. Whole or absent
after a kill: an old ``.xml`` is removed first, then the ``.bin`` and the ``.xml`` are each written
through :func:`~lucidyolo.atomic_write.atomic_open`, so an ``.xml`` only exists beside its complete ``.bin``.

The ONNX file is read with ``Core().read_model`` rather than ``openvino.convert_model``: the same
ONNX frontend, without the converter's usage telemetry, which is sent unless the user opted out.
Weights stay float32 (``compress_to_fp16=False``; ``save_model`` would otherwise halve them).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from torch import nn

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import ConfigError
from lucidyolo.export.formats import import_openvino
from lucidyolo.export.onnx import OUTPUT_NAME, export_onnx


def export_openvino(
    deployed: nn.Module, path: str | Path, img_size: int | tuple[int, int] = 640, dynamic_batch: bool = False,
    output_names: Sequence[str] = (OUTPUT_NAME,),
) -> Path:
    """Export ``deployed`` to ONNX in a temporary folder, read it into OpenVINO, write ``path`` (``.xml``) and its ``.bin``.

    Inputs and outputs keep the ONNX names (``images``; the task's outputs).

    Returns:
        The ``.xml`` path.
    """
    ov = import_openvino()  # before any work: a missing package is refused first
    path = Path(path)
    if path.suffix != ".xml":
        raise ConfigError(f"OpenVINO output {str(path)!r} does not end in .xml.",
                          why="OpenVINO reads <name>.xml and finds <name>.bin beside it.",
                          fix=f"use e.g. --output {path.with_suffix('.xml')}")
    with tempfile.TemporaryDirectory(prefix="lucid-openvino-") as tmp:
        onnx_path = export_onnx(deployed, Path(tmp) / "model.onnx", img_size=img_size,
                                dynamic_batch=dynamic_batch, output_names=output_names)
        model = ov.Core().read_model(str(onnx_path))
        ov.save_model(model, str(Path(tmp) / "model.xml"), compress_to_fp16=False)
        xml, weights = (Path(tmp) / "model.xml").read_bytes(), (Path(tmp) / "model.bin").read_bytes()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # an old graph never sits beside the new weights
    with atomic_open(path.with_suffix(".bin"), "wb") as f:
        f.write(weights)
    with atomic_open(path, "wb") as f:
        f.write(xml)
    return path
