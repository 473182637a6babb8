"""Starting from published YOLO26 files: the task and variant come from the file, classes meet by name, transfer.json
says where each tensor came from, and an 80-class source keeps its class towers whole on a smaller set."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO.parent / "shared" / "reference"
needs_reference = pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"the publisher's reference files ({REFERENCE}) are absent")


@pytest.mark.realdata
@needs_reference
def test_a_published_file_starts_a_run_with_classes_matched_by_name():
    from lucidyolo.engine.weights.transfer import read_weights, transfer_weights
    from lucidyolo.models import create_model

    source = read_weights(REFERENCE / "det" / "yolo26n-det.pt")
    assert (source.task, source.variant, source.class_names) == ("det", "n", ["rectangle", "ellipse", "triangle"])
    assert source.source_format.startswith("published")
    model = create_model("n", num_classes=2)
    report = transfer_weights(model, source, ["triangle", "rectangle"])
    assert report.matched == ["triangle", "rectangle"] and report.dropped == ["ellipse"]
    assert not report.skipped  # every tensor of the target came from the file
    logits = model.head.o2o.stems["logits"].outputs["logits"][0]
    theirs = source.state["head.o2o.stems.logits.outputs.logits.0.bias"]
    assert torch.equal(logits.bias, theirs[[2, 0]])  # rows moved by class name
    saved = json.loads(json.dumps(report.as_json()))
    assert saved["source_format"] == source.source_format
    names = saved["published_names"]
    assert names["head.o2o.stems.boxes.levels.0.0.conv.weight"] == {
        "from": "model.23.one2one_cv2.0.0.conv.weight", "head": "one-to-one"}
    assert names["head.o2m.stems.logits.outputs.logits.2.weight"]["head"] == "one-to-many"
    assert names["backbone.stem.0.conv.weight"] == {"from": "model.0.conv.weight"}


def test_class_towers_keep_the_width_of_a_source_with_more_classes():
    """The published class tower is max(C3, min(classes, 100)) wide: 80 on the nano for COCO, 64 for 4 classes."""
    from lucidyolo.config.resolve import validate_config
    from lucidyolo.engine.loop.fit import class_towers_of
    from lucidyolo.models import create_model
    from lucidyolo.tasks.registry import get_task

    spec = get_task("det")
    cfg = validate_config(spec, {"model": {"task": "det", "variant": "n"}}, trains=False)
    coco = SimpleNamespace(class_names=[f"c{i}" for i in range(80)])
    wide = class_towers_of(cfg, coco, num_classes=4)
    assert wide.model.class_width == 80
    assert class_towers_of(cfg, SimpleNamespace(class_names=["a", "b"]), num_classes=4).model.class_width is None
    tower = create_model("n", num_classes=4, class_width=wide.model.class_width).head.o2m.stems["logits"]
    assert tower.outputs["logits"][0].weight.shape == (4, 80, 1, 1)  # 80 wide, 4 rows
    assert create_model("n", num_classes=4).head.o2m.stems["logits"].outputs["logits"][0].weight.shape == (4, 64, 1, 1)


def test_a_checkpoint_of_the_layout_before_the_published_one_is_refused_with_the_reason(tmp_path, lucid):
    """Checkpoint format 1 (lucid before the published layout) through the console script: exit 2, what and why."""
    from tests.cli.tiny_run import write_tiny_run

    ckpt, root = write_tiny_run(tmp_path)
    old = torch.load(ckpt, weights_only=True)
    old["lucid"]["format"] = 1
    torch.save(old, ckpt)
    r = lucid("eval", "--checkpoint", str(ckpt), "--data-root", str(root))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "before the published YOLO26 layout" in r.stderr and "Traceback" not in r.stderr
