"""``lucid predict``: run a checkpoint on images."""

from __future__ import annotations

from pathlib import Path

import typer


def predict(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Checkpoint written by `lucid fit`."),
    source: str = typer.Option(..., "--source", help="Image, folder or (quoted) glob."),
    conf: float = typer.Option(0.25, "--conf", help="Confidence threshold."),
    decoder: str = typer.Option("e2e", "--decoder", help="e2e (one-to-one top-k) or nms."),
    save: Path | None = typer.Option(None, "--save", help="Write annotated images to this folder."),
    output: Path | None = typer.Option(None, "--output", help="Write predictions JSON here."),
    img_size: int | None = typer.Option(None, "--img-size", help="Input size (default: the run's)."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda, cuda:N or auto."),
) -> None:
    """Run a checkpoint on an image, a folder or a glob; one line per detection."""
    from lucidyolo.cli.console import console
    from lucidyolo.engine.predict import run_predict

    def show(path: Path, predictions: list[dict]) -> None:
        for p in predictions:
            what = " ".join(f"{v}" for k, v in p.items() if k not in ("name", "score", "label"))
            console.print(f"{path}: {p.get('name', '')} {p.get('score', 0.0):.3f} {what}", highlight=False)

    run_predict(checkpoint, source, conf, decoder, save, output, img_size, device, on_image=show)
