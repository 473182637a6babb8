"""``lucid export``: the deployed end-to-end graph to ONNX, TorchScript or OpenVINO IR, or a slim weights file."""

from __future__ import annotations

from pathlib import Path

import typer


def export(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`, or its run folder (best.ckpt, else last.ckpt)."),
    fmt: str = typer.Option(
        "onnx", "--format",
        help="onnx, torchscript or openvino (the deployed graph; openvino writes NAME.xml + NAME.bin and needs the "
             "openvino extra), or weights (a slim file for --model.weights, eval, predict). Planned: tensorrt, coreml, "
             "tflite.",
    ),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's)."),
    dynamic_batch: bool = typer.Option(
        False, "--dynamic-batch", help="Export a dynamic batch axis (a TorchScript trace always has one)."
    ),
    check: bool = typer.Option(
        False, "--check", help="Run the exported file (onnxruntime, TorchScript, OpenVINO) and compare with PyTorch."
    ),
    output: Path | None = typer.Option(None, "--output", help="Output file (default beside the checkpoint)."),
    ema: bool = typer.Option(True, "--ema/--no-ema", help="Export the EMA weights (default) or the raw ones."),
    half: bool = typer.Option(False, "--half", help="weights format: store float16 tensors (half the size)."),
    keep_raw: bool = typer.Option(
        False, "--keep-raw", help="weights format: store the raw weights beside the EMA ones (twice the size)."
    ),
) -> None:
    """Export the deployed graph (trunk + one-to-one head + top-k, no NMS) to ONNX, TorchScript or OpenVINO, or a slim weights file."""
    from lucidyolo.cli.console import info
    from lucidyolo.engine.weights.export import run_export

    result = run_export(checkpoint, fmt, img_size, dynamic_batch, check, output, ema, half, keep_raw)
    if "weights" in result:
        info(f"wrote {result['weights']} ({result['bytes'] / 1e6:.1f} MB{', float16' if result['half'] else ''}; "
             f"the checkpoint is {result['checkpoint_bytes'] / 1e6:.1f} MB): {result['task']} {result['variant']}, "
             f"{result['stored']} weights, config and class names")
        return
    written = result["path"] + (f" + {Path(result['bin']).name}" if "bin" in result else "")
    detail = ", opset 17" if result["format"] == "onnx" else ""
    info(f"wrote {written} ({result['bytes'] / 1e6:.1f} MB, {result['img_size']} px{detail}, "
         f"outputs {', '.join(result['outputs'])})")
    if "parity" in result:
        info(f"{result['runtime']} parity: {result['parity']['summary']}")
