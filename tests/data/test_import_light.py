"""The data layer and `lucid data` never import torch or Lightning."""

from __future__ import annotations

import subprocess
import sys

from .conftest import run_data_cli

MODULES = [
    "lucidyolo.structures.targets", "lucidyolo.structures.geometry", "lucidyolo.data.source",
    "lucidyolo.data.layouts", "lucidyolo.data.coco", "lucidyolo.data.yolo", "lucidyolo.data.dota.reader",
    "lucidyolo.data.synth", "lucidyolo.data.check", "lucidyolo.data.download", "lucidyolo.data.coco_gt",
    "lucidyolo.cli.data", "lucidyolo.data.dota.tiler", "lucidyolo.cli.tile",
]  # fmt: skip


def test_data_modules_import_without_torch():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in MODULES)
        + "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'lightning', 'pytorch_lightning', 'torchvision')]\n"
        + "print(','.join(bad))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_check_command_runs_without_torch(synth):
    root = synth("det", "yolo")
    code = (
        "import sys\nfrom lucidyolo.cli.data import app\n"
        f"try:\n    app(['check', '--data-root', {str(root)!r}, '--json'])\nexcept SystemExit:\n    pass\n"
        "print('TORCH' if any(m.split('.')[0] in ('torch', 'pytorch_lightning') for m in sys.modules) else 'CLEAN')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().endswith("CLEAN"), r.stdout + r.stderr
    assert run_data_cli("check", "--data-root", str(root)).returncode == 0


def test_dota_reader_imports_without_the_tiler():
    """Reading a DOTA split (and `lucid data`'s command table) pulls in neither shapely nor the tiler's modules."""
    code = (
        "import sys\nimport lucidyolo.data.dota.reader, lucidyolo.cli.data\n"
        "print(','.join(m for m in sys.modules if m.split('.')[0] == 'shapely' or m.startswith('lucidyolo.data.dota.')\n"
        "               and m != 'lucidyolo.data.dota.reader'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""
