"""The plugin honours lucidyolo's task contract, its reader refuses bad layouts, and its pieces compute what they say."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from lucidyolo.errors import DataError
from lucidyolo.testing import check_task_spec

from lucidyolo_cls.folders import read_class_folders
from lucidyolo_cls.metric import TopKAccuracy
from lucidyolo_cls.synthetic import CLASSES, write_class_folders
from lucidyolo_cls.task import SPEC, TASK


def test_spec_passes_the_contract_check_and_every_hook_runs(tmp_path):
    done = check_task_spec(TASK)  # calls every hook on a tiny synthetic set
    assert {"read_split", "build_model", "build_criterion", "decode", "build_metric", "predict", "draw",
            "evaluate", "export.deploy", "export.check"} <= set(done)
    assert done["export.check"].startswith("top-1 equal True")
    assert done["build_criterion"] == ["ce"]


def test_reader_gives_every_image_its_folder_class(tmp_path):
    root = write_class_folders(tmp_path / "set", 16, 64, seed=0)
    src = read_class_folders(root, "train")
    assert src.class_names == sorted(CLASSES) and src.num_instances == 0
    labels = src.image_values("image_class")
    for i in range(len(src)):
        assert src.class_names[labels[i]] == src.image_path(i).parent.name
        assert src.targets(i).image_class == labels[i]  # the per-image target reaches the sample
    assert len(read_class_folders(root, "val")) + len(src) == 16


def test_reader_refuses_what_it_cannot_read(tmp_path):
    with pytest.raises(DataError, match="no train/ folder"):
        read_class_folders(tmp_path, "train")
    root = write_class_folders(tmp_path / "set", 8, 32, seed=0)
    (root / "val" / "zebra").mkdir()
    with pytest.raises(DataError, match="zebra"):
        read_class_folders(root, "val")
    with pytest.raises(DataError, match="not found"):
        read_class_folders(root, "test")


def test_top_k_accuracy_on_a_hand_counted_case():
    metric = TopKAccuracy(num_classes=6)
    scores = torch.tensor([
        [0.9, 0.1, 0.0, 0.0, 0.0, 0.0],  # target 0: top-1 hit
        [0.5, 0.4, 0.3, 0.2, 0.1, 0.0],  # target 4: 5th best -> top-5 hit only
        [0.5, 0.4, 0.3, 0.2, 0.1, 0.0],  # target 5: last -> miss
        [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],  # target -1: unknown, ignored
    ])
    metric.update(scores, torch.tensor([0, 4, 5, -1]))
    out = metric.compute()
    assert float(out["top1"]) == pytest.approx(1 / 3) and float(out["top5"]) == pytest.approx(2 / 3)


def test_packed_batch_carries_one_class_per_image(tmp_path):
    from lucidyolo.data.datasets import ValDataset
    from lucidyolo.structures.packed import collate_packed, unpack

    root = write_class_folders(tmp_path / "set", 8, 64, seed=1)
    src = read_class_folders(root, "train")
    ds = ValDataset(src, 64)
    batch = collate_packed([ds[i] for i in range(3)], SPEC.fields)
    _, gt, _ = unpack(batch, "cpu")
    np.testing.assert_array_equal(gt["image_class"].numpy(), src.image_values("image_class")[:3])
