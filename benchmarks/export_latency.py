"""Latency of the exported deployed graph: OpenVINO against onnxruntime, TorchScript and eager PyTorch.

For each task and size: the task's deployed graph (BN folded, top-k, no NMS) of a seeded
untrained nano, exported as ``lucid export`` writes it (ONNX, TorchScript, OpenVINO IR), then
batch-1 forwards on the CPU with ``--threads`` threads in every runtime. The runtimes take turns
in blocks (``--rounds`` rounds; in each, every runtime runs ``--warmup`` untimed then
``--repeats / --rounds`` timed forwards in a row), so on a shared machine each sees the same load
drift, and no forward is timed right after another runtime's call (onnxruntime's and OpenVINO's
threads may still spin then). The figure is the median per runtime, with the spread (25th-75th
percentile) beside it. OpenVINO runs twice: float32 (``INFERENCE_PRECISION_HINT f32``,
what ``--check`` verifies) and at the CPU plugin's default precision (bfloat16 on CPUs with bf16
instructions: a different model numerically, reported for what a deployment gets by default).

The model is untrained: latency does not depend on the weights' values (no data-dependent
branch; top-k over every anchor). Prints ONE JSON line.

Usage: python benchmarks/export_latency.py [--tasks det,seg,obb,keypoints] [--sizes 320,640] [--repeats 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _quantiles(ms: list[float]) -> dict[str, float]:
    q = statistics.quantiles(ms, n=4)
    return {"median_ms": round(statistics.median(ms), 2), "p25_ms": round(q[0], 2), "p75_ms": round(q[2], 2)}


def _runners(task: str, size: int, threads: int, work: Path) -> dict:
    """One callable per runtime, each running the same batch-1 input through its copy of the graph."""
    import onnxruntime as ort
    import openvino as ov

    from lucidyolo.export.onnx import export_onnx
    from lucidyolo.export.openvino_ir import export_openvino
    from lucidyolo.export.torchscript import export_torchscript
    from lucidyolo.tasks.registry import get_task

    spec = get_task(task)
    torch.manual_seed(0)
    cfg = spec.config_model.model_validate({"task": spec.name})
    model = spec.build_model(cfg=cfg, num_classes=80, meta=dict(spec.reference_meta or {}))
    deployed = spec.export.deploy(model=model.eval()).eval()
    names = spec.export.outputs
    onnx_path = export_onnx(deployed, work / f"{task}{size}.onnx", img_size=size, output_names=names)
    ts_path = export_torchscript(deployed, work / f"{task}{size}.torchscript", img_size=size, output_names=names)
    ov_path = export_openvino(deployed, work / f"{task}{size}.xml", img_size=size, output_names=names)

    x = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    x_np = x.numpy()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    core = ov.Core()
    base = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    ov_f32 = core.compile_model(str(ov_path), "CPU", {**base, "INFERENCE_PRECISION_HINT": "f32"})
    ov_default = core.compile_model(str(ov_path), "CPU", base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scripted = torch.jit.load(str(ts_path)).eval()
    req_f32, req_default = ov_f32.create_infer_request(), ov_default.create_infer_request()

    def eager() -> None:
        with torch.inference_mode():
            deployed(x)

    def torchscript() -> None:
        with torch.inference_mode():
            scripted(x)

    return {
        "eager_torch": eager,
        "torchscript": torchscript,
        "onnxruntime": lambda: session.run(None, {"images": x_np}),
        "openvino_f32": lambda: req_f32.infer([x_np]),
        "openvino_default": lambda: req_default.infer([x_np]),
        "_openvino_default_precision": ov_default.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="det,seg,obb,keypoints")
    parser.add_argument("--sizes", default="320,640")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3, help="untimed forwards before each block")
    parser.add_argument("--repeats", type=int, default=30, help="timed forwards per runtime, all rounds together")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import onnxruntime
    import openvino

    from lucidyolo.engine.loop.fit import quiet_known_warnings

    quiet_known_warnings()
    torch.set_num_threads(args.threads)
    results: dict[str, dict] = {}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lucid-export-latency-") as tmp:
        for task in args.tasks.split(","):
            for size in (int(s) for s in args.sizes.split(",")):
                runners = _runners(task, size, args.threads, Path(tmp))
                precision = runners.pop("_openvino_default_precision")
                times: dict[str, list[float]] = {name: [] for name in runners}
                per_block = max(1, args.repeats // args.rounds)
                for _ in range(args.rounds):
                    for name, run in runners.items():  # blocks in turn: every runtime sees the same drift
                        for i in range(args.warmup + per_block):
                            t0 = time.perf_counter()
                            run()
                            if i >= args.warmup:
                                times[name].append((time.perf_counter() - t0) * 1e3)
                row = {name: _quantiles(ms) for name, ms in times.items()}
                eager = row["eager_torch"]["median_ms"]
                row["speedup_vs_eager"] = {n: round(eager / row[n]["median_ms"], 2) for n in times if n != "eager_torch"}
                row["openvino_default_precision"] = precision
                results[f"{task}_{size}"] = row
    print(json.dumps({
        "batch": 1, "variant": "n", "threads": args.threads, "warmup": args.warmup, "repeats": args.repeats, "rounds": args.rounds,
        "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "openvino": openvino.__version__,
        "cpu": _cpu_name(), "cores": os.cpu_count(), "load_average_before": round(load_before, 2),
        "load_average_after": round(os.getloadavg()[0], 2), "results": results,
    }))


if __name__ == "__main__":
    main()
