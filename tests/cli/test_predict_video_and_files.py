"""`lucid predict` on a video, with --save-txt / --save-json / --batch-size, through the real console script."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tests.cli.tiny_run import write_tiny_run

av = pytest.importorskip("av")

FRAMES = 12
FPS = 10


def write_clip(
    path: Path, frames: int = FRAMES, fps: int = FPS, size: tuple[int, int] = (64, 80)
) -> Path:
    """A short H.264 clip of a bright square moving over a grey field, written with PyAV directly."""
    h, w = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.height, stream.width, stream.pix_fmt = h, w, "yuv420p"
        for i in range(frames):
            image = np.full((h, w, 3), 114, np.uint8)
            image[10:30, 4 * i : 4 * i + 20] = (250, 40, 40)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    base = tmp_path_factory.mktemp("predict_video")
    ckpt, root = write_tiny_run(base)
    return base, ckpt, root


def test_a_video_gives_an_annotated_video_of_as_many_frames_and_a_json_line_per_frame(tiny, lucid):
    base, ckpt, _ = tiny
    clip = write_clip(base / "clip.mov")
    out = base / "video_out"
    r = lucid(
        "predict",
        "--checkpoint",
        str(ckpt),
        "--source",
        str(clip),
        "--conf",
        "0",
        "--device",
        "cpu",
        "--save",
        str(out),
        "--batch-size",
        "5",
    )  # 12 frames: batches of 5, 5 and 2
    assert r.returncode == 0, r.stderr[-3000:]
    with av.open(str(out / "clip.mp4")) as written:
        stream = written.streams.video[0]
        assert stream.average_rate == Fraction(FPS)
        decoded = [f.to_ndarray(format="rgb24") for f in written.decode(stream)]
    assert len(decoded) == FRAMES and decoded[0].shape == (64, 80, 3)
    lines = (out / "clip.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["frame"] for r in rows] == list(range(FRAMES))
    assert [r["time"] for r in rows] == pytest.approx([i / FPS for i in range(FRAMES)])
    # conf 0: every frame has rows
    assert all(r["height"] == 64 and r["width"] == 80 and r["predictions"] for r in rows)
    printed = [line for line in r.stdout.splitlines() if "#frame=" in line]
    assert len(printed) == sum(len(r["predictions"]) for r in rows)
    assert printed[0].startswith(f"{clip}#frame=0: ")
    assert r.stdout.splitlines()[-1].startswith(f"{FRAMES} frames of 1 video, ")
    assert not list(out.glob(".*.tmp"))  # the temporary files were renamed into place


def test_save_txt_rows_parse_back_to_the_predicted_boxes(tiny, lucid):
    from lucidyolo.data.yolo import read_label_file

    base, ckpt, root = tiny
    txt, pred = base / "labels", base / "pred.json"
    r = lucid(
        "predict",
        "--checkpoint",
        str(ckpt),
        "--source",
        str(root / "train"),
        "--conf",
        "0",
        "--device",
        "cpu",
        "--save-txt",
        str(txt),
        "--output",
        str(pred),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    images = json.loads(pred.read_text())["images"]
    assert sorted(p.name for p in txt.iterdir()) == sorted(
        f"{Path(im['image']).stem}.txt" for im in images
    )
    for im in images:
        path = txt / f"{Path(im['image']).stem}.txt"
        rows = [line.split() for line in path.read_text().splitlines()]
        assert len(rows) == len(im["predictions"]) > 0
        conf = np.array([float(r[-1]) for r in rows])
        # the file without its confidence column: a YOLO label file
        labels_only = path.with_suffix(".label")
        labels_only.write_text("".join(" ".join(r[:-1]) + "\n" for r in rows))
        targets = read_label_file(labels_only, (), 4, (im["height"], im["width"]))
        boxes = np.array([p["box"] for p in im["predictions"]])
        np.testing.assert_allclose(targets.boxes, boxes, atol=1e-3)  # 1e-6 of a 64 px side
        np.testing.assert_array_equal(targets.labels, [p["label"] for p in im["predictions"]])
        np.testing.assert_allclose(conf, [p["score"] for p in im["predictions"]])


def test_save_json_is_coco_results_that_pycocotools_loads(tiny, lucid):
    from pycocotools.coco import COCO

    base, ckpt, root = tiny
    coco, pred = base / "results.json", base / "pred_ids.json"
    r = lucid(
        "predict",
        "--checkpoint",
        str(ckpt),
        "--source",
        str(root / "train"),
        "--conf",
        "0",
        "--device",
        "cpu",
        "--save-json",
        str(coco),
        "--output",
        str(pred),
        "--batch-size",
        "2",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"COCO results in {coco}" in r.stdout.splitlines()[-1]
    images = json.loads(pred.read_text())["images"]
    # synthetic files are numbered (000000.jpg ...): the id is the number, as COCO names its images
    assert [im["image_id"] for im in images] == [int(Path(im["image"]).stem) for im in images]
    gt = COCO()
    gt.dataset = {
        "images": [
            {"id": im["image_id"], "height": im["height"], "width": im["width"]} for im in images
        ],
        "annotations": [],
        "categories": [{"id": c, "name": str(c)} for c in range(4)],
    }
    gt.createIndex()
    results = json.loads(coco.read_text())
    loaded = gt.loadRes(results)
    assert len(loaded.getAnnIds()) == len(results) == sum(len(im["predictions"]) for im in images)
    first = images[0]["predictions"][0]
    x1, y1, x2, y2 = first["box"]
    assert results[0]["bbox"] == pytest.approx([x1, y1, x2 - x1, y2 - y1], abs=1e-6)
    assert results[0]["score"] == first["score"] and results[0]["category_id"] == first["label"]


@pytest.mark.parametrize(
    ("make", "args", "match"),
    [
        ("broken", (), "cannot be decoded as a video"),
        ("clip", ("--batch-size", "0"), "--batch-size 0 is below 1"),
        ("no_av", (), "pip install 'lucidyolo\\[video\\]'"),
    ],
)
def test_video_and_batch_errors_exit_2_with_a_fix(tiny, lucid, tmp_path, make, args, match):
    import re

    base, ckpt, _ = tiny
    env = {}
    if make == "broken":
        source = tmp_path / "broken.mp4"
        # an MP4 header, then noise
        source.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 4)
    else:
        source = write_clip(tmp_path / "clip.mp4")
    if make == "no_av":  # a module named av that fails to import, ahead of the installed one
        shadow = tmp_path / "shadow" / "av"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError('no av here')\n")
        env["PYTHONPATH"] = str(shadow.parent)
    r = lucid(
        "predict",
        "--checkpoint",
        str(ckpt),
        "--source",
        str(source),
        "--device",
        "cpu",
        "--save",
        str(tmp_path / "out"),
        *args,
        env=env,
    )
    assert r.returncode == 2, (r.stdout[-2000:], r.stderr[-3000:])
    assert re.search(match, r.stderr) and "fix:" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "clip.mp4").exists()


def test_a_terminal_gets_a_progress_bar_and_a_pipe_only_the_lines(tiny, tmp_path):
    import os
    import pty
    import subprocess

    from tests.conftest import BIN

    base, ckpt, root = tiny
    args = [
        str(BIN / "lucid"),
        "predict",
        "--checkpoint",
        str(ckpt),
        "--source",
        str(root / "train"),
    ]
    args += ["--conf", "0.5", "--device", "cpu", "--batch-size", "2"]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    main, child = pty.openpty()
    with subprocess.Popen(args, stdout=child, stderr=subprocess.PIPE, env=env) as proc:
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-3000:]
    os.close(main)
    shown = b"".join(chunks).decode(errors="replace")
    assert "predict" in shown and "5/5" in shown  # the bar, counting the 5 pictures
    assert "5 images, 0 detections" in shown
    piped = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert piped.returncode == 0
    (line,) = piped.stdout.splitlines()  # no detection reaches 0.5: the summary line alone, no bar
    assert line.startswith("5 images, 0 detections") and "\x1b" not in piped.stdout
