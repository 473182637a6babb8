"""A stop signal never leaks a lock or a temporary file, wherever it lands (in-process, ~1.5 s).

CI saw both: an obb fit stopped by SIGINT hung in TensorBoard's final flush
(the queue lock leaked by a raise inside ``Condition.__enter__``), and a video
predict stopped by SIGINT left ``.clip.jsonl.<random>.tmp`` (a raise between
``mkstemp`` creating the file and returning its name).
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from lucidyolo import atomic_write
from lucidyolo.errors import RunInterrupted
from lucidyolo.signals import DEFER_S, MAX_DEFERRALS, stop_on_signals


def test_a_stop_landing_in_lock_code_is_raised_just_after_it():
    cond = threading.Condition()
    returned: list[str] = []

    def predicate() -> bool:  # Condition.wait_for calls it from a frame of threading.py, lock held
        lock_frame = sys._getframe(1)
        signal.getsignal(signal.SIGINT)(signal.SIGINT, lock_frame)  # the handler, as if the signal landed there
        returned.append(lock_frame.f_code.co_filename)
        return True

    start = time.monotonic()
    with pytest.raises(RunInterrupted) as stop, stop_on_signals():
        with cond:
            cond.wait_for(predicate)
        time.sleep(10)  # the signal is sent again and raised here, outside the lock code
    assert returned == [threading.__file__]  # the handler returned inside threading.py
    assert stop.value.signum == signal.SIGINT and time.monotonic() - start < 5
    assert cond.acquire(timeout=1)  # the lock was not leaked


def test_a_stop_landing_in_our_code_raises_at_once():
    with pytest.raises(RunInterrupted), stop_on_signals():
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, sys._getframe(0))
        pytest.fail("the handler returned")


def test_a_main_thread_parked_in_a_condition_wait_is_still_stopped():
    cond = threading.Condition()
    threading.Timer(0.1, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
    start = time.monotonic()
    with pytest.raises(RunInterrupted), stop_on_signals(), cond:
        cond.wait(timeout=30)  # lands in threading.py every time: deferred up to MAX_DEFERRALS, then raised
    waited = time.monotonic() - start
    assert 0.1 + MAX_DEFERRALS * DEFER_S * 0.9 < waited < 10, waited
    assert cond.acquire(timeout=1)


def test_a_stop_right_after_the_temporary_file_is_created_leaves_nothing(tmp_path, monkeypatch):
    real_open = atomic_write.os.open

    def open_then_stop(path, *args, **kwargs):  # the file exists, its descriptor never reaches atomic_open
        fd = real_open(path, *args, **kwargs)
        if str(path).startswith(str(tmp_path)):
            raise RunInterrupted(signal.SIGINT)
        return fd

    monkeypatch.setattr(atomic_write.os, "open", open_then_stop)
    with pytest.raises(RunInterrupted), atomic_write.atomic_open(tmp_path / "clip.jsonl", "w") as f:
        f.write("never")
    assert list(tmp_path.iterdir()) == []
