"""``lucid predict`` and the Python API's ``Model.predict``: one code path from an image to the task's dicts.

:class:`Predictor` holds a restored model ready to answer (BatchNorm folded, on
its device) and runs one ``(H, W, 3)`` uint8 RGB image at a time through
letterbox -> forward -> the task's ``decode`` -> the task's ``predict`` hook.
:func:`run_predict` is the command: it resolves ``--source``, reads each file
and writes JSON and drawn images.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import NotAvailableError, UserError

if TYPE_CHECKING:
    import numpy as np

    from lucidyolo.engine.restore import Restored

DECODERS = ("e2e", "nms")


def check_predict_args(conf: float, decoder: str) -> None:
    """Refuse an unknown decoder or a threshold outside ``[0, 1]`` (:class:`UserError`)."""
    if decoder not in DECODERS:
        raise UserError(f"--decoder {decoder!r} is not known.", fix="Use e2e (one-to-one top-k) or nms.")
    if not 0.0 <= conf <= 1.0:
        raise UserError(f"--conf {conf} is outside [0, 1].", fix="Use e.g. --conf 0.25.")


@dataclass
class ImageOutcome:
    """One image's answer.

    Attributes:
        decoded: the task's ``decode(...)[0]`` on the CPU (e.g. detection's ``(300, 6)``
            ``[x1, y1, x2, y2, score, class]`` in network-input pixels).
        rows: the task's ``predict`` hook dicts (JSON-able, original-image pixels).
        letterbox: ``(scale, pad_x, pad_y)`` from the original image to the network input.
    """

    decoded: Any
    rows: list[dict[str, Any]]
    letterbox: tuple[float, float, float]


class Predictor:
    """A restored checkpoint ready to predict image after image.

    Args:
        restored: the model from :func:`lucidyolo.engine.restore.restore`.
        decoder: ``"e2e"`` (one-to-one top-k) or ``"nms"``.
        img_size: network input side (default: the run's ``data.img_size``), a multiple of 32.
        device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
        draw: the task's ``draw`` hook is needed (refused up front when it has none).

    Raises:
        NotAvailableError: the task provides no ``decode`` / ``predict`` (/ ``draw``) hook.
        UserError: ``img_size`` is not a multiple of 32, a device this machine lacks.
    """

    def __init__(self, restored: Restored, decoder: str = "e2e", img_size: int | None = None, device: str = "auto",
                 draw: bool = False) -> None:
        spec = restored.spec
        missing = spec.missing_hooks("decode", "predict", *(("draw",) if draw else ()))
        if missing:
            raise NotAvailableError(
                f"`lucid predict` for task {spec.name!r} is not available: its plugin provides no {', '.join(missing)}.",
                fix="Nothing was run." if "draw" not in missing else "Run without --save.",
            )
        size = img_size or restored.config.data.img_size
        if size % 32:
            raise UserError(f"--img-size {size} is not a multiple of 32.", fix="Use e.g. 640.")
        from lucidyolo.engine.evaluate import pick_device
        from lucidyolo.models.inference_view import inference_model

        self.restored = restored
        self.spec = spec
        self.decoder = decoder
        self.img_size = int(size)
        self.class_names: list[str] = list(restored.checkpoint["lucid"].get("class_names") or [])
        self.meta = restored.dataset_meta
        self.device = pick_device(device)
        # BN folded; e2e: the o2o branch only. A copy: the restored model is left as it was.
        self.model = inference_model(restored.model, paths=(decoder,), device=self.device)

    def __call__(self, image: np.ndarray, conf: float = 0.25) -> ImageOutcome:
        """Predict one ``(H, W, 3)`` uint8 RGB image; rows at or above ``conf``."""
        import torch

        from lucidyolo.data.augment.letterbox import letterbox_image

        assert self.spec.decode is not None and self.spec.predict is not None
        boxed, lb = letterbox_image(image, self.img_size)
        x = torch.from_numpy(boxed).permute(2, 0, 1)[None].to(self.device).float() / 255.0  # (1, 3, S, S)
        with torch.inference_mode():
            decoded = self.spec.decode(self.model(x), self.decoder)[0].cpu()
            letterbox = (lb.scale, lb.pad_x, lb.pad_y)
            rows = self.rows(decoded, image.shape[:2], letterbox, conf)
        return ImageOutcome(decoded, rows, letterbox)

    def rows(self, decoded: Any, image_hw: tuple[int, ...], letterbox: tuple[float, float, float],
             conf: float) -> list[dict[str, Any]]:
        """The task's ``predict`` hook on one image's ``decoded`` output (again, e.g. at another ``conf``)."""
        assert self.spec.predict is not None
        h, w = int(image_hw[0]), int(image_hw[1])
        return list(self.spec.predict(decoded=decoded, image_hw=(h, w), letterbox=letterbox,
                                      class_names=self.class_names, conf=conf, meta=self.meta))

    def draw(self, image: np.ndarray, rows: list[dict[str, Any]]) -> Any:
        """The task's ``draw`` hook: ``rows`` drawn on ``image``, a ``PIL.Image.Image``."""
        if self.spec.draw is None:
            raise NotAvailableError(
                f"Drawing predictions of task {self.spec.name!r} is not available: its plugin provides no draw hook.",
                fix="Use the predictions' tensors or JSON instead.",
            )
        return self.spec.draw(image=image, predictions=rows, class_names=self.class_names, meta=self.meta)


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
    check_predict_args(conf, decoder)
    from lucidyolo.predict.sources import resolve_sources

    files = resolve_sources(source)
    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.engine.restore import restore
    from lucidyolo.engine.weights_source import checkpoint_file

    checkpoint = checkpoint_file(checkpoint)  # a run folder: the output names the file it ran
    predictor = Predictor(restore(checkpoint, ema=ema), decoder, img_size, device, draw=save is not None)
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
    results = []
    for f in files:  # one image at a time: sizes differ and latency per image is what a user sees
        image = read_image_fast(f)  # libjpeg-turbo for JPEG, as validation decodes
        rows = predictor(image, conf).rows
        h, w = image.shape[:2]
        if on_image is not None:
            on_image(f, rows)
        results.append({"image": str(f), "height": h, "width": w, "predictions": rows})
        if save is not None:
            drawn = predictor.draw(image, rows)
            with atomic_open(save / f"{f.stem}.jpg", "wb") as out:  # whole files only, whatever stops the run
                drawn.save(out, format="JPEG", quality=92)
    if output is not None:
        with atomic_open(output, "w", encoding="utf-8") as out:
            out.write(json.dumps({"checkpoint": str(checkpoint), "decoder": decoder, "conf": conf,
                                  "images": results}, indent=2))
    return results
