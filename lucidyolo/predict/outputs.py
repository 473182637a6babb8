"""The files of one ``lucid predict`` run: drawn images and videos, JSON lines, YOLO label files, COCO results."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.atomic_write import atomic_open
from lucidyolo.errors import UserError
from lucidyolo.predict.items import Item


class PredictOutputs:
    """The files of one ``lucid predict`` run, written item by item as results arrive.

    ``--save``: ``<stem>.jpg`` per image; per video ``<stem>.mp4`` (every frame drawn, the source's
    frame rate) and ``<stem>.jsonl`` (one JSON line per frame). ``--save-txt``: ``<stem>.txt`` per
    image, ``<stem>_<frame:06d>.txt`` per frame (empty when nothing was found). ``--save-json``: one
    COCO results list. Videos and JSON lines are written to temporary files, renamed when complete.
    """

    def __init__(
        self,
        predictor: Any,
        save: Path | None,
        save_txt: Path | None,
        save_json: Path | None,
        ids: dict[Path, int] | None,
        label_lines: Any = None,
    ) -> None:
        """``label_lines`` writes ``--save-txt`` lines: the task's hook or its row rule's default."""
        self.predictor, self.save, self.save_txt, self.save_json = (
            predictor,
            save,
            save_txt,
            save_json,
        )
        self.ids = ids
        self.label_lines = label_lines
        self.next_id = 1
        self.coco: list[dict[str, Any]] = []
        self._stack = contextlib.ExitStack()
        self._video: Path | None = None
        self._writer: Any = None
        self._lines: Any = None
        self._created: list[Path] = []  # folders this run made, deepest first: removed again if a failure leaves them empty
        for folder in (save, save_txt):
            if folder is not None:
                missing = [f for f in (folder, *folder.parents) if not f.exists()]
                folder.mkdir(parents=True, exist_ok=True)
                self._created += missing

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
                with atomic_open(
                    self.save / f"{item.source.stem}.jpg", "wb"
                ) as out:  # whole files only
                    drawn.save(out, format="JPEG", quality=92)
            else:
                self._video_frame(item, rows, np.asarray(drawn))
        if self.save_txt is not None:
            assert self.label_lines is not None
            lines = self.label_lines(
                predictions=rows,
                image_hw=hw,
                class_names=self.predictor.class_names,
                meta=self.predictor.meta,
            )
            stem = (
                item.source.stem if item.frame is None else f"{item.source.stem}_{item.frame:06d}"
            )
            with atomic_open(self.save_txt / f"{stem}.txt", "w", encoding="utf-8") as out:
                out.write("".join(f"{line}\n" for line in lines))
        if self.save_json is not None:
            assert spec.coco_results is not None
            self.coco += spec.coco_results(
                predictions=rows,
                image_id=image_id,
                image_hw=hw,
                class_names=self.predictor.class_names,
                meta=self.predictor.meta,
            )

    def _video_frame(self, item: Item, rows: list[dict[str, Any]], drawn: np.ndarray) -> None:
        from lucidyolo.predict.video import VideoWriter

        assert self.save is not None and item.frame is not None and item.fps is not None
        if self._video != item.source:
            self.close_video()
            target = self.save / f"{item.source.stem}.mp4"
            if target.resolve() == item.source.resolve():
                raise UserError(
                    f"--save {self.save} would overwrite the source video {item.source}.",
                    fix="Save into another folder.",
                )
            self._stack = contextlib.ExitStack()
            out = self._stack.enter_context(atomic_open(target, "wb"))
            self._writer = VideoWriter(out, item.fps, drawn.shape[0], drawn.shape[1])
            self._lines = self._stack.enter_context(
                atomic_open(self.save / f"{item.source.stem}.jsonl", "w", encoding="utf-8")
            )
            self._video = item.source
        self._writer.write(drawn, item.frame)  # a lost source frame: the previous one stays on screen
        self._lines.write(
            json.dumps(
                {
                    "frame": item.frame,
                    "time": item.time,
                    "height": int(drawn.shape[0]),
                    "width": int(drawn.shape[1]),
                    "predictions": rows,
                }
            )
            + "\n"
        )

    def close_video(self) -> None:
        """Finish the current video (its MP4 index) and put it and its JSON lines in place."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._video = None
        self._stack.close()

    def abort(self, exc: BaseException) -> None:
        """Leave no partial video or JSON lines behind (the temporary files are removed), nor an empty folder we made."""
        self._writer = None
        self._video = None
        try:
            self._stack.__exit__(type(exc), exc, exc.__traceback__)
        finally:
            for folder in self._created:
                with contextlib.suppress(OSError):  # not empty (or gone): it stays
                    folder.rmdir()


def stale_temporaries(files: list[Path], save: Path | None, save_txt: Path | None,
                      *single: Path | None) -> list[Path]:
    """Temporary files left in this run's output folders by an earlier run killed while writing the same names.

    Only the names this run writes: ``<stem>.jpg`` / ``.mp4`` / ``.jsonl`` in ``save``, ``<stem>.txt``
    and ``<stem>_<frame>.txt`` in ``save_txt``, and each of ``single`` (``--save-json``, ``--output``);
    another run's files in a shared folder are not ours to judge.
    """
    import re

    from lucidyolo.atomic_write import temporaries
    from lucidyolo.predict.sources import is_video

    stems = {f.stem for f in files}
    found: list[Path] = []
    if save is not None:
        names = {f"{f.stem}{suffix}" for f in files for suffix in ((".mp4", ".jsonl") if is_video(f) else (".jpg",))}
        found += temporaries(save, names.__contains__)
    if save_txt is not None:
        frame_txt = re.compile(r"(?P<stem>.+)_\d{6,}\.txt")
        video_stems = {f.stem for f in files if is_video(f)}

        def wanted(name: str) -> bool:
            match = frame_txt.fullmatch(name)
            return (name.endswith(".txt") and name[:-4] in stems) or bool(match and match["stem"] in video_stems)

        found += temporaries(save_txt, wanted)
    for path in single:
        if path is not None:
            found += temporaries(path.parent, path.name.__eq__)
    return sorted(set(found))
