"""``lucid predict``: run a checkpoint on images."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer


def predict(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`, or its run folder (best.ckpt, else last.ckpt)."),
    source: str = typer.Option(..., "--source", help="Image, folder or (quoted) glob."),
    conf: float = typer.Option(0.25, "--conf", help="Confidence threshold."),
    decoder: str = typer.Option("e2e", "--decoder", help="e2e (one-to-one top-k) or nms."),
    save: Path | None = typer.Option(None, "--save", help="Write annotated images to this folder."),
    output: Path | None = typer.Option(None, "--output", help="Write predictions JSON here."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's training size)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
) -> None:
    """Run a checkpoint on an image, a folder or a glob.

    Prints one line per detection (never wrapped, whatever the terminal width, so it can be grepped and cut),
    then one summary line: images, detections and where the results were saved.
    """
    from lucidyolo.engine.predict import run_predict

    def show(path: Path, predictions: list[dict]) -> None:
        for p in predictions:
            _print_line(detection_line(path, p))

    results = run_predict(checkpoint, source, conf, decoder, save, output, img_size, device, on_image=show)
    _print_line(summary_line(results, conf, decoder, save, output))


def _print_line(text: str) -> None:
    """One physical line on stdout: no wrapping at the terminal width, no markup read into the text."""
    typer.echo(text)


def _compact(value: Any) -> str:
    if isinstance(value, dict) and "counts" in value:  # a COCO RLE mask: its size here, its pixels in the JSON
        h, w = value.get("size", ("?", "?"))
        return f"rle:{w}x{h}"
    return json.dumps(value, separators=(",", ":"))


def detection_line(path: Path, p: dict[str, Any]) -> str:
    """``IMAGE: NAME SCORE key=value ...``: every field the task returns, lists compact (``box=[x1,y1,x2,y2]``)."""
    name = p.get("name", p.get("label", ""))
    rest = " ".join(f"{k}={_compact(v)}" for k, v in p.items() if k not in ("name", "score", "label"))
    return f"{path}: {name} {float(p.get('score', 0.0)):.3f} {rest}".rstrip()


def summary_line(results: list[dict[str, Any]], conf: float, decoder: str, save: Path | None,
                 output: Path | None) -> str:
    """The last line: how many images and detections, and where they were written (or that nothing was)."""
    images = len(results)
    found = sum(len(r.get("predictions") or []) for r in results)
    text = (f"{images} image{'s' * (images != 1)}, {found} detection{'s' * (found != 1)} "
            f"({decoder}, conf >= {conf:g})")
    saved = []
    if save is not None:
        saved.append(f"annotated images in {save}")
    if output is not None:
        saved.append(f"JSON in {output}")
    text += "; " + (", ".join(saved) if saved else "nothing saved (--save DIR for annotated images, "
                                                        "--output FILE for JSON)")
    if images and not found:
        text += "; nothing reached the threshold (a lower --conf shows weaker detections)"
    return text + "."
