"""Start-up at scale: a 120,000-image YOLO set, a cold ``lucid fit``, a warm one and ``lucid data check``; ONE JSON line.

The set is made by this script (``--root``, default a folder in the user cache,
kept between runs): ``--images`` training images (default 120,000) and
``--val-images`` validation images (default 1,000), 64 px JPEGs with 1 to 3
boxes each (about 2 per image). Each JPEG is one of 256 encoded patterns, so
making the set costs file writes, not encodes. The steps, each the real
console script in its own process, as a user would type them:

- ``cold_first_step_s``: ``lucid fit det`` with an empty label index (the index
  folder is removed first): process start to its "first training step done"
  line, when the process is stopped (SIGINT) and waited for;
- ``warm_first_step_s``: the same command again (the index is now written);
- ``one_label_edited_first_step_s``: the same after one label file was edited
  (that file is re-read, the rest comes from the index);
- ``data_check_warm_s``: ``lucid data check ROOT`` with the index written;
- ``*_peak_rss_gb``: each step's peak resident memory (``ru_maxrss`` of the child).

``--no-index`` runs the same steps with ``LUCIDYOLO_LABEL_INDEX=off`` (what
start-up cost before the index). Usage: ``python benchmarks/startup.py [--images
120000] [--root DIR] [--no-index]``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PATTERNS = 256
IMG_PX = 64
PER_FOLDER = 10_000
"""Files per folder: large sets are split into sub-folders, as big datasets are."""


def _patterns() -> list[bytes]:
    from PIL import Image

    rng = np.random.default_rng(0)
    out = []
    for _ in range(PATTERNS):
        a = np.full((IMG_PX, IMG_PX, 3), rng.integers(0, 255, 3), np.uint8)
        x0, y0 = rng.integers(0, IMG_PX // 2, 2)
        a[y0:y0 + 20, x0:x0 + 20] = rng.integers(0, 255, 3)
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def _write_chunk(args: tuple[Path, str, int, int, int]) -> int:
    root, split, start, stop, seed = args
    patterns = _patterns()
    rng = np.random.default_rng(seed + start)
    for i in range(start, stop):
        sub = f"{i // PER_FOLDER:03d}"
        img = root / "images" / split / sub / f"{i:07d}.jpg"
        lbl = root / "labels" / split / sub / f"{i:07d}.txt"
        img.parent.mkdir(parents=True, exist_ok=True)
        lbl.parent.mkdir(parents=True, exist_ok=True)
        img.write_bytes(patterns[int(rng.integers(PATTERNS))])
        n = int(rng.integers(1, 4))
        c = rng.integers(0, 3, n)
        xy = rng.uniform(0.25, 0.75, (n, 2))
        wh = rng.uniform(0.05, 0.4, (n, 2))
        lbl.write_text("".join(f"{c[k]} {xy[k, 0]:.6f} {xy[k, 1]:.6f} {wh[k, 0]:.6f} {wh[k, 1]:.6f}\n" for k in range(n)))
    return stop - start


def make_set(root: Path, images: int, val_images: int) -> Path:
    """Write the set once (a ``.complete`` marker names its size); return its yaml."""
    marker = root / ".complete"
    want = f"{images} {val_images}\n"
    if marker.is_file() and marker.read_text() == want:
        return root / "data.yaml"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    jobs = [(root, "train", s, min(s + 5000, images), 0) for s in range(0, images, 5000)]
    jobs += [(root, "val", s, min(s + 5000, val_images), 1) for s in range(0, val_images, 5000)]
    from lucidyolo.data.core_shares import map_shares

    map_shares(lambda a, b: [_write_chunk(j) for j in jobs[a:b]], len(jobs), min_items=2)
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [a, b, c]\n")
    marker.write_text(want)
    return root / "data.yaml"


def _lucid() -> str:
    return shutil.which("lucid") or str(Path(sys.executable).with_name("lucid"))


def _peak_rss_gb(before: int) -> float:
    # ru_maxrss of the children is the largest child so far (kB on Linux): each step runs after the last
    now = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(now, before) / 1e6, 2)


def first_step(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, float | None]:
    """Run ``cmd`` until its "first training step done" line, then stop it with SIGINT."""
    t0 = time.perf_counter()
    seen = None
    tail: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = [*tail[-30:], line.rstrip()]
            if line.startswith("first training step done"):
                seen = time.perf_counter() - t0
                proc.send_signal(signal.SIGINT)
                break
        proc.stdout.read()
        proc.wait()
    if seen is None:
        sys.exit("lucid fit never reached its first step:\n" + "\n".join(tail))
    return {"s": round(seen, 1)}


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=120_000)
    ap.add_argument("--val-images", type=int, default=1_000)
    ap.add_argument("--root", type=Path, default=None, help="where the set is made (default: the user cache)")
    ap.add_argument("--no-index", action="store_true", help="run with the label index off")
    args = ap.parse_args()
    if args.root is None:
        from lucidyolo.data.user_cache import cache_dir

        args.root = cache_dir() / "benchmarks" / f"startup-{args.images}"
    t0 = time.perf_counter()
    yaml_path = make_set(args.root, args.images, args.val_images)
    made_s = round(time.perf_counter() - t0, 1)
    work = Path(tempfile.mkdtemp(prefix="lucid-startup-"))
    env = dict(os.environ)
    env["LUCIDYOLO_INDEX_DIR"] = str(work / "index")
    if args.no_index:
        env["LUCIDYOLO_LABEL_INDEX"] = "off"
    fit = [_lucid(), "fit", "det", "--data-root", str(yaml_path), "--data.img_size", "64", "--data.batch_size", "8",
           "--trainer.max_epochs", "1", "--trainer.default_root_dir", str(work / "runs")]
    out: dict[str, object] = {"images": args.images, "val_images": args.val_images, "set_made_s": made_s,
                              "label_index": not args.no_index, "cpus": os.cpu_count()}
    rss = 0
    out["cold_first_step_s"] = first_step(fit, env, work)["s"]
    print(json.dumps(out), file=sys.stderr)
    out["cold_peak_rss_gb"] = rss_now = _peak_rss_gb(rss)
    out["warm_first_step_s"] = first_step(fit, env, work)["s"]
    edited = args.root / "labels" / "train" / "000" / "0000000.txt"
    original = edited.read_text()
    try:
        edited.write_text(original + "0 0.5 0.5 0.1 0.1\n")
        out["one_label_edited_first_step_s"] = first_step(fit, env, work)["s"]
    finally:
        edited.write_text(original)
    out["data_check_warm_s"] = timed([_lucid(), "data", "check", "--data-root", str(yaml_path)], env, work)
    out["peak_rss_gb"] = max(rss_now, _peak_rss_gb(rss))
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
