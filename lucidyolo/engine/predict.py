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

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import NotAvailableError, UserError

if TYPE_CHECKING:
    from lucidyolo.engine.restore import Restored
    from lucidyolo.tasks.api import TaskSpec

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
        return self.batch([image], conf)[0]

    def batch(self, images: Sequence[np.ndarray], conf: float = 0.25) -> list[ImageOutcome]:
        """Predict ``(H_i, W_i, 3)`` uint8 RGB images of any sizes in one forward pass.

        Each is letterboxed to ``(S, S)`` on its own (the answers are those of one image at a
        time, to float rounding); the batch is ``(B, 3, S, S)``.
        """
        import numpy as np
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
            decoded = self.spec.decode(self.model(x), self.decoder).cpu()
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
                                      class_names=self.class_names, conf=conf, meta=self.meta))

    def draw(self, image: np.ndarray, rows: list[dict[str, Any]]) -> Any:
        """The task's ``draw`` hook: ``rows`` drawn on ``image``, a ``PIL.Image.Image``."""
        if self.spec.draw is None:
            raise NotAvailableError(
                f"Drawing predictions of task {self.spec.name!r} is not available: its plugin provides no draw hook.",
                fix="Use the predictions' tensors or JSON instead.",
            )
        return self.spec.draw(image=image, predictions=rows, class_names=self.class_names, meta=self.meta)


@dataclass
class Item:
    """One picture to predict: an image file, or a frame of a video (``frame`` its 0-based index)."""

    source: Path
    image: np.ndarray
    frame: int | None = None
    time: float | None = None
    fps: Fraction | None = None

    @property
    def name(self) -> str:
        """How the item is named in printed lines: the file, and ``#frame=N`` for a video frame."""
        return str(self.source) if self.frame is None else f"{self.source}#frame={self.frame}"


def check_outputs(spec: TaskSpec, save_txt: Path | None, save_json: Path | None) -> None:
    """Refuse ``--save-txt`` / ``--save-json`` up front when the task has no hook to write them."""
    for flag, hook, chosen in (("--save-txt", "label_lines", save_txt), ("--save-json", "coco_results", save_json)):
        if chosen is not None and getattr(spec, hook) is None:
            raise NotAvailableError(
                f"`lucid predict {flag}` for task {spec.name!r} is not available: its plugin provides no {hook}.",
                why="the task has no such file format (or its plugin does not write it yet).",
                fix=f"Run without {flag}; --output FILE writes every prediction as JSON.",
            )


def image_ids(files: Sequence[Path]) -> dict[Path, int] | None:
    """COCO ``image_id`` per image file when every stem is a distinct number (COCO's own file names,
    ``000000000139.jpg`` -> 139); ``None`` otherwise (ids then count 1, 2, ... in processing order)."""
    from lucidyolo.predict.sources import is_video

    if any(is_video(f) for f in files) or not all(f.stem.isdigit() for f in files):
        return None
    ids = {f: int(f.stem) for f in files}
    return ids if len(set(ids.values())) == len(ids) else None


def _items(files: Sequence[Path]) -> Iterator[Item]:
    """Every image, and every frame of every video, in order; a video is read frame by frame."""
    from lucidyolo.data.image_io import read_image_fast
    from lucidyolo.predict.sources import is_video
    from lucidyolo.predict.video import VideoReader

    for f in files:
        if not is_video(f):
            yield Item(f, read_image_fast(f))  # libjpeg-turbo for JPEG, as validation decodes
            continue
        with VideoReader(f) as video:
            for i, frame in enumerate(video):
                yield Item(f, frame, i, round(float(i / video.fps), 6), video.fps)


def _batches(items: Iterator[Item], size: int) -> Iterator[list[Item]]:
    batch: list[Item] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class _Outputs:
    """The files of one ``lucid predict`` run, written item by item as results arrive.

    ``--save``: ``<stem>.jpg`` per image; per video ``<stem>.mp4`` (every frame drawn, the source's
    frame rate) and ``<stem>.jsonl`` (one JSON line per frame). ``--save-txt``: ``<stem>.txt`` per
    image, ``<stem>_<frame:06d>.txt`` per frame (empty when nothing was found). ``--save-json``: one
    COCO results list. Videos and JSON lines are written to temporary files, renamed when complete.
    """

    def __init__(self, predictor: Predictor, save: Path | None, save_txt: Path | None, save_json: Path | None,
                 ids: dict[Path, int] | None) -> None:
        self.predictor, self.save, self.save_txt, self.save_json = predictor, save, save_txt, save_json
        self.ids = ids
        self.next_id = 1
        self.coco: list[dict[str, Any]] = []
        self._stack = contextlib.ExitStack()
        self._video: Path | None = None
        self._writer: Any = None
        self._lines: Any = None
        for folder in (save, save_txt):
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)

    def image_id(self, item: Item) -> int:
        if self.ids is not None:
            return self.ids[item.source]
        self.next_id += 1
        return self.next_id - 1

    def write(self, item: Item, rows: list[dict[str, Any]], image_id: int) -> None:
        spec, hw = self.predictor.spec, (int(item.image.shape[0]), int(item.image.shape[1]))
        if self.save is not None:
            drawn = self.predictor.draw(item.image, rows)
            if item.frame is None:
                with atomic_open(self.save / f"{item.source.stem}.jpg", "wb") as out:  # whole files only
                    drawn.save(out, format="JPEG", quality=92)
            else:
                self._video_frame(item, rows, np.asarray(drawn))
        if self.save_txt is not None:
            assert spec.label_lines is not None
            lines = spec.label_lines(predictions=rows, image_hw=hw, class_names=self.predictor.class_names,
                                     meta=self.predictor.meta)
            stem = item.source.stem if item.frame is None else f"{item.source.stem}_{item.frame:06d}"
            with atomic_open(self.save_txt / f"{stem}.txt", "w", encoding="utf-8") as out:
                out.write("".join(f"{line}\n" for line in lines))
        if self.save_json is not None:
            assert spec.coco_results is not None
            self.coco += spec.coco_results(predictions=rows, image_id=image_id, image_hw=hw,
                                           class_names=self.predictor.class_names, meta=self.predictor.meta)

    def _video_frame(self, item: Item, rows: list[dict[str, Any]], drawn: np.ndarray) -> None:
        from lucidyolo.predict.video import VideoWriter

        assert self.save is not None and item.frame is not None and item.fps is not None
        if self._video != item.source:
            self.close_video()
            target = self.save / f"{item.source.stem}.mp4"
            if target.resolve() == item.source.resolve():
                raise UserError(f"--save {self.save} would overwrite the source video {item.source}.",
                                fix="Save into another folder.")
            self._stack = contextlib.ExitStack()
            out = self._stack.enter_context(atomic_open(target, "wb"))
            self._writer = VideoWriter(out, item.fps, drawn.shape[0], drawn.shape[1])
            self._lines = self._stack.enter_context(
                atomic_open(self.save / f"{item.source.stem}.jsonl", "w", encoding="utf-8"))
            self._video = item.source
        self._writer.write(drawn)
        self._lines.write(json.dumps({"frame": item.frame, "time": item.time, "height": int(drawn.shape[0]),
                                      "width": int(drawn.shape[1]), "predictions": rows}) + "\n")

    def close_video(self) -> None:
        """Finish the current video (its MP4 index) and put it and its JSON lines in place."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._video = None
        self._stack.close()

    def abort(self, exc: BaseException) -> None:
        """Leave no partial video or JSON lines behind (the temporary files are removed)."""
        self._writer = None
        self._video = None
        self._stack.__exit__(type(exc), exc, exc.__traceback__)


def run_predict(
    checkpoint: Path, source: str, conf: float = 0.25, decoder: str = "e2e", save: Path | None = None,
    output: Path | None = None, img_size: int | None = None, device: str = "auto", ema: bool = True,
    on_image: Callable[[str, list[dict[str, Any]]], None] | None = None, batch_size: int = 16,
    save_txt: Path | None = None, save_json: Path | None = None,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> list[dict[str, Any]]:
    """Predict every image and video frame of ``source``, ``batch_size`` pictures per forward pass.

    ``on_image(name, predictions)`` is called as each picture is done (``name`` the file, or
    ``FILE#frame=N`` for a video frame); ``on_progress(done, total)`` after each batch (``total``
    None when a video does not declare its frame count).

    Returns one ``{"image", "height", "width", "predictions"}`` dict per picture (``predictions`` as
    the task's ``predict`` hook returns them); a video frame adds ``frame`` and ``time`` in seconds,
    and with ``save_json`` each adds the ``image_id`` of its COCO results.

    Raises:
        UserError: a bad threshold, decoder, size, batch size or source; a task without the hook an
            output needs; PyAV missing for a video, or a video that cannot be decoded.
    """
    from lucidyolo.engine.fit import quiet_known_warnings

    quiet_known_warnings()
    check_predict_args(conf, decoder)
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
    from lucidyolo.engine.restore import restore
    from lucidyolo.engine.weights_source import checkpoint_file

    checkpoint = checkpoint_file(checkpoint)  # a run folder: the output names the file it ran
    restored = restore(checkpoint, ema=ema)
    check_outputs(restored.spec, save_txt, save_json)
    predictor = Predictor(restored, decoder, img_size, device, draw=save is not None)
    outputs = _Outputs(predictor, save, save_txt, save_json, image_ids(files))
    results: list[dict[str, Any]] = []
    try:
        # batches of pictures (a batch may span files): letterbox makes every input (S, S)
        for batch in _batches(_items(files), batch_size):
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
