"""The export formats ``lucid export`` writes, the ones planned, and one runner for every written file.

A task's ``ExportSpec.check`` compares PyTorch with the exported file through
:func:`run_exported` (the built-in tasks reach it through
:func:`lucidyolo.export.onnx.onnx_parity` and their own parity checks in their packages),
which picks the runtime from the
file: ``.xml`` OpenVINO, ``.onnx`` onnxruntime, a zip archive of another name TorchScript. The
check itself does not change with the format.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucidyolo.errors import NotAvailableError

if TYPE_CHECKING:  # torch-free at import: the CLI refuses a format before torch loads
    from torch import Tensor


INPUT_NAME = "images"
"""The input name of every exported graph: float ``(B, 3, H, W)`` in ``[0, 1]``."""


@dataclass(frozen=True)
class ExportFormat:
    """One ``--format`` value: its default suffix, the extra it needs, and whether ``--half`` applies."""

    name: str
    suffix: str
    description: str
    extra: str | None = None
    half: bool = False


FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat("onnx", ".onnx", "the deployed graph for onnxruntime and every ONNX runtime", extra="onnx"),
        ExportFormat("torchscript", ".torchscript", "the deployed graph traced for torch.jit.load / libtorch (C++)"),
        ExportFormat("openvino", ".xml", "OpenVINO IR (.xml + .bin beside it), converted from the ONNX graph",
                     extra="openvino"),
        ExportFormat("weights", ".weights.pt", "a slim weights file for --model.weights, eval, predict", half=True),
    )
}
"""What ``--format`` accepts, in the order the help and the errors list them."""

PLANNED = ("tensorrt", "coreml", "tflite")
"""Formats lucid means to write (docs/export.md) but does not yet: asked for, they are refused as planned."""


def install_hint(extra: str) -> str:
    """The install line of an optional extra, as the README spells installs."""
    return f'pip install -c constraints.txt -e ".[{extra}]"'


def import_openvino() -> Any:
    """``openvino``, or :class:`NotAvailableError` (exit 2) naming the extra that installs it."""
    try:
        import openvino
    except ImportError as err:
        raise NotAvailableError(
            "--format openvino needs the openvino package, which is not installed.",
            fix=f"install the extra: {install_hint('openvino')}",
        ) from err
    return openvino


OPENVINO_CHECKED_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
"""How ``--check`` compiles an OpenVINO export: float32, the precision the file stores. OpenVINO's CPU
plugin otherwise infers in bfloat16 on CPUs with bf16 instructions (AVX-512 BF16, AMX), about
1-2 px off at 640 px: deployments that want the checked numbers pass this config to ``compile_model``."""


def run_exported(path: str | Path, images: Tensor) -> list[Tensor]:
    """Every output of an exported file on ``images`` (CPU, float32), in the graph's order.

    The runtime is the file's: ``.xml`` OpenVINO (compiled with :data:`OPENVINO_CHECKED_CONFIG`),
    ``.onnx`` onnxruntime, else a zip archive TorchScript (``torch.jit.load``), else ONNX.
    """
    import torch

    path = Path(path)
    x = images.float().cpu()
    if path.suffix == ".xml":
        ov = import_openvino()
        compiled = ov.Core().compile_model(str(path), "CPU", OPENVINO_CHECKED_CONFIG)
        result = compiled([x.numpy()])
        return [torch.from_numpy(result[out].copy()) for out in compiled.outputs]
    if path.suffix != ".onnx" and zipfile.is_zipfile(path):  # a TorchScript archive, whatever its name (.torchscript, .pt)
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch 2.14 deprecates torch.jit.load
            module = torch.jit.load(str(path), map_location="cpu").eval()
        with torch.no_grad():
            out = module(x)
        return [t.float() for t in (out if isinstance(out, (tuple, list)) else (out,))]
    return run_onnx(path, images)


def run_onnx(path: str | Path, images: Tensor) -> list[Tensor]:
    """Every output of the ONNX file on ``images`` through onnxruntime (CPU), in graph order."""
    import torch

    try:
        import onnxruntime as ort
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise NotAvailableError(
            "onnxruntime is not installed.", fix=f"install the extra: {install_hint('onnx')}"
        ) from err
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [torch.from_numpy(a) for a in session.run(None, {INPUT_NAME: images.float().cpu().numpy()})]
