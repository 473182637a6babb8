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
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lucidyolo.errors import RunInterrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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

    def handler(signum: int, frame: Any) -> None:
        if fired:
            return
        fired.append(signum)
        raise RunInterrupted(signum)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
