"""``lucid predict``: run a checkpoint on images; print, write JSON, draw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lucidyolo.cli.console import console
from lucidyolo.errors import NotAvailableError, UserError


def run_predict(
    checkpoint: Path, source: str, conf: float = 0.25, decoder: str = "e2e", save: Path | None = None,
    output: Path | None = None, img_size: int | None = None, device: str = "auto", ema: bool = True,
) -> list[dict[str, Any]]:
    from lucidyolo.engine.fit import quiet_known_warnings

    quiet_known_warnings()
    if decoder not in ("e2e", "nms"):
        raise UserError(f"--decoder {decoder!r} is not known.", fix="Use e2e (one-to-one top-k) or nms.")
    if not 0.0 <= conf <= 1.0:
        raise UserError(f"--conf {conf} is outside [0, 1].", fix="Use e.g. --conf 0.25.")
    from lucidyolo.predict.sources import resolve_sources

    files = resolve_sources(source)
    import numpy as np
    import torch

    from lucidyolo.data.augment.letterbox import letterbox_image
    from lucidyolo.data.image_io import read_image
    from lucidyolo.engine.evaluate import pick_device
    from lucidyolo.engine.restore import restore
    from lucidyolo.metrics.mapping import unletterbox_boxes
    from lucidyolo.predict.draw import draw_boxes

    restored = restore(checkpoint, ema=ema)
    spec = restored.spec
    if spec.name != "det" or spec.decode is None:
        raise NotAvailableError(f"`lucid predict` for task {spec.name!r} is not built yet.", fix="Nothing was run.")
    names = list(restored.checkpoint["lucid"].get("class_names") or [])
    size = img_size or restored.config.data.img_size
    if size % 32:
        raise UserError(f"--img-size {size} is not a multiple of 32.", fix="Use e.g. 640.")
    dev = pick_device(device)
    model = restored.model.to(dev)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
    results = []
    with torch.inference_mode():
        for f in files:  # one image at a time: sizes differ and latency per image is what a user sees
            image = read_image(f)
            boxed, lb = letterbox_image(image, size)
            x = torch.from_numpy(boxed).permute(2, 0, 1)[None].to(dev).float() / 255.0  # (1, 3, S, S)
            dets = spec.decode(model(x), decoder)[0].cpu()  # (300, 6)
            dets = dets[dets[:, 4] >= max(conf, 1e-9)]
            h, w = image.shape[:2]
            boxes = np.asarray(unletterbox_boxes(dets[:, :4].double().numpy(), lb.scale, lb.pad_x, lb.pad_y, (h, w)))
            scores, labels = dets[:, 4].numpy(), dets[:, 5].long().numpy()
            rows = [
                {"box": [round(float(v), 2) for v in b], "score": round(float(s), 4), "label": int(c),
                 "name": names[int(c)] if int(c) < len(names) else str(int(c))}
                for b, s, c in zip(boxes, scores, labels, strict=True)
            ]
            for r in rows:
                console.print(f"{f}: {r['name']} {r['score']:.3f} {r['box']}", highlight=False)
            results.append({"image": str(f), "height": h, "width": w, "detections": rows})
            if save is not None:
                draw_boxes(image, boxes, scores, labels, names).save(save / f"{f.stem}.jpg", quality=92)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps({"checkpoint": str(checkpoint), "decoder": decoder, "conf": conf,
                                      "images": results}, indent=2))
    return results
