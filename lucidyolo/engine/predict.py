"""``lucid predict``: run a checkpoint on images; print, write JSON, draw."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import NotAvailableError, UserError


def run_predict(
    checkpoint: Path, source: str, conf: float = 0.25, decoder: str = "e2e", save: Path | None = None,
    output: Path | None = None, img_size: int | None = None, device: str = "auto", ema: bool = True,
    on_image: Callable[[Path, list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Predict every image of ``source``; ``on_image(path, predictions)`` is called as each one is done.

    Returns one ``{"image", "height", "width", "predictions"}`` dict per image
    (``predictions`` as the task's ``predict`` hook returns them).
    """
    from lucidyolo.engine.fit import quiet_known_warnings

    quiet_known_warnings()
    if decoder not in ("e2e", "nms"):
        raise UserError(f"--decoder {decoder!r} is not known.", fix="Use e2e (one-to-one top-k) or nms.")
    if not 0.0 <= conf <= 1.0:
        raise UserError(f"--conf {conf} is outside [0, 1].", fix="Use e.g. --conf 0.25.")
    from lucidyolo.predict.sources import resolve_sources

    files = resolve_sources(source)
    import torch

    from lucidyolo.data.augment.letterbox import letterbox_image
    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.engine.evaluate import pick_device
    from lucidyolo.engine.restore import restore

    restored = restore(checkpoint, ema=ema)
    spec = restored.spec
    missing = spec.missing_hooks("decode", "predict", *(("draw",) if save is not None else ()))
    if missing:
        raise NotAvailableError(
            f"`lucid predict` for task {spec.name!r} is not available: its plugin provides no {', '.join(missing)}.",
            fix="Nothing was run." if "draw" not in missing else "Run without --save.",
        )
    assert spec.decode is not None and spec.predict is not None
    names = list(restored.checkpoint["lucid"].get("class_names") or [])
    size = img_size or restored.config.data.img_size
    if size % 32:
        raise UserError(f"--img-size {size} is not a multiple of 32.", fix="Use e.g. 640.")
    dev = pick_device(device)
    from lucidyolo.models.inference_view import inference_model

    model = inference_model(restored.model, paths=(decoder,), device=dev)  # BN folded; e2e: o2o branch only
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
    results = []
    with torch.inference_mode():
        for f in files:  # one image at a time: sizes differ and latency per image is what a user sees
            image = read_image_fast(f)  # libjpeg-turbo for JPEG, as validation decodes
            boxed, lb = letterbox_image(image, size)
            x = torch.from_numpy(boxed).permute(2, 0, 1)[None].to(dev).float() / 255.0  # (1, 3, S, S)
            decoded = spec.decode(model(x), decoder)[0].cpu()
            h, w = image.shape[:2]
            rows = spec.predict(
                decoded=decoded, image_hw=(h, w), letterbox=(lb.scale, lb.pad_x, lb.pad_y), class_names=names, conf=conf,
                meta=restored.dataset_meta,
            )
            if on_image is not None:
                on_image(f, rows)
            results.append({"image": str(f), "height": h, "width": w, "predictions": rows})
            if save is not None:
                assert spec.draw is not None
                drawn = spec.draw(image=image, predictions=rows, class_names=names, meta=restored.dataset_meta)
                with atomic_open(save / f"{f.stem}.jpg", "wb") as out:  # whole files only, whatever stops the run
                    drawn.save(out, format="JPEG", quality=92)
    if output is not None:
        with atomic_open(output, "w", encoding="utf-8") as out:
            out.write(json.dumps({"checkpoint": str(checkpoint), "decoder": decoder, "conf": conf,
                                  "images": results}, indent=2))
    return results
