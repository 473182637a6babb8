"""A DDP rank that dies ends the run with one line naming it and the resume command (issue 45, defect 3).

Lightning's subprocess launcher (``--trainer.devices N`` with a ``ddp``
strategy) runs rank 0 in the ``lucid`` process itself and starts ranks
``1..N-1`` as child processes. Its observer thread polls them every 5 s and,
when one has ended with a non-zero code, SIGKILLs the others and the launching
process: the job ended with 137 and no word. Or rank 0 met the dead peer first
in a collective and ended with gloo's ``Connection reset by peer`` traceback.

:class:`RankWatcher` is that launcher with lucid's observer instead of
Lightning's. It polls every :data:`POLL_S`; when a rank has died it SIGKILLs the
other children (ranks blocked in a collective would otherwise wait for the
backend's timeout) and leaves the report to the main thread, whose next
collective fails at once: ``_train`` asks :meth:`RankWatcher.rank_death` and
raises :class:`~lucidyolo.errors.RankDied` (one line, the resume command,
exit ``128 + signal``). A main thread that does not come out within
:data:`GRACE_S` (NCCL waits for its timeout, not for a dead peer) is not
waited for: the watcher prints the same message itself and ends the process
with the same code.

Rank 0 killed by SIGKILL can say nothing (the shell reports 137). The rank it
had launched fails in its next collective (gloo at once; NCCL at its timeout)
and then says in one line that rank 0 is gone, with the resume command,
instead of gloo's traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from pytorch_lightning.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

from lucidyolo.errors import RankDied

POLL_S = 0.1
"""How often the children are polled (a ``waitpid(WNOHANG)`` each: nothing)."""
GRACE_S = 10.0
"""How long the main thread is given to come out of the run by itself once a rank has died."""
SETTLE_S = 1.0
"""How long a failing main thread waits for a child's death to show (the peer's socket closes before the kernel
reports the process ended)."""
LAUNCHER_PID = "LUCIDYOLO_LAUNCHER_PID"
"""Set for the children: the pid of the process that launched them (rank 0 of the node)."""
_DIST_MARKERS = ("gloo", "nccl", "connection reset", "connection closed", "broken pipe", "socket")


class RankWatcher(_SubprocessScriptLauncher):
    """Lightning's subprocess launcher, watched by lucid (see the module)."""

    def __init__(self, base: _SubprocessScriptLauncher, resume_command: Callable[[], str | None]) -> None:
        super().__init__(base.cluster_environment, base.num_processes, base.num_nodes)
        self.resume_command = resume_command
        self.death: tuple[int, int, int] | None = None
        """(global rank, pid, return code) of the first child that ended with a non-zero code."""
        self._lock = threading.Lock()
        self._taken = threading.Event()  # the main thread reports (or has its own error to report)
        self._watcher_reports = False

    def launch(self, function: Callable, *args: Any, trainer: Any = None, **kwargs: Any) -> Any:
        """Lightning's ``launch`` with lucid's observer (:meth:`_watch`) in place of Lightning's."""
        from lightning_fabric.utilities.distributed import _set_num_threads_if_needed

        self.cluster_environment.validate_settings(num_devices=self.num_processes, num_nodes=self.num_nodes)
        if not self.cluster_environment.creates_processes_externally:
            os.environ[LAUNCHER_PID] = str(os.getpid())
            self._call_children_scripts()
            threading.Thread(target=self._watch, daemon=True, name="lucid-rank-watch").start()
        _set_num_threads_if_needed(num_processes=self.num_processes)
        return function(*args, **kwargs)

    def _rank(self, index: int) -> int:
        return self.cluster_environment.node_rank() * self.num_processes + index + 1

    def _first_death(self) -> tuple[int, int, int] | None:
        for i, proc in enumerate(self.procs):
            code = proc.poll()
            if code:
                return self._rank(i), proc.pid, code
        return None

    def _watch(self) -> None:
        while True:
            time.sleep(POLL_S)
            if all(p.poll() == 0 for p in self.procs):  # every rank done (or none launched)
                return
            if (death := self._first_death()) is not None:
                break
        self.death = death
        for proc in self.procs:  # Lightning's observer did the same: a rank blocked in a collective waits for no one
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGKILL)
        if self._taken.wait(GRACE_S):
            return
        with self._lock:
            if self._taken.is_set():
                return
            self._watcher_reports = True
        err = self.error(death)
        _print_plain(err)
        os._exit(err.exit_code)

    def error(self, death: tuple[int, int, int]) -> RankDied:
        """The message of ``death``, with the resume command or the 'start again' advice."""
        rank, pid, code = death
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how, exit_code = f"was killed by {name} (signal {-code})", 128 - code
        else:
            how, exit_code = f"exited with code {code}", code
        command = self.resume_command()
        return RankDied(
            f"Process rank {rank} (pid {pid}) {how}; the other ranks were stopped.",
            fix=(f"Continue from the last finished epoch with `{command}`." if command
                 else "No epoch had finished; start the run again."),
            exit_code=exit_code,
        )

    def rank_death(self, exc: BaseException | None) -> RankDied | None:
        """Called by the main thread when the run failed with ``exc`` (``None``: it was stopped by a signal).

        The rank death that explains it, or ``None`` (the main thread's own error stands). A child killed by a
        signal explains any failure; a child that exited with a code explains a failed collective.
        """
        with self._lock:
            watcher_reports = self._watcher_reports
            self._taken.set()
        if watcher_reports:  # the watcher is printing the message and ending the process
            while True:
                time.sleep(1)
        if exc is None:
            return None
        if not self.procs:
            return self._parent_death(exc)
        end = time.monotonic() + SETTLE_S
        death = self.death or self._first_death()
        while death is None and time.monotonic() < end:
            time.sleep(0.02)
            death = self._first_death()
        if death is None or (death[2] > 0 and not _collective_failed(exc)):
            return None
        return self.error(death)

    def _parent_death(self, exc: BaseException) -> RankDied | None:
        """In a rank this launcher started: rank 0's death when a collective failed because of it."""
        parent = os.environ.get(LAUNCHER_PID, "")
        if not parent.isdigit() or not _collective_failed(exc):
            return None
        end = time.monotonic() + SETTLE_S  # the parent's sockets close before its children are handed on
        while os.getppid() == int(parent) and time.monotonic() < end:
            time.sleep(0.02)
        if os.getppid() == int(parent):
            return None
        rank = int(os.environ.get("NODE_RANK", "0")) * self.num_processes + int(os.environ.get("LOCAL_RANK", "0"))
        command = self.resume_command()
        return RankDied(
            f"Process rank 0 (pid {parent}), which launched rank {rank} (pid {os.getpid()}), is gone; rank {rank} "
            "stopped too.",
            fix=(f"Continue from the last finished epoch with `{command}`." if command
                 else "No epoch had finished; start the run again."),
            exit_code=1,
        )


def watch_ranks(trainer: Any, resume_command: Callable[[], str | None]) -> None:
    """Put :class:`RankWatcher` in place of the trainer's subprocess launcher, if it has one."""
    strategy = trainer.strategy
    launcher = getattr(strategy, "launcher", None)
    if type(launcher) is _SubprocessScriptLauncher:
        strategy._launcher = RankWatcher(launcher, resume_command)


def rank_death(trainer: Any, exc: BaseException | None) -> RankDied | None:
    """:meth:`RankWatcher.rank_death` of the trainer's launcher; ``None`` without one."""
    launcher = getattr(trainer.strategy, "launcher", None)
    return launcher.rank_death(exc) if isinstance(launcher, RankWatcher) else None


def _collective_failed(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) is a collective that failed because a peer went away."""
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__name__.startswith("Dist") or (
            isinstance(seen, RuntimeError) and any(m in str(seen).lower() for m in _DIST_MARKERS)
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _print_plain(err: RankDied) -> None:
    """The CLI's error paragraph, without the CLI (a watcher thread ends the process itself)."""
    text = f"error: {err.what}" + (f"\n  why: {err.why}" if err.why else "") + (f"\n  fix: {err.fix}" if err.fix else "")
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
