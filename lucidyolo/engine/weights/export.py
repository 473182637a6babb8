"""``lucid export``: a checkpoint's deployed graph (trunk + o2o + top-k) to ONNX, TorchScript or OpenVINO
IR, optionally checked against PyTorch; or a slim weights file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucidyolo.errors import NotAvailableError, UserError

RUNTIMES = {"onnx": "onnxruntime", "torchscript": "TorchScript (torch.jit.load)", "openvino": "OpenVINO (CPU, float32)"}
"""What ``--check`` runs the exported file with, by format (the parity line names it)."""


def check_format(fmt: str, half: bool = False) -> None:
    """Refuse an unknown or planned ``--format``, ``--half`` where the format stores no float16, a missing extra.

    Runs before the checkpoint is read: nothing is loaded for a request that cannot be served.
    """
    from lucidyolo.export.formats import FORMATS, PLANNED, import_openvino

    supported = ", ".join(FORMATS)
    if fmt in PLANNED:
        raise NotAvailableError(
            f"--format {fmt!r} is not supported yet: it is planned.",
            why=f"supported: {supported}; planned: {', '.join(PLANNED)}.",
            fix="Export to onnx and convert with the target's own tools meanwhile.",
        )
    if fmt not in FORMATS:
        raise UserError(
            f"--format {fmt!r} is not supported.",
            why=f"supported: {supported}; planned (not built yet): {', '.join(PLANNED)}.",
            fix="Use one of the supported formats, e.g. --format onnx.",
        )
    if half and not FORMATS[fmt].half:
        with_half = ", ".join(f.name for f in FORMATS.values() if f.half)
        raise UserError(
            f"--half does not apply to --format {fmt}.",
            why=f"the {fmt} export is float32, the precision --check verifies; --half applies to: {with_half}.",
            fix="Drop --half (or use --format weights --half for a float16 weights file).",
        )
    if fmt == "openvino":
        import_openvino()


def run_export(
    checkpoint: Path, fmt: str = "onnx", img_size: int | None = None, dynamic_batch: bool = False,
    check: bool = False, output: Path | None = None, ema: bool = True, half: bool = False, keep_raw: bool = False,
) -> dict[str, Any]:
    """Write the deployed graph with the task's named outputs; ``check`` runs the task's parity check on it.

    ``fmt`` is a name of :data:`lucidyolo.export.formats.FORMATS`. ``checkpoint`` may be a run
    directory (its best checkpoint); the default output sits beside the checkpoint file, with the
    format's suffix. Returns ``{"format", "path", <fmt>: path, "img_size", "dynamic_batch", "outputs",
    "bytes"}`` (OpenVINO adds ``"bin"``; ``bytes`` counts both files) plus ``parity`` and ``runtime``
    when checked; ``weights`` returns :func:`export_weights`'s dict.
    """
    from lucidyolo.engine.process.known_warnings import quiet_known_warnings
    from lucidyolo.engine.weights.weights_source import checkpoint_file
    from lucidyolo.export.formats import FORMATS

    check_format(fmt, half)
    quiet_known_warnings()
    checkpoint = checkpoint_file(checkpoint)
    if fmt == "weights":
        result = export_weights(checkpoint, output or checkpoint.with_suffix(".weights.pt"), half=half, ema=ema,
                                keep_raw=keep_raw)
        return {"format": fmt, "path": result["weights"], **result}
    out = output or checkpoint.with_suffix(FORMATS[fmt].suffix)
    if fmt == "openvino" and out.suffix != ".xml":
        from lucidyolo.errors import ConfigError

        raise ConfigError(f"--output {out} does not end in .xml.",
                          why="an OpenVINO export is <name>.xml with <name>.bin beside it.",
                          fix=f"use e.g. --output {out.with_suffix('.xml')}")
    from lucidyolo.engine.weights.restore import restore

    restored = restore(checkpoint, ema=ema)
    spec = restored.spec
    if not spec.capabilities.export or spec.export is None:
        raise NotAvailableError(
            f"Export for task {spec.name!r} is not available: its plugin declares no export outputs.",
            fix="Nothing was run.",
        )
    if check and spec.export.check is None:
        raise NotAvailableError(
            f"`--check` for task {spec.name!r} is not available: its plugin provides no parity check.",
            fix="Export without --check.",
        )
    size = img_size or restored.config.data.img_size
    import torch

    deployed = spec.export.deploy(model=restored.model, cfg=restored.config.model).eval()
    outputs = spec.export.outputs
    if fmt == "torchscript":
        from lucidyolo.export.torchscript import export_torchscript

        path = export_torchscript(deployed, out, img_size=size, output_names=outputs)
        dynamic_batch = True  # the trace records the batch as a size: any batch runs
        size_bytes = path.stat().st_size
    elif fmt == "openvino":
        from lucidyolo.export.openvino_ir import export_openvino

        path = export_openvino(deployed, out, img_size=size, dynamic_batch=dynamic_batch, output_names=outputs)
        size_bytes = path.stat().st_size + path.with_suffix(".bin").stat().st_size
    else:
        from lucidyolo.export.onnx import export_onnx

        path = export_onnx(deployed, out, img_size=size, dynamic_batch=dynamic_batch, output_names=outputs)
        size_bytes = path.stat().st_size
    result: dict[str, Any] = {
        "format": fmt, "path": str(path), fmt: str(path), "img_size": size, "dynamic_batch": dynamic_batch,
        "outputs": list(outputs), "bytes": size_bytes,
    }
    if fmt == "openvino":
        result["bin"] = str(path.with_suffix(".bin"))
    if check:
        assert spec.export.check is not None
        gen = torch.Generator().manual_seed(0)
        images = torch.rand(2 if dynamic_batch else 1, 3, size, size, generator=gen)
        runtime = RUNTIMES[fmt]
        try:
            parity = spec.export.check(deployed=deployed, onnx_path=path, images=images, cfg=restored.config.model)
        except UserError:
            raise
        except Exception as err:
            if fmt == "onnx":
                raise
            # a plugin's check that opens the file with onnxruntime itself reads ONNX only
            raise NotAvailableError(
                f"`--check` of task {spec.name!r} could not run the {fmt} file {path}: {type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}",
                why="a task's check that runs onnxruntime itself checks ONNX only; "
                    "lucidyolo.export.formats.run_exported runs every format lucid writes.",
                fix=f"The {fmt} file was written unchecked: check the same graph with --format onnx --check.",
            ) from err
        result["parity"], result["runtime"] = parity, runtime
        if not parity["passed"]:
            raise UserError(
                f"{runtime} does not reproduce PyTorch on this export.",
                why=f"parity check failed: {parity.get('summary', parity)}",
                fix=f"Report this with the checkpoint; the {fmt} export was written but should not be deployed.",
            )
    return result


WEIGHTS_FORMAT = 1


def export_weights(
    checkpoint: Path, output: Path, half: bool = False, ema: bool = True, keep_raw: bool = False,
) -> dict[str, Any]:
    """A slim weights file for sharing: the model's weights, the config, class names and dataset meta.

    No optimizer, scheduler, loop or callback state. The layout is a checkpoint's
    (``lucid`` section, ``state_dict`` with ``model.`` keys, ``lucid_ema.shadow``), so
    ``--model.weights``, ``lucid eval``, ``lucid predict`` and ``lucid export`` read it
    like one; ``lucid["kind"] == "weights"`` marks it.

    Args:
        checkpoint: a checkpoint written by ``lucid fit``.
        output: the file to write.
        half: store float tensors as float16 (loading casts them back to the model's float32).
        ema: store the EMA weights as the model's (what eval, predict and export use), else the raw ones.
        keep_raw: store both: the raw weights in ``state_dict`` and the EMA in ``lucid_ema`` (twice the size).

    Returns:
        ``{"weights", "bytes", "checkpoint_bytes", "half", "task", "variant", "stored"}``.
    """
    import torch

    from lucidyolo.engine.weights.checkpoint import assert_plain, atomic_save
    from lucidyolo.engine.weights.published_weights import read_model_checkpoint

    ckpt = read_model_checkpoint(checkpoint)
    lucid = ckpt.get("lucid")
    if not isinstance(lucid, dict) or not isinstance(lucid.get("config"), dict):
        raise UserError(f"{checkpoint} is not a lucid checkpoint (no 'lucid' section).",
                        fix="Pass a checkpoint written by `lucid fit`.")

    def slim(t: torch.Tensor) -> torch.Tensor:
        t = t.detach().cpu()
        return t.half() if half and t.is_floating_point() else t.clone()

    config = lucid["config"]
    state = {k: slim(v) for k, v in ckpt.get("state_dict", {}).items() if k.startswith("model.")}
    out: dict[str, Any] = {
        "lucid": {
            "config": config, "class_names": list(lucid.get("class_names") or []),
            "dataset_meta": dict(lucid.get("dataset_meta") or {}), "format": lucid.get("format", 1),
            "kind": "weights", "weights_format": WEIGHTS_FORMAT, "task": config["model"]["task"],
            "variant": config["model"]["variant"], "img_size": config.get("data", {}).get("img_size"),
            "half": half, **({"source": {k: v for k, v in lucid["source"].items() if k != "names"}} if "source" in lucid else {}),
        },
        "state_dict": state,
    }
    average = ckpt.get("lucid_ema")
    shadow = average.get("shadow") if isinstance(average, dict) else None
    stored = "raw"
    if isinstance(shadow, dict) and keep_raw:
        out["lucid_ema"] = {"shadow": {k: slim(v) for k, v in shadow.items()}}
        stored = "raw + EMA"
    elif isinstance(shadow, dict) and ema:
        out["state_dict"] = {**state, **{f"model.{k}": slim(v) for k, v in shadow.items()}}
        stored = "EMA"
    out["lucid"]["stored"] = stored
    assert_plain(out, "weights")
    path = atomic_save(out, output)
    return {"weights": str(path), "bytes": path.stat().st_size, "checkpoint_bytes": Path(checkpoint).stat().st_size,
            "half": half, "task": config["model"]["task"], "variant": config["model"]["variant"], "stored": stored}
