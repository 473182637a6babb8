"""The key lists the CLI and the readers use come from the schema's own fields, not from copies of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

from lucidyolo.config.overrides import parse_overrides, top_level_keys
from lucidyolo.config.schema import DataConfig, RunConfig
from lucidyolo.data.layout_names import LAYOUTS
from lucidyolo.data.layouts import read_split
from lucidyolo.errors import ConfigError, DataError


def test_the_top_level_keys_and_sections_are_the_run_configs_fields():
    # the spec's run config: three sections and the seed beside them
    assert RunConfig.section_names() == ("model", "optim", "ema", "augment", "data", "trainer")
    assert RunConfig.top_level_keys() == {"seed"} == top_level_keys()
    assert parse_overrides(["--seed", "3"]) == {"seed": 3}


def test_a_new_top_level_field_is_a_top_level_key_without_another_edit():
    class Extended(RunConfig):
        note: str = ""
        extra: DataConfig = Field(default_factory=DataConfig)

    assert Extended.top_level_keys() == {"seed", "note"}
    assert Extended.section_names() == ("model", "optim", "ema", "augment", "data", "trainer", "extra")


def test_an_undotted_word_that_is_no_top_level_key_is_refused():
    with pytest.raises(ConfigError, match="Unknown argument '--sed'; did you mean `seed`"):
        parse_overrides(["--sed", "3"])


def test_explicit_paths_are_the_marked_fields_of_each_split(tmp_path: Path):
    assert DataConfig.explicit_path_keys("train") == ("train_images", "train_ann_file")
    assert DataConfig.explicit_path_keys("val") == ("val_images", "val_ann_file")
    assert DataConfig.source_keys() == ("data_root", "train_images", "train_ann_file")
    d = DataConfig(val_images=tmp_path, val_ann_file=tmp_path / "a.json")
    assert d.explicit_paths("val") == {"val_images": tmp_path, "val_ann_file": tmp_path / "a.json"}
    assert d.explicit_paths("train") == {}


def test_every_layout_the_readers_know_is_accepted_by_the_schema():
    # data/layouts.py's docstring lists four COCO conventions, then yolo and dota
    assert set(LAYOUTS) == {"coco-2017", "coco-split", "coco-images", "coco-export", "coco", "yolo", "dota"}
    for name in LAYOUTS:
        assert DataConfig(layout=name).layout == name
    with pytest.raises(ValueError, match="coco-export"):
        DataConfig(layout="voc")


def test_the_reader_refuses_an_explicit_key_that_names_no_part(tmp_path: Path):
    with pytest.raises(DataError, match=r"Unknown explicit path keys \['train_imgs'\]"):
        read_split(None, "train", (), explicit_paths={"train_imgs": tmp_path})


def test_data_layout_accepts_the_names_of_the_tasks_own_reader(tmp_path: Path):
    import dataclasses

    from lucidyolo.tasks.registry import get_task

    det = get_task("det")
    own = dataclasses.replace(det, name="det_csv", layouts=("dots-csv",), read_split=lambda **_: None)
    cfg = own.run_config.model_validate({"model": {"task": "det"}, "data": {"layout": "dots-csv"}})
    assert cfg.data.layout == "dots-csv"
    assert own.run_config.model_validate({"model": {"task": "det"}, "data": {"layout": "yolo"}}).data.layout == "yolo"
    with pytest.raises(ValueError, match="dots-csv"):  # a task that does not read it refuses it, naming its own
        det.run_config.model_validate({"model": {"task": "det"}, "data": {"layout": "dots-csv"}})
    from lucidyolo.testing import check_task_spec

    with pytest.raises(Exception, match="read_split"):  # a layout needs the reader that knows it
        check_task_spec(dataclasses.replace(own, read_split=None), run_hooks=False)
