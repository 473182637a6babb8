"""SIGINT and SIGTERM stop a command at once, wherever its main thread is waiting (torch-free).

Lightning's own SIGTERM handler only sets a flag that its loops read after the
current batch, and a flag is never read while the main thread waits on a
loader that will not deliver (issue 15: a run blocked on a failed worker
ignored SIGTERM for 13 minutes). A handler that raises interrupts that wait
(the ``poll`` returns EINTR and Python runs the handler), and the exception
takes the normal exception path: ``finally`` blocks, Lightning's
``on_exception`` hooks and teardown, then the CLI prints one message and exits
``128 + signum``. Every ``lucid`` command runs inside :func:`stop_on_signals`:
without it SIGTERM killed ``eval``/``predict``/``export``/``tile`` with no word,
in the middle of whatever file they were writing.

An exception raised at an arbitrary bytecode can leak a lock: a signal that
lands in ``threading.Condition.__enter__`` right after the lock was taken
raises before the caller's ``with`` owns it, and the next ``with`` on that
lock waits forever (in CI an obb fit stopped by SIGINT hung in TensorBoard's
final flush, ``queue.join`` waiting on the queue lock its own ``put`` had
leaked). A signal that lands in the standard library's lock code
(:data:`LOCK_MODULES`) is therefore sent again after :data:`DEFER_S`; after
:data:`MAX_DEFERRALS` tries (a main thread parked in a ``Condition.wait``) it
raises anyway, so a stop is at most ~1 s late.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lucidyolo.errors import RunInterrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LOCK_MODULES = frozenset(m.__file__ for m in (threading, queue, logging))
"""Files whose code takes a lock in one statement and owns it in a later one: no raise lands there."""
DEFER_S = 0.01
MAX_DEFERRALS = 100


@contextmanager
def stop_on_signals(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block, the first of ``signals`` raises :class:`RunInterrupted` in the main thread.

    Repeats are ignored until the block ends, so a second Ctrl-C cannot break
    the teardown the first one started. Lightning keeps a handler that was
    installed before it (it composes its SIGTERM handler with ours). Outside
    the main thread (where handlers cannot be installed) this does nothing.
    Blocks nest: the inner one restores the outer one's handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired: list[int] = []
    deferred: list[int] = []
    main = threading.main_thread().ident
    done = threading.Event()

    def send_again(signum: int) -> None:
        if not done.is_set():
            signal.pthread_kill(main, signum)

    def handler(signum: int, frame: Any) -> None:
        if fired:
            return
        if frame is not None and frame.f_code.co_filename in LOCK_MODULES and len(deferred) < MAX_DEFERRALS:
            deferred.append(signum)
            timer = threading.Timer(DEFER_S, send_again, (signum,))
            timer.daemon = True
            timer.start()
            return
        fired.append(signum)
        raise RunInterrupted(signum)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        done.set()
        for s, h in previous.items():
            signal.signal(s, h)
