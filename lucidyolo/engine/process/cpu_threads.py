"""How many torch intra-op threads a training process runs: ``trainer.threads``.

``auto`` takes the cores that other processes leave idle when the run starts,
shared among this host's training processes. The reason is measured
(docs/DECISIONS.md, "CPU threads on a shared machine"): on 2 cores with one other
CPU-bound process running, two torch threads trained the shapes benchmark at
4.5 img/s and one thread at 10.1 img/s, while on an idle machine two threads
give 16.4 against 10.2. OpenMP's threads meet at a barrier after every
parallel region, so one thread that the scheduler parks behind the other
process stalls all of them; a thread count that fits the idle cores has no one
to wait for. Passive waiting (``OMP_WAIT_POLICY=passive``) helps less (7.9 img/s)
and halves the speed of an idle machine.

The count is decided once, before training, and the resolved number is what the
run's ``config.yaml`` and checkpoints record, so a resumed run keeps it (float
rounding differs with the thread count). ``OMP_NUM_THREADS`` set by the user or
a launcher (torchrun sets 1) is taken as the answer to ``auto``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from lucidyolo.config.schema import RunConfig
from lucidyolo.data.worker_plan import (
    available_cores as usable_cores,  # the CPUs this process may run on
)

CHILD_ENV = "LUCID_TORCH_THREADS"
"""Set by the process that resolved ``auto``: the training processes it launches (Lightning's DDP launcher
copies the environment) take the same count instead of measuring a machine that their parent now loads."""

SAMPLE_SECONDS = 0.25
"""How long the CPU counters are watched: long enough to see a busy core as busy (the kernel ticks at
100-1000 Hz), short against a run's start-up."""


def busy_cores(stat: Path = Path("/proc/stat"), seconds: float = SAMPLE_SECONDS) -> float | None:
    """Cores kept busy by every process of the machine over ``seconds``, from the kernel's CPU counters.

    Reads the aggregate ``cpu`` line of ``/proc/stat`` twice: busy = (1 - idle share) x CPUs. ``None``
    where there is no such file (not Linux); :func:`resolve_threads` then falls back to the load average.
    """
    def read() -> tuple[int, int, int] | None:
        try:
            lines = stat.read_text().splitlines()
        except OSError:
            return None
        fields = [int(v) for v in lines[0].split()[1:]]
        cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit())
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle, max(cpus, 1)  # guest time is already inside user time

    global _last_sample
    own = stat == Path("/proc/stat") and seconds == SAMPLE_SECONDS
    if own and _last_sample is not None and time.monotonic() - _last_sample[0] < REUSE_SECONDS:
        return _last_sample[1]
    first = read()
    if first is None:
        return None
    time.sleep(seconds)
    second = read()
    if second is None:
        return None
    total, idle = second[0] - first[0], second[1] - first[1]
    busy = 0.0 if total <= 0 else max(0.0, 1.0 - idle / total) * second[2]
    if own:
        _last_sample = (time.monotonic(), busy)
    return busy


REUSE_SECONDS = 10.0
"""A sample this recent answers the next question too: the threads choice and the ``machine:`` line of one start
ask within a second or two, and each sample costs :data:`SAMPLE_SECONDS` of that start."""

_last_sample: tuple[float, float] | None = None


def auto_threads(local_processes: int, busy: float | None = None, cores: int | None = None) -> int:
    """``auto``'s answer: the idle cores (rounded to the nearest whole core) shared among ``local_processes``, at least 1.

    Args:
        local_processes: training processes on this host.
        busy: cores busy with other processes (default: measured, or the 1-minute load average off Linux).
        cores: usable cores (default: :func:`usable_cores`).
    """
    cores = usable_cores() if cores is None else cores
    if busy is None:
        busy = busy_cores()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except (AttributeError, OSError):  # Windows
            busy = 0.0
    idle = max(1, round(cores - min(busy, cores)))
    return max(1, idle // max(1, local_processes))


def resolve_threads(cfg: RunConfig, local_processes: int) -> tuple[RunConfig, str | None]:
    """The config with ``trainer.threads: auto`` resolved, and a line to show when ``auto`` chose fewer than the cores.

    Order: an explicit number; the count a parent lucid process resolved (:data:`CHILD_ENV`);
    ``OMP_NUM_THREADS``; the idle cores now (:func:`auto_threads`).
    """
    if cfg.trainer.threads != "auto":
        return cfg, None
    note = None
    inherited = os.environ.get(CHILD_ENV) or os.environ.get("OMP_NUM_THREADS")
    if inherited and inherited.strip().isdigit() and int(inherited) > 0:
        threads = int(inherited)
    else:
        cores = usable_cores()
        busy = busy_cores()
        threads = auto_threads(local_processes, busy, cores)
        if threads * local_processes < cores:
            seen = "" if busy is None else f"{busy:.1f} of {cores} cores busy with other work at the start; "
            note = (f"torch threads: {threads} per process ({seen}a thread that has to share a core stalls the "
                    "others at every step; `--trainer.threads N` chooses)")
    return cfg.model_copy(update={"trainer": cfg.trainer.model_copy(update={"threads": threads})}), note


def apply_threads(threads: int, launches: bool = False) -> None:
    """Run this process's torch ops on ``threads`` threads; ``launches``: hand the count to the training
    processes it starts (only then: a Python session that trains again later measures again)."""
    import torch

    torch.set_num_threads(threads)
    if launches:
        os.environ[CHILD_ENV] = str(threads)
