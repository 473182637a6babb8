"""Helpers of the fault matrix: start a command, fault it at the right moment, check how it ended.

A cell passes when the command ends with the expected exit code (130 SIGINT,
143 SIGTERM, 2 for a refused write or a bad input), prints one message on
stderr without a traceback, and loses nothing (checked by the test: inputs
untouched, outputs whole or absent, a run resumable).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.faults import kill_group, start_lucid

CELLS: list[dict[str, Any]] = []
"""Every cell checked in this process: command, fault, exit code, passed."""

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
MESSAGE = {signal.SIGINT: "Stopped by Ctrl-C (SIGINT).", signal.SIGTERM: "Stopped by SIGTERM."}


def record(command: str, fault: str, rc: int | None, passed: bool, note: str = "") -> None:
    CELLS.append({"command": command, "fault": fault, "rc": rc, "passed": bool(passed), "note": note})


def check_ending(command: str, fault: str, rc: int | None, err: str, expected_rc: int, message: str) -> None:
    """Assert (and record) that the command ended with ``expected_rc`` and ``message``, without a traceback."""
    text = " ".join(err.split())
    ok = rc == expected_rc and message in text and "Traceback" not in err
    record(command, fault, rc, ok)
    assert ok, f"{command} / {fault}: rc {rc} (expected {expected_rc}), stderr:\n{err[-3000:]}"


def has_mapped(pid: int, library: str) -> bool:
    """Whether process ``pid`` has ``library`` (a substring of a mapped file) loaded."""
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False


def interrupt(args: tuple[str, ...], sig: signal.Signals, ready: Callable[[subprocess.Popen], bool], cwd: Path,
              timeout: float = 300) -> tuple[int | None, str, str]:
    """Start ``lucid *args``, send ``sig`` once ``ready(proc)``; returns (exit code, stdout, stderr).

    ``ready`` must become true only once the command's own code runs (e.g. torch or Pillow mapped: the
    CLI imports neither before ``main()`` installs its handlers); a command that ends first is a test error.
    """
    # faulthandler: a command that does not stop is made to dump every thread's stack (SIGABRT) for the report
    proc = start_lucid(*args, env={"PYTHONFAULTHANDLER": "1"}, cwd=cwd)
    try:
        end = time.monotonic() + timeout
        while not ready(proc):
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"lucid ended (rc {proc.returncode}) before it could be interrupted:\n{err[-2000:]}")
            if time.monotonic() > end:
                raise AssertionError("timed out waiting to interrupt")
            time.sleep(0.005)
        proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=30)
            raise AssertionError(f"lucid still running 120 s after {sig.name}; its stacks:\n{err[-8000:]}") from None
    finally:
        kill_group(proc)
    return proc.returncode, out, err


def inode(path: Path) -> int | None:
    """The file's inode (an atomic replace gives a new one), ``None`` if absent."""
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
