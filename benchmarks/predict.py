"""``lucid predict`` throughput: a folder in batches (1, 4 and 16 images), and a video's frames per second.

Both are the engine's own ``run_predict`` end to end (read or decode, letterbox,
forward, decode, the task's result dicts; with ``--save`` drawing and writing the
annotated video and its JSON lines), on a one-epoch det checkpoint
(``benchmarks/_checkpoint.py``: latency depends on the graph, not on what the
weights learned). The batch sizes run alternately, ``--repeats`` times each, and
the best run of each is kept, so the ratios are fair on a shared machine.

The video is written here with PyAV from the folder's images (letterboxed onto
``--video-size`` frames), ``--video-frames`` frames at 30 fps, then predicted at
the default size with ``--save`` (annotated MP4 + JSON lines), as a user runs it.

Prints ONE JSON line. Usage:
python benchmarks/predict.py [--folder ../shared/data/coco128_coco/train2017] [--images 64] [--size 640]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

# `benchmarks._checkpoint` when run as a script
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_FOLDER = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "coco128_coco" / "train2017"
)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def write_video(path: Path, files: list[Path], frames: int, size: tuple[int, int]) -> None:
    """``frames`` frames of ``size = (h, w)`` cycling through ``files`` (each fitted inside the frame), 30 fps."""
    from PIL import Image

    from lucidyolo.data.augment.letterbox import letterbox_params
    from lucidyolo.predict.video import VideoWriter

    h, w = size
    with open(path, "wb") as out:
        writer = VideoWriter(out, Fraction(30), h, w)
        for i in range(frames):
            im = Image.open(files[i % len(files)]).convert("RGB")
            p = letterbox_params(im.height, im.width, max(h, w))
            canvas = Image.new("RGB", (w, h), (114, 114, 114))
            canvas.paste(
                im.resize((max(1, round(im.width * p.scale)), max(1, round(im.height * p.scale)))),
                (0, 0),
            )
            writer.write(np.asarray(canvas))
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER, help="a folder of JPEGs")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument(
        "--size", type=int, default=640, help="network input size (the default one)"
    )
    parser.add_argument("--variant", default="n")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--batches", type=int, nargs="+", default=(1, 4, 16), help="batch sizes to compare"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's choice)"
    )
    parser.add_argument("--video-frames", type=int, default=48)
    parser.add_argument("--video-size", type=int, nargs=2, default=(480, 640), metavar=("H", "W"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from benchmarks._checkpoint import det_checkpoint
    from lucidyolo.engine.commands.predict import run_predict

    files = sorted(p for p in args.folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg"))[
        : args.images
    ]
    result: dict = {
        "benchmark": "predict",
        "variant": args.variant,
        "device": args.device,
        "threads": torch.get_num_threads(),
        "images": len(files),
        "img_size": args.size,
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ckpt = det_checkpoint(work, args.variant)
        listing = work / "images"
        listing.mkdir()
        for f in files:
            (listing / f.name).symlink_to(f.resolve())

        def folder(batch: int) -> None:
            run_predict(
                ckpt, str(listing), img_size=args.size, device=args.device, batch_size=batch
            )

        # warm-up: allocator, kernels
        run_predict(ckpt, str(files[0]), img_size=args.size, device=args.device)
        best = dict.fromkeys(args.batches, float("inf"))
        for _ in range(args.repeats):
            for batch in best:  # alternating: drift on a shared machine hits every batch size
                best[batch] = min(best[batch], _timed(lambda b=batch: folder(b)))
        for batch, seconds in best.items():
            result[f"folder_b{batch}_img_per_s"] = round(len(files) / seconds, 2)
            if batch != 1 and 1 in best:
                result[f"folder_b{batch}_over_b1"] = round(best[1] / seconds, 3)

        video = work / "clip.mp4"
        write_video(video, files, args.video_frames, tuple(args.video_size))
        out = work / "annotated"
        seconds = _timed(
            lambda: run_predict(ckpt, str(video), img_size=args.size, device=args.device, save=out)
        )
        frames = sum(1 for _ in (out / "clip.jsonl").open())
        result.update(
            video_frames=frames,
            video_hw=list(args.video_size),
            video_fps_with_save=round(frames / seconds, 2),
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
