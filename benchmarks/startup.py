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
- ``*_peak_rss_gb``: the fit process's peak resident memory at its first step (``VmHWM``).

``--reference CMD`` (the reference trainer's console script, optional) times its cold start
(its label cache removed) and its later start on the same set, to its first finished batch,
at the same size, batch and 0 loader workers (``reference`` in the JSON line).

``--no-index`` runs the same steps with ``LUCIDYOLO_LABEL_INDEX=off`` (what
start-up cost before the index). Usage: ``python benchmarks/startup.py [--images
120000] [--root DIR] [--no-index]``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
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


def _peak_rss_gb(pid: int) -> float | None:
    """The peak resident memory of a live process (``VmHWM``), in GB; ``None`` off Linux."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return round(kb / 1e6, 2)


def lucid_stepped(text: str) -> bool:
    return "first training step done" in text


_BAR = re.compile(r"(?:^|\s)1/1\s.*?\s(\d+)/(\d+) [0-9.]+(?:it/s|s/it)")


def reference_stepped(text: str) -> bool:
    """The reference's progress bar of epoch 1 shows a finished batch (``1/1 ... 1/15000 2.1it/s``)."""
    return any((m := _BAR.search(part)) is not None and int(m.group(1)) >= 1 for part in re.split(r"[\r\n]", text))


def first_step(cmd: list[str], env: dict[str, str], cwd: Path, stepped=lucid_stepped) -> tuple[float, float | None]:
    """Run ``cmd`` until its output says a training step is done; stop it (SIGINT), return the seconds and peak GB."""
    t0 = time.perf_counter()
    seen = peak = None
    out = b""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd) as proc:
        assert proc.stdout is not None
        while True:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            out = (out + chunk)[-20000:]
            if stepped(out.decode("utf-8", "replace")):
                seen = time.perf_counter() - t0
                peak = _peak_rss_gb(proc.pid)
                proc.send_signal(signal.SIGINT)
                break
        proc.stdout.read()
        proc.wait()
    if seen is None:
        sys.exit(f"{cmd[0]} never reached its first step:\n" + out.decode("utf-8", "replace")[-3000:])
    return round(seen, 1), peak


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def reference_starts(cmd: str, yaml_path: Path, work: Path, env: dict[str, str]) -> dict[str, object]:
    """The reference trainer's first and later start on the same set: time to its first finished batch, peak GB.

    Its own label cache (the files it adds beside the label folders) is removed before the first start
    and after the second, so the set is left as it was made.
    """
    labels = yaml_path.parent / "labels"
    before = set(labels.iterdir())
    data = work / "reference-data.yaml"  # its yaml with an absolute root
    data.write_text(f"path: {yaml_path.parent}\n" + yaml_path.read_text())
    args = [*shlex.split(cmd), "train", "model=yolo26n.yaml", f"data={data}", "epochs=1", "imgsz=64", "batch=8",
            "workers=0", "device=cpu", "plots=False", f"project={work / 'reference'}", "name=run", "exist_ok=True"]
    home = work / "reference-home"
    home.mkdir(exist_ok=True)
    renv = dict(env, HOME=str(home), YOLO_OFFLINE="1")
    out: dict[str, object] = {"command": " ".join(args)}
    try:
        out["cold_first_step_s"], out["cold_peak_rss_gb"] = first_step(args, renv, work, reference_stepped)
        out["warm_first_step_s"], out["warm_peak_rss_gb"] = first_step(args, renv, work, reference_stepped)
    finally:
        for extra in set(labels.iterdir()) - before:
            extra.unlink() if extra.is_file() else shutil.rmtree(extra, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=120_000)
    ap.add_argument("--val-images", type=int, default=1_000)
    ap.add_argument("--root", type=Path, default=None, help="where the set is made (default: the user cache)")
    ap.add_argument("--no-index", action="store_true", help="run with the label index off")
    ap.add_argument("--reference", default=None, help="the reference trainer's console script: time its starts too")
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
    out["cold_first_step_s"], out["cold_peak_rss_gb"] = first_step(fit, env, work)
    out["warm_first_step_s"], out["warm_peak_rss_gb"] = first_step(fit, env, work)
    edited = args.root / "labels" / "train" / "000" / "0000000.txt"
    original = edited.read_text()
    try:
        edited.write_text(original + "0 0.5 0.5 0.1 0.1\n")
        out["one_label_edited_first_step_s"], _ = first_step(fit, env, work)
    finally:
        edited.write_text(original)
    out["data_check_warm_s"] = timed([_lucid(), "data", "check", "--data-root", str(yaml_path)], env, work)
    if args.reference:
        out["reference"] = reference_starts(args.reference, yaml_path, work, env)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
