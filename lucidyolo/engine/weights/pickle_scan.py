"""Read a pickle's opcodes without executing any of them: the globals it names and the strings it holds.

Both the safe checkpoint loader (to name another program's checkpoint) and the publisher-format reader
(to recognise its files) ask this before anything is unpickled.
"""

from __future__ import annotations

import pickle
import pickletools
from dataclasses import dataclass


@dataclass(frozen=True)
class PickleScan:
    """What a pickle references, read from its opcodes alone (nothing is unpickled).

    Attributes:
        globals: ``(module, name)`` of every GLOBAL / STACK_GLOBAL opcode, in stream order.
        strings: every string constant the stream pushes.
        complete: the scan reached STOP; False for a truncated or garbled stream (what was
            seen before the damage is still listed).
    """

    globals: tuple[tuple[str, str], ...]
    strings: frozenset[str]
    complete: bool


_STRING_OPS = frozenset({"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
                         "SHORT_BINUNICODE", "BINUNICODE8"})
_MEMO_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def scan_pickle(data: bytes) -> PickleScan:
    """List the globals and strings of a pickle stream without executing it (:mod:`pickletools`).

    GLOBAL (protocols 0-3) names its class inline. STACK_GLOBAL (protocol 4+) pops the module
    and name strings the two preceding pushes left; a pickler writes a string once and then
    refers to it through the memo (``BINGET`` after ``BINPUT`` / ``MEMOIZE``), so the memo's
    strings are tracked too. Only a pickler's own output is resolved exactly: a crafted
    stream can hide a STACK_GLOBAL's name from this scan (it is then skipped), which is
    why this is a classifier, never a safety check: the unpickler's ``find_class`` decides.
    """

    found: list[tuple[str, str]] = []
    strings: set[str] = set()
    memo: dict[int, str | None] = {}
    recent: list[str | None] = [None, None]  # the last two values pushed, None when not a string
    complete = False
    try:
        for op, arg, _ in pickletools.genops(data):
            name = op.name
            if name in _STRING_OPS:
                text = arg.decode("latin-1") if isinstance(arg, bytes) else str(arg)
                strings.add(text)
                recent = [recent[-1], text]
            elif name in _MEMO_GETS:
                recent = [recent[-1], memo.get(int(arg))]
            elif name in _MEMO_PUTS:
                memo[int(arg)] = recent[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1]
            elif name == "GLOBAL" and isinstance(arg, str):
                module, _, qualname = arg.partition(" ")
                found.append((module, qualname))
                recent = [recent[-1], None]
            elif name == "STACK_GLOBAL":
                module_name, qualname = recent
                if module_name is not None and qualname is not None:
                    found.append((module_name, qualname))
                recent = [None, None]
            elif name == "STOP":
                complete = True
            elif name not in ("FRAME", "PROTO"):
                recent = [recent[-1], None]
    except (ValueError, pickle.UnpicklingError):
        pass
    return PickleScan(globals=tuple(found), strings=frozenset(strings), complete=complete)
