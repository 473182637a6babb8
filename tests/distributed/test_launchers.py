"""2 nodes x 1 process on one CPU machine, launched by torchrun and by plain environment variables
(docs/distributed.md's CPU-scale commands): both train, share rank 0's run folder, and train alike (issue 34, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults import kill_group, tiny_det_root, wait_exit
from tests.gloo_ranks import free_port

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
DOCS = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"
FIT = (
    "fit",
    "det",
    "--trainer.accelerator",
    "cpu",
    "--trainer.num_nodes",
    "2",
    "--trainer.devices",
    "1",
    "--trainer.strategy",
    "ddp",
)
"""What every node runs after the launcher: the documented command's lucid part."""
DATA = (
    "--data.img_size",
    "64",
    "--data.batch_size",
    "2",
    "--trainer.max_epochs",
    "1",
    "--data.num_workers",
    "0",
)


def _documented(*words: str) -> None:
    # shell line continuations joined
    text = " ".join(DOCS.read_text().replace("\\\n", " ").split())
    assert " ".join(words) in text, f"docs/distributed.md lost: {' '.join(words)}"


def _two_nodes(work: Path, launch) -> Path:
    """Start node 1, then node 0 (``launch(node) -> (argv, env)``); their shared ``last.ckpt``."""
    procs = []
    try:
        for node in (1, 0):
            argv, env = launch(node)
            procs.append(
                subprocess.Popen(
                    argv,
                    env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", **env},
                    cwd=work,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
            )
        results = [wait_exit(p, 600) for p in procs]
    finally:
        for p in procs:
            kill_group(p)
    assert [p.returncode for p in procs] == [0, 0], [r[2][-2000:] for r in results]
    assert [f.name for f in (work / "runs").iterdir()] == [
        "version_0"
    ]  # only global rank 0 claimed a folder
    return work / "runs" / "version_0" / "checkpoints" / "last.ckpt"


def test_torchrun_and_environment_variable_launches_of_two_nodes_train_alike(tmp_path):
    import torch

    _documented(
        "torchrun --nnodes 2 --nproc-per-node 1 --node-rank 0 --master-addr 127.0.0.1 --master-port 29500",
        "-m lucidyolo",
        *FIT,
    )
    _documented(
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 NODE_RANK=0 LOCAL_RANK=0 lucid", *FIT
    )
    root = tiny_det_root(tmp_path / "data")
    lucid_args = (*FIT, "--data-root", str(root), *DATA, "--trainer.default_root_dir", "runs")
    (tmp_path / "torchrun").mkdir()
    (tmp_path / "env").mkdir()
    port = str(free_port())
    by_torchrun = _two_nodes(
        tmp_path / "torchrun",
        lambda node: (
            [
                str(BIN / "torchrun"),
                "--nnodes",
                "2",
                "--nproc-per-node",
                "1",
                "--node-rank",
                str(node),
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                port,
                "-m",
                "lucidyolo",
                *lucid_args,
            ],
            {},
        ),
    )
    port = str(free_port())
    by_env = _two_nodes(
        tmp_path / "env",
        lambda node: (
            [str(BIN / "lucid"), *lucid_args],
            {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "WORLD_SIZE": "2",
                "NODE_RANK": str(node),
                "LOCAL_RANK": "0",
            },
        ),
    )
    a, b = (torch.load(p, weights_only=True) for p in (by_torchrun, by_env))
    assert (
        a["global_step"] == b["global_step"] == 2
    )  # 8 images, 2 per process: 2 steps of the global batch 4
    for key, value in a["state_dict"].items():
        assert torch.equal(value, b["state_dict"][key]), key
