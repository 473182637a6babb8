"""``lucid export``: a checkpoint's deployed graph (trunk + o2o + top-k) to ONNX, optionally checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lucidyolo.errors import NotAvailableError, UserError


def run_export(
    checkpoint: Path, fmt: str = "onnx", img_size: int | None = None, dynamic_batch: bool = False,
    check: bool = False, output: Path | None = None, ema: bool = True, half: bool = False, keep_raw: bool = False,
) -> dict[str, Any]:
    """Write the deployed graph with the task's named outputs; ``check`` runs the task's onnxruntime parity.

    ``checkpoint`` may be a run directory (its best checkpoint); the default output sits beside
    the checkpoint file. Returns ``{"onnx", "img_size", "dynamic_batch", "outputs", "bytes"}`` plus
    ``parity`` when checked.
    """
    from lucidyolo.engine.fit import quiet_known_warnings
    from lucidyolo.engine.weights_source import checkpoint_file

    quiet_known_warnings()
    checkpoint = checkpoint_file(checkpoint)
    if fmt == "weights":
        return export_weights(checkpoint, output or checkpoint.with_suffix(".weights.pt"), half=half, ema=ema,
                              keep_raw=keep_raw)
    if fmt != "onnx":
        raise UserError(f"--format {fmt!r} is not supported.", fix="Use --format onnx or --format weights.")
    from lucidyolo.engine.restore import restore

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
    out = output or checkpoint.with_suffix(".onnx")
    import torch

    from lucidyolo.export.onnx import export_onnx

    deployed = spec.export.deploy(model=restored.model).eval()
    path = export_onnx(deployed, out, img_size=size, dynamic_batch=dynamic_batch, output_names=spec.export.outputs)
    result: dict[str, Any] = {
        "onnx": str(path), "img_size": size, "dynamic_batch": dynamic_batch, "outputs": list(spec.export.outputs),
        "bytes": path.stat().st_size,
    }
    if check:
        assert spec.export.check is not None
        gen = torch.Generator().manual_seed(0)
        images = torch.rand(2 if dynamic_batch else 1, 3, size, size, generator=gen)
        parity = spec.export.check(deployed=deployed, onnx_path=path, images=images)
        result["parity"] = parity
        if not parity["passed"]:
            raise UserError(
                "onnxruntime does not reproduce PyTorch on this export.",
                why=f"parity check failed: {parity.get('summary', parity)}",
                fix="Report this with the checkpoint; the ONNX file was written but should not be deployed.",
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

    from lucidyolo.engine.checkpoint import assert_plain, atomic_save
    from lucidyolo.engine.published_weights import read_model_checkpoint

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
