"""Readers' fit-time checks: a source carries its reader's refusals, and `lucid fit` runs whatever it carries."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from lucidyolo.data.dota.reader import read_dota, refuse_untiled_scenes
from lucidyolo.data.layouts import open_source
from lucidyolo.errors import DataError
from tests.task_fields import fields_of


def _dota_split(base: Path, sizes: dict[str, tuple[int, int]]) -> Path:
    """A DOTA split of blank scenes ``{stem: (width, height)}``, one plane in each."""
    split = base / "dota" / "train"
    (split / "images").mkdir(parents=True)
    (split / "labelTxt").mkdir()
    for stem, (w, h) in sizes.items():
        Image.new("RGB", (w, h)).save(split / "images" / f"{stem}.png")
        (split / "labelTxt" / f"{stem}.txt").write_text("10 10 40 10 40 30 10 30 plane 0\n")
    return split


def test_a_source_without_checks_passes(synth):
    src = open_source(synth("det", "coco"), "train", fields_of("det"))
    assert src.fit_checks == ()
    src.run_fit_checks(8)  # images larger than 8 px: no reader rule, nothing refused


def test_dota_source_carries_the_whole_scene_check(tmp_path):
    src = read_dota(_dota_split(tmp_path, {"small": (64, 48)}), ("rboxes",))
    assert src.fit_checks == (refuse_untiled_scenes,)
    assert src.without([0]).fit_checks == src.fit_checks  # --data.skip_bad_images keeps the reader's checks


def test_dota_split_of_tiles_is_trained_on(tmp_path):
    src = read_dota(_dota_split(tmp_path, {"a": (256, 200), "b": (100, 256)}), ("rboxes",))
    src.run_fit_checks(256)  # no side above the training size


def test_dota_split_with_a_scene_larger_than_the_training_size_is_refused(tmp_path):
    split = _dota_split(tmp_path, {"a": (256, 200), "big": (300, 120)})
    src = open_source(split.parent, "train", ("rboxes",))  # the route `lucid fit` takes
    with pytest.raises(DataError) as err:
        src.run_fit_checks(256)
    e = err.value
    assert e.what == (
        f"1 of 2 images in {src.name} are larger than the training size 256 px (the largest, big.png, is 300 x 120): "
        "these are whole DOTA scenes."
    )
    assert "lucid data tile dota --data-root <DOTA root> --out <tiles> --patch 256" in e.fix
