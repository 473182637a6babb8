"""Work over a long list of files, one share per core, in forked processes; results in list order.

A scan of 10^5 files is Python-bound (headers, label rows): one process per
core reads its shares. The work is a closure the forked workers inherit (never
pickled); only its results travel back. Below ``min_items``, on one core,
off Linux (Windows has no ``fork``; on macOS a forked child of a process that
has started system threads may crash), or inside a process that may not have
children (a loader worker), the caller's process does all of it. Torch-free.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from lucidyolo.data.worker_plan import available_cores

T = TypeVar("T")

SHARES_PER_CORE = 4
"""Shares per core: a core that meets a slow region of the disk does not hold the rest up."""

_WORK: Callable[[int, int], Any] | None = None
"""The work of the pool now running (inherited by its forked workers)."""


def _quiet_worker() -> None:
    """A worker leaves stops to its parent: Ctrl-C goes to the whole group, and the pool ends its workers
    with SIGTERM, which the parent's inherited handler would turn into a traceback per worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run(start: int, stop: int) -> Any:
    assert _WORK is not None
    return _WORK(start, stop)


def map_shares(work: Callable[[int, int], T], n: int, min_items: int, cores: int | None = None) -> list[T]:
    """``work(start, stop)`` over consecutive shares of ``range(n)``; the results in share order.

    Args:
        work: reads items ``start..stop-1``; its result must pickle.
        n: the item count.
        min_items: from this many items on, every core takes shares (a pool costs ~0.1 s to start).
        cores: the processes to use (default: the cores this process may run on).
    """
    global _WORK
    cores = available_cores() if cores is None else cores
    if n < min_items or cores < 2 or not sys.platform.startswith("linux"):
        return [work(0, n)]
    step = -(-n // (cores * SHARES_PER_CORE))
    bounds = [(a, min(a + step, n)) for a in range(0, n, step)]
    _WORK = work
    try:
        with multiprocessing.get_context("fork").Pool(cores, initializer=_quiet_worker) as pool:
            return pool.starmap(_run, bounds)
    except (AssertionError, BlockingIOError):  # "daemonic processes are not allowed to have children"; no fork now
        return [work(0, n)]
    finally:
        _WORK = None
