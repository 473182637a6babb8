"""``reference_style.py``, written as a user of the reference trainer writes a script, runs with only its
import line changed (issue 44 item 1): ``Model(path)``, ``model(bgr_array)``, ``r.boxes.xyxy / .conf / .cls``,
iterating boxes, ``model.names``, ``r.save(filename=...)``, ``stream=True``, ``model.val()`` and
``metrics.box.map``. It runs in a subprocess on an untrained 64 px det checkpoint (nothing trains).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

from lucidyolo.data.synth import SHAPE_CLASSES
from tests.cli.tiny_run import write_tiny_run

SCRIPT = Path(__file__).with_name("reference_style.py")


def test_only_the_import_line_names_lucid():
    lines = [line for line in SCRIPT.read_text().splitlines() if "lucid" in line.lower()]
    assert lines == ["from lucidyolo import Model as YOLO"]


def test_a_reference_style_script_runs(tmp_path):
    ckpt, root = write_tiny_run(tmp_path / "run")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, str(SCRIPT), str(ckpt), str(root / "val")], capture_output=True, text=True,
                       cwd=work, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert out[0] == f"classes: {dict(enumerate(SHAPE_CLASSES))}"
    dets = [line.split() for line in out if line.startswith("det ")]
    assert dets and all(d[1] in SHAPE_CLASSES and 0.0 <= float(d[2]) <= 1.0 for d in dets)
    assert all(0 <= float(v) <= 64 for d in dets for v in d[3:])  # original-image pixels of a 64 px image
    val_images = sorted((root / "val").glob("*.jpg"))
    assert [line.split()[1] for line in out if line.startswith("streamed ")] == [p.name for p in val_images]
    assert Image.open(work / "result.jpg").size == Image.open(val_images[0]).size
    stats = {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in out if line.startswith("mAP")}
    assert set(stats) == {"mAP50-95", "mAP50", "mAP75"} and all(0.0 <= float(v) <= 1.0 for v in stats.values())
    assert f"per class {len(SHAPE_CLASSES)}" in out
