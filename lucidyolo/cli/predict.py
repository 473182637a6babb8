"""``lucid predict``: run a checkpoint on images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def predict(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`, or its run folder (best.ckpt, else last.ckpt)."),
    source: str = typer.Option(..., "--source", help="Image, video (needs the `video` extra), folder or (quoted) glob."),
    conf: float = typer.Option(0.25, "--conf", help="Confidence threshold."),
    decoder: str | None = typer.Option(
        None, "--decoder", help="Decode path, one of the task's (default: its first; `lucid plugins` lists them)."
    ),
    save: Path | None = typer.Option(None, "--save", help="Write annotated images (<stem>.jpg), and per video an annotated <stem>.mp4 with per-frame JSON lines <stem>.jsonl, to this folder."),
    output: Path | None = typer.Option(None, "--output", help="Write predictions JSON here."),
    save_txt: Path | None = typer.Option(None, "--save-txt", help="Write YOLO-format labels with a confidence column, <stem>.txt per image (<stem>_<frame>.txt per video frame), to this folder."),
    save_json: Path | None = typer.Option(None, "--save-json", help="Write COCO results (a list for pycocotools' loadRes) to this file."),
    batch_size: int = typer.Option(16, "--batch-size", help="Images (or video frames) per forward pass."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's training size)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
) -> None:
    """Run a checkpoint on an image, a video, a folder or a glob.

    Prints one line per detection (never wrapped, whatever the terminal width, so it can be grepped and cut;
    a video frame is named FILE#frame=N), then one summary line: images, frames, detections and where the
    results were saved. On a terminal a progress bar runs below the lines.
    """
    from lucidyolo.cli.console import console
    from lucidyolo.engine.commands.predict import run_predict

    bar = PredictBar() if console.is_terminal else None
    print_line = bar.print_line if bar is not None else _print_line

    def show(name: str, predictions: list[dict]) -> None:
        for p in predictions:
            print_line(detection_line(name, p))

    def notice(text: str) -> None:  # stderr: stdout holds exactly the detection lines and the summary
        from lucidyolo.cli.console import err_console

        err_console.print(text, markup=False, highlight=False, soft_wrap=True)

    used: list[str] = []  # the decode path the task resolved (--decoder, or its default)
    try:
        results = run_predict(checkpoint, source, conf, decoder, save, output, img_size, device, on_image=show,
                              batch_size=batch_size, save_txt=save_txt, save_json=save_json, on_progress=bar,
                              on_ready=used.append, on_warning=lambda text: notice(f"warning: {text}"),
                              on_note=notice)
    finally:
        if bar is not None:
            bar.close()
    _print_line(summary_line(results, conf, used[0] if used else str(decoder), save, output, save_txt, save_json))


class PredictBar:
    """A rich progress bar of pictures done (with rate and time left) that lines are printed above."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        from lucidyolo.cli.console import console

        class Rate(ProgressColumn):
            def render(self, task: Any) -> Text:
                return Text(f"{task.speed:.1f} img/s" if task.speed else "")

        self._progress = Progress(TextColumn("predict"), BarColumn(), MofNCompleteColumn(), Rate(),
                                  TimeRemainingColumn(), console=console, transient=True)
        self._task: Any = None

    def __call__(self, done: int, total: int | None) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task("predict", total=total)
        self._progress.update(self._task, completed=done, total=total)

    def print_line(self, text: str) -> None:
        """One whole line above the bar (no wrapping, no markup read into it)."""
        self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self._task is not None:
            self._progress.stop()


def _print_line(text: str) -> None:
    """One physical line on stdout: no wrapping at the terminal width, no markup read into the text."""
    typer.echo(text)


def _compact(value: Any) -> str:
    if isinstance(value, dict) and "counts" in value:  # a COCO RLE mask: its size here, its pixels in the JSON
        h, w = value.get("size", ("?", "?"))
        return f"rle:{w}x{h}"
    return json.dumps(value, separators=(",", ":"))


def detection_line(name: str | Path, p: dict[str, Any]) -> str:
    """``IMAGE: NAME SCORE key=value ...``: every field the task returns, lists compact (``box=[x1,y1,x2,y2]``)."""
    label = p.get("name", p.get("label", ""))
    rest = " ".join(f"{k}={_compact(v)}" for k, v in p.items() if k not in ("name", "score", "label"))
    return f"{name}: {label} {float(p.get('score', 0.0)):.3f} {rest}".rstrip()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def summary_line(results: list[dict[str, Any]], conf: float, decoder: str, save: Path | None,
                 output: Path | None, save_txt: Path | None = None, save_json: Path | None = None) -> str:
    """The last line: how many images, video frames and detections, and where they were written (or that nothing was)."""
    frames = sum("frame" in r for r in results)
    videos = len({r["image"] for r in results if "frame" in r})
    images = len(results) - frames
    found = sum(len(r.get("predictions") or []) for r in results)
    counted = [_count(images, "image")] if images or not frames else []
    if frames:
        counted.append(f"{_count(frames, 'frame')} of {_count(videos, 'video')}")
    text = f"{', '.join(counted)}, {_count(found, 'detection')} ({decoder}, conf >= {conf:g})"
    saved = []
    if save is not None:
        drawn = " and ".join(k for k, n in (("images", images), ("videos", frames)) if n)
        saved.append(f"annotated {drawn} in {save}")
    if output is not None:
        saved.append(f"JSON in {output}")
    if save_txt is not None:
        saved.append(f"YOLO labels in {save_txt}")
    if save_json is not None:
        saved.append(f"COCO results in {save_json}")
    text += "; " + (", ".join(saved) if saved else "nothing saved (--save DIR for annotated images, "
                                                        "--output FILE for JSON)")
    if results and not found:
        text += "; nothing reached the threshold (a lower --conf shows weaker detections)"
    return text + "."
