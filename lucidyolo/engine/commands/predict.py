"""``lucid predict`` and the Python API's ``Model.predict``: one code path from an image to the task's dicts.

:class:`Predictor` holds a restored model ready to answer (BatchNorm folded, on
its device) and runs a batch of ``(H, W, 3)`` uint8 RGB images through
letterbox -> forward -> the task's ``decode`` -> the task's ``predict`` hook.
:func:`run_predict` is the command: it resolves ``--source`` (images and
videos), predicts ``batch_size`` pictures per forward pass and writes JSON,
drawn images and videos, YOLO label files (the task's ``label_lines``) and COCO
results (its ``coco_results``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import NotAvailableError, UserError

if TYPE_CHECKING:
    from lucidyolo.engine.weights.restore import Restored
    from lucidyolo.tasks.api import TaskSpec

def option(name: str, value: object, api: bool) -> str:
    """Option ``name`` (``img_size``) set to ``value`` as the user wrote it: ``--img-size 640`` on the
    command line, ``img_size=640`` in Python (``api``), so a message names what the user can change."""
    return f"{name}={value!r}" if api else f"--{name.replace('_', '-')} {value}"


def check_predict_args(conf: float, api: bool = False) -> None:
    """Refuse a threshold outside ``[0, 1]`` (:class:`UserError`); ``api``: name it as Python's ``conf=``."""
    if not 0.0 <= conf <= 1.0:
        raise UserError(f"{option('conf', conf, api)} is outside [0, 1].", fix=f"Use e.g. {option('conf', 0.25, api)}.")


def resolve_decoder(spec: TaskSpec, decoder: str | None, api: bool = False) -> str:
    """The decode path to predict with: ``decoder``, or the task's default (the first of its ``decode_paths``).

    Raises:
        UserError: ``decoder`` is not one of the task's decode paths (the message lists them).
    """
    paths = tuple(spec.decode_paths)
    if decoder is None:
        return paths[0]
    if decoder not in paths:
        raise UserError(
            f"{option('decoder', decoder, True) if api else f'--decoder {decoder!r}'} is not a decode path of task "
            f"{spec.name!r}.",
            why=f"the {spec.name} task decodes its model's output along these paths only: {', '.join(paths)}.",
            fix=f"Use {' or '.join(option('decoder', p, api) for p in paths)}, or leave it out for the default "
            f"({paths[0]}).",
        )
    return decoder


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
        restored: the model from :func:`lucidyolo.engine.weights.restore.restore`.
        decoder: one of the task's ``decode_paths`` (``None``: the first, the task's default).
        img_size: network input side (default: the run's ``data.img_size``), a multiple of 32.
        device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
        draw: the task's ``draw`` hook is needed (refused up front when it has none).

    Raises:
        NotAvailableError: the task provides no ``decode`` / ``predict`` (/ ``draw``) hook.
        UserError: ``decoder`` is not a decode path of the task, ``img_size`` is not a multiple
            of 32, a device this machine lacks.
    """

    def __init__(self, restored: Restored, decoder: str | None = None, img_size: int | None = None,
                 device: str = "auto", draw: bool = False, api: bool = False) -> None:
        spec = restored.spec
        missing = spec.missing_hooks("decode", "predict", *(("draw",) if draw else ()))
        if missing:
            raise NotAvailableError(
                f"`lucid predict` for task {spec.name!r} is not available: its plugin provides no {', '.join(missing)}.",
                fix="Nothing was run." if "draw" not in missing else "Run without --save.",
            )
        decoder = resolve_decoder(spec, decoder, api)
        size = img_size or restored.config.data.img_size
        if size % 32:
            raise UserError(f"{option('img_size', size, api)} is not a multiple of 32.",
                            fix=f"Use e.g. {option('img_size', 640, api)}.")
        from lucidyolo.engine.commands.evaluate import inference_view, pick_device

        self.restored = restored
        self.spec = spec
        self.decoder = decoder
        self.img_size = int(size)
        self.class_names: list[str] = list(restored.checkpoint["lucid"].get("class_names") or [])
        self.meta = restored.dataset_meta
        self.device = pick_device(device, api)
        # The task's view for this one path (the built-in tasks' e2e: BN folded, o2o branch only).
        # A copy: the restored model is left as it was.
        self.model = inference_view(spec, restored.model, (decoder,), self.device)

    def __call__(self, image: np.ndarray, conf: float = 0.25) -> ImageOutcome:
        """Predict one ``(H, W, 3)`` uint8 RGB image; rows at or above ``conf``."""
        return self.batch([image], conf)[0]

    def batch(self, images: Sequence[np.ndarray], conf: float = 0.25) -> list[ImageOutcome]:
        """Predict ``(H_i, W_i, 3)`` uint8 RGB images of any sizes in one forward pass.

        Each is letterboxed to ``(S, S)`` on its own (the answers are those of one image at a
        time, to float rounding); the batch is ``(B, 3, S, S)``.
        """
        import torch

        from lucidyolo.data.augment.letterbox import letterbox_image

        assert self.spec.decode is not None and self.spec.predict is not None
        if not images:
            return []
        s = self.img_size
        boxed = np.empty((len(images), s, s, 3), np.uint8)  # (B, S, S, 3)
        letterboxes = []
        for i, image in enumerate(images):  # one affine warp per image: sizes differ
            boxed[i], lb = letterbox_image(image, s)
            letterboxes.append((lb.scale, lb.pad_x, lb.pad_y))
        x = torch.from_numpy(boxed).to(self.device).permute(0, 3, 1, 2).float() / 255.0  # (B, 3, S, S)
        with torch.inference_mode():
            decoded = self.spec.decode(outputs=self.model(x), path=self.decoder, cfg=self.restored.config.model).cpu()
            out = []
            for i, (image, letterbox) in enumerate(zip(images, letterboxes, strict=True)):
                one = decoded[i]
                out.append(ImageOutcome(one, self.rows(one, image.shape[:2], letterbox, conf), letterbox))
        return out

    def rows(self, decoded: Any, image_hw: tuple[int, ...], letterbox: tuple[float, float, float],
             conf: float) -> list[dict[str, Any]]:
        """The task's ``predict`` hook on one image's ``decoded`` output (again, e.g. at another ``conf``)."""
        assert self.spec.predict is not None
        h, w = int(image_hw[0]), int(image_hw[1])
        return list(self.spec.predict(decoded=decoded, image_hw=(h, w), letterbox=letterbox,
                                      class_names=self.class_names, conf=conf, meta=self.meta,
                                      cfg=self.restored.config.model))

    def draw(self, image: np.ndarray, rows: list[dict[str, Any]]) -> Any:
        """The task's ``draw`` hook: ``rows`` drawn on ``image``, a ``PIL.Image.Image``."""
        if self.spec.draw is None:
            raise NotAvailableError(
                f"Drawing predictions of task {self.spec.name!r} is not available: its plugin provides no draw hook.",
                fix="Use the predictions' tensors or JSON instead.",
            )
        return self.spec.draw(image=image, predictions=rows, class_names=self.class_names, meta=self.meta)


def label_lines_of(spec: TaskSpec) -> Callable[..., list[str]] | None:
    """``--save-txt``'s writer: the task's ``label_lines`` hook, else its field's YOLO row rule (or the box row)."""
    from lucidyolo.predict.default_label_lines import default_label_lines

    return spec.label_lines or default_label_lines(spec.name, spec.fields, spec.boxes)


def check_outputs(spec: TaskSpec, save_txt: Path | None, save_json: Path | None) -> None:
    """Refuse ``--save-txt`` / ``--save-json`` up front when the task has no way to write them."""
    writers = {"label_lines": label_lines_of(spec), "coco_results": spec.coco_results}
    for flag, hook, chosen in (("--save-txt", "label_lines", save_txt), ("--save-json", "coco_results", save_json)):
        if chosen is not None and writers[hook] is None:
            raise NotAvailableError(
                f"`lucid predict {flag}` for task {spec.name!r} is not available: its plugin provides no {hook}.",
                why="the task has no such file format (or its plugin does not write it yet).",
                fix=f"Run without {flag}; --output FILE writes every prediction as JSON.",
            )


def run_predict(
    checkpoint: Path, source: str, conf: float = 0.25, decoder: str | None = None, save: Path | None = None,
    output: Path | None = None, img_size: int | None = None, device: str = "auto", ema: bool = True,
    on_image: Callable[[str, list[dict[str, Any]]], None] | None = None, batch_size: int = 16,
    save_txt: Path | None = None, save_json: Path | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
    on_ready: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Predict every image and video frame of ``source``, ``batch_size`` pictures per forward pass.

    ``decoder`` is one of the checkpoint's task's ``decode_paths`` (``None``: its default, the
    first). ``on_ready(decoder)`` is called once the model is loaded, with the decode path used;
    ``on_image(name, predictions)`` as each picture is done (``name`` the file, or
    ``FILE#frame=N`` for a video frame); ``on_progress(done, total)`` after each batch (``total``
    None when a video does not declare its frame count). ``on_warning(line)`` gets one line per video
    with packets that did not decode (they are skipped; default :func:`warnings.warn`); ``on_note(line)``
    the one line saying how many temporary files of a killed earlier run were removed, if any.

    Returns one ``{"image", "height", "width", "predictions"}`` dict per picture (``predictions`` as
    the task's ``predict`` hook returns them); a video frame adds ``frame`` and ``time`` in seconds,
    and with ``save_json`` each adds the ``image_id`` of its COCO results.

    Raises:
        UserError: a bad threshold, decoder, size, batch size or source; a task without the hook an
            output needs; PyAV missing for a video, or a video that cannot be decoded.
    """
    from lucidyolo.engine.process.known_warnings import quiet_known_warnings

    quiet_known_warnings()
    from lucidyolo.engine.weights.weights_source import checkpoint_file

    checkpoint = checkpoint_file(checkpoint)  # a run folder: the output names the file it ran
    if not checkpoint.is_file():  # a wrong --checkpoint is named before the source is looked at
        from lucidyolo.engine.weights.checkpoint import load_checkpoint

        load_checkpoint(checkpoint)  # raises its "not found" / "not a file"
    check_predict_args(conf)
    if batch_size < 1:
        raise UserError(f"--batch-size {batch_size} is below 1.", fix="Use e.g. --batch-size 16.")
    from lucidyolo.predict.sources import is_video, resolve_sources

    files = resolve_sources(source)
    videos = [f for f in files if is_video(f)]
    total: int | None = len(files) - len(videos)
    if videos:
        from lucidyolo.predict.video import VideoReader

        for v in videos:  # every video opens before any work: a missing PyAV or a broken file fails now
            with VideoReader(v) as probe:
                total = None if total is None or not probe.frames else total + probe.frames
    from lucidyolo.data.pixel_limit import set_max_image_pixels
    from lucidyolo.engine.weights.restore import restore
    from lucidyolo.predict.items import batches, image_ids, source_items
    from lucidyolo.predict.outputs import PredictOutputs

    restored = restore(checkpoint, ema=ema)
    # the run's own limit: an image size it trained on is predicted on (older checkpoints: the default)
    set_max_image_pixels(restored.config.data.max_image_pixels)
    check_outputs(restored.spec, save_txt, save_json)
    predictor = Predictor(restored, decoder, img_size, device, draw=save is not None)
    decoder = predictor.decoder
    if on_ready is not None:
        on_ready(decoder)
    _remove_stale_temporaries(files, save, save_txt, save_json, output, on_note)
    outputs = PredictOutputs(predictor, save, save_txt, save_json, image_ids(files), label_lines_of(predictor.spec))
    results: list[dict[str, Any]] = []
    try:
        # batches of pictures (a batch may span files): letterbox makes every input (S, S)
        for batch in batches(source_items(files, on_warning), batch_size):
            for item, outcome in zip(batch, predictor.batch([it.image for it in batch], conf), strict=True):
                rows = outcome.rows
                if on_image is not None:
                    on_image(item.name, rows)
                h, w = item.image.shape[:2]
                image_id = outputs.image_id(item)
                entry: dict[str, Any] = {"image": str(item.source), "height": h, "width": w}
                if save_json is not None:  # the key from a file name to its COCO results
                    entry["image_id"] = image_id
                if item.frame is not None:
                    entry.update(frame=item.frame, time=item.time)
                results.append({**entry, "predictions": rows})
                outputs.write(item, rows, image_id)
            if on_progress is not None:
                on_progress(len(results), total)
        outputs.close_video()
    except BaseException as exc:
        outputs.abort(exc)
        raise
    if save_json is not None:
        with atomic_open(save_json, "w", encoding="utf-8") as out:
            json.dump(outputs.coco, out)
    if output is not None:
        with atomic_open(output, "w", encoding="utf-8") as out:
            out.write(json.dumps({"checkpoint": str(checkpoint), "decoder": decoder, "conf": conf,
                                  "images": results}, indent=2))
    return results


def _remove_stale_temporaries(files: list[Path], save: Path | None, save_txt: Path | None, save_json: Path | None,
                              output: Path | None, on_note: Callable[[str], None] | None) -> None:
    """Remove what an earlier run killed while writing this run's outputs left (a video's is the video's size)."""
    from lucidyolo.atomic_write import remove_abandoned
    from lucidyolo.predict.outputs import stale_temporaries

    removed, size = remove_abandoned(stale_temporaries(files, save, save_txt, save_json, output))
    if removed and on_note is not None:
        folders = ", ".join(str(f) for f in dict.fromkeys(p.parent for p in removed))
        on_note(f"Removed {len(removed)} temporary file{'s' * (len(removed) != 1)} ({size / 1e6:.1f} MB) left in "
                f"{folders} by an earlier predict killed while writing the same outputs.")
