"""Run a function on several CPU ranks of one gloo process group (metric synchronisation tests)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, port: int, out_dir: str, body: Callable[[int], dict[str, Any]]) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = body(rank)
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        dist.destroy_process_group()


def run_ranks(body: Callable[[int], dict[str, Any]], world: int, out_dir: Path) -> list[dict[str, Any]]:
    """``body(rank)`` on ``world`` forked ranks; returns each rank's JSON-able result in rank order.

    fork: the children inherit the imports (spawn re-imports torch + pycocotools: ~15 s here)
    and ``body`` may be a closure.
    """
    import torch.multiprocessing as mp

    mp.start_processes(_rank_main, args=(world, free_port(), str(out_dir), body), nprocs=world, join=True,
                       start_method="fork")
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world)]
