"""ONNX export of the deployed nano graph: TopK and no NMS node; onnxruntime matches PyTorch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from lucidyolo.errors import ConfigError
from lucidyolo.models import create_model
from lucidyolo.models.deploy import make_deploy_model

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install lucidyolo[onnx])")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install lucidyolo[onnx])")

from lucidyolo.export.onnx import export_onnx, onnx_parity  # noqa: E402


def _calibrated_nano(images: torch.Tensor) -> nn.Module:
    """Seeded nano whose BatchNorm statistics come from ``images``, so eval outputs are not degenerate."""
    torch.manual_seed(0)
    model = create_model("n", num_classes=80)
    for bn in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
        bn.reset_running_stats()
        bn.momentum = None
    with torch.no_grad():
        model.train()(images)
    return model.eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, Path, torch.Tensor]:
    images = torch.rand(2, 3, 320, 320, generator=torch.Generator().manual_seed(7))
    deployed = make_deploy_model(_calibrated_nano(images))
    path = export_onnx(deployed, tmp_path_factory.mktemp("onnx") / "yolo26n.onnx", img_size=320, dynamic_batch=True)
    return deployed, path, images


def test_graph_has_topk_and_no_nms(exported) -> None:
    _, path, _ = exported
    graph = onnx.load(str(path)).graph
    ops = {node.op_type for node in graph.node}
    assert "TopK" in ops
    assert "NonMaxSuppression" not in ops
    assert [i.name for i in graph.input] == ["images"]
    assert [o.name for o in graph.output] == ["detections"]


def test_onnxruntime_matches_pytorch(exported) -> None:
    deployed, path, images = exported
    report = onnx_parity(deployed, path, images, min_score=0.02)
    assert report["rows"] >= 100  # rows with non-trivial score were compared
    assert report["matched"] == report["rows"]
    assert report["classes_equal"]
    assert report["max_box_diff_norm"] <= 1e-4
    assert report["max_score_diff"] <= 1e-4


def test_onnx_output_has_fixed_rows_and_dynamic_batch(exported) -> None:
    import onnxruntime as ort

    _, path, _ = exported
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, {"images": torch.rand(3, 3, 320, 320).numpy()})[0]
    assert out.shape == (3, 300, 6)


def test_export_rejects_size_not_multiple_of_32(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        export_onnx(create_model("n"), tmp_path / "bad.onnx", img_size=300)
