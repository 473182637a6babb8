"""The config adapter: device HSV refusal, class-count checks."""

from __future__ import annotations

import pytest

from lucidyolo.config.resolve import resolve_config
from lucidyolo.errors import DataError
from lucidyolo.tasks.registry import get_task
from tests.task_fields import fields_of


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from lucidyolo.data.synth import write_synthetic

    return write_synthetic(tmp_path_factory.mktemp("syn") / "set", fields_of("det"), 6, img_size=64, seed=0)


def test_device_hsv_without_cuda_warns_and_keeps_worker_hsv(synthetic):
    from lucidyolo.data import device_hsv
    from lucidyolo.engine.loop.build import build_datamodule, open_split

    device_hsv._warned.clear()
    spec = get_task("det")
    cfg = resolve_config(spec, [], {"data": {"device_hsv": True, "img_size": 64}})
    train = open_split(spec, cfg, synthetic, "train", "train")
    with pytest.warns(UserWarning, match="device_hsv is ignored"):
        dm = build_datamodule(spec, cfg, train, train, cuda=False)
    assert dm.device_hsv is False


def test_explicit_class_count_must_match_the_dataset(synthetic):
    from lucidyolo.engine.loop.build import open_split, resolve_num_classes

    spec = get_task("det")
    cfg = resolve_config(spec, [], {"model": {"num_classes": 80}})
    train = open_split(spec, cfg, synthetic, "train", "train")
    with pytest.raises(DataError, match="80.*4"):
        resolve_num_classes(cfg, train)
    assert resolve_num_classes(resolve_config(spec), train) == 4


def test_a_root_without_a_val_split_suggests_validating_on_another(synthetic, tmp_path, lucid):
    import shutil

    root = tmp_path / "trainonly"
    shutil.copytree(synthetic, root)
    shutil.rmtree(root / "val")
    for ann in (root / "annotations").glob("*val*.json"):
        ann.unlink()
    r = lucid("fit", "det", "--data-root", str(root), cwd=tmp_path)
    assert r.returncode == 2 and "--data.val_split train" in r.stderr and "Traceback" not in r.stderr
