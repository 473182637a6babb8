"""Two `lucid data tile dota` runs on one --out: each stages in its own folder; no traceback, no half split."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lucidyolo.data.dota.staging import _host
from lucidyolo.data.dota.tiler import tile_dota
from lucidyolo.data.layouts import open_source
from lucidyolo.errors import DataError
from tests.conftest import BIN, real_data_root
from tests.data.test_tiling import _files, make_root
from tests.task_fields import fields_of


def _no_staging_left(out) -> None:
    assert not [p.name for p in out.iterdir() if ".partial" in p.name]


@pytest.mark.realdata
def test_two_runs_started_together_both_finish_with_one_complete_split(tmp_path):
    root, out = real_data_root() / "dota_v1_examples", tmp_path / "out"
    args = [str(BIN / "lucid"), "data", "tile", "dota", "--data-root", str(root), "--out", str(out), "--splits", "train",
            "--patch", "512", "--overlap", "0", "--json"]  # fmt: skip
    env = dict(os.environ, COLUMNS="200")
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    results = [(p.returncode, o, e) for p, (o, e) in zip(procs, outputs, strict=True)]
    for code, _, stderr in results:
        assert "Traceback" not in stderr, stderr
        # 0, or 2 for a run that started after the other had already finished (it never overwrites a split)
        assert code == 0 or (code == 2 and "already exists" in stderr), stderr
    assert any(code == 0 for code, _, _ in results)
    _no_staging_left(out)
    doc = json.loads((out / "annotations" / "instances_train.json").read_text())
    assert sorted(p.name for p in (out / "train").iterdir()) == sorted(im["file_name"] for im in doc["images"])
    src = open_source(out, "train", fields_of("obb"))
    assert len(src) == json.loads(next(s for c, s, _ in results if c == 0))["tiles"] == len(doc["images"])
    # the same bytes as one run alone
    alone = tmp_path / "alone"
    tile_dota(root, alone, ["train"], patch=512, overlap=0)
    assert _files(out) == _files(alone)


def test_a_run_finishing_second_keeps_identical_output(tmp_path):
    root, out = make_root(tmp_path), tmp_path / "out"

    def other_run_finishes_first(_n):
        tile_dota(root, out, ["train"], patch=160, overlap=20)

    s = tile_dota(root, out, ["train"], patch=160, overlap=20, on_start=other_run_finishes_first)
    assert s.splits[0].kept_identical and s.splits[0].images_dir == str(out / "train")
    _no_staging_left(out)
    tile_dota(root, tmp_path / "alone", ["train"], patch=160, overlap=20)
    assert _files(out) == _files(tmp_path / "alone")


def test_a_run_finishing_second_with_other_tiles_exits_2_and_keeps_the_first(tmp_path):
    root, out = make_root(tmp_path), tmp_path / "out"

    def other_run_finishes_first(_n):
        tile_dota(root, out, ["train"], patch=100, overlap=10)

    with pytest.raises(DataError, match="written by another `lucid data tile` run") as e:
        tile_dota(root, out, ["train"], patch=160, overlap=20, on_start=other_run_finishes_first)
    assert str(out) in e.value.what
    _no_staging_left(out)
    tile_dota(root, tmp_path / "first", ["train"], patch=100, overlap=10)
    assert _files(out) == _files(tmp_path / "first")


def test_staging_of_a_killed_run_is_removed_and_a_live_one_kept(tmp_path):
    root, out = make_root(tmp_path), tmp_path / "out"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = out / f".train.partial-{_host()}-{int(gone.stdout)}-abc123"
    live = out / f".train.partial-{_host()}-{os.getpid()}-def456"
    elsewhere = out / ".train.partial-another_host-1-ghi789"
    for d in (dead, live, elsewhere, out / ".train.partial"):
        d.mkdir(parents=True)
        (d / "A__0_0.png").write_bytes(b"half a tile")
    tile_dota(root, out, ["train"], patch=160, overlap=20)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == sorted([live.name, elsewhere.name])
    assert json.loads((out / "annotations" / "instances_train.json").read_text())["images"]
