"""On a terminal, each finished epoch leaves one line above a live bar of the current epoch (issue 44, item 2).

The fit runs under a pseudo-terminal of 80 columns; what it writes is replayed on a small terminal model
(carriage returns, cursor moves, line clears), so the test reads what a user would see once the run ends.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

import pytest

COLUMNS = 80

_ESCAPE = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def screen(text: str, width: int = COLUMNS) -> list[str]:
    """Every row a terminal of ``width`` columns shows (scrollback included) after receiving ``text``.

    Models what rich's live display and ``print`` use: printable characters with auto-wrap at the last
    column, ``\\r``, ``\\n`` (as CR LF), backspace, cursor up/down/left/right/column (CSI A/B/C/D/G), erase in line
    (CSI K) and in display (CSI J, below the cursor); colours and modes (CSI m, ``?25l``) are ignored.
    """
    rows: list[list[str]] = [[]]
    row = col = 0
    pending_wrap = False

    def put(ch: str) -> None:
        nonlocal row, col, pending_wrap
        if pending_wrap:
            row, col, pending_wrap = row + 1, 0, False
            while len(rows) <= row:
                rows.append([])
        line = rows[row]
        line.extend(" " * (col - len(line) + 1) if len(line) <= col else "")
        line[col] = ch
        if col == width - 1:
            pending_wrap = True
        else:
            col += 1

    i = 0
    while i < len(text):
        m = _ESCAPE.match(text, i)
        if m:
            i = m.end()
            args, cmd = m.group(1), m.group(2)
            if cmd is None or (args or "").startswith("?"):
                continue
            n = int(args.split(";")[0]) if args and args.split(";")[0].isdigit() else None
            pending_wrap = False
            if cmd == "A":
                row = max(row - (n or 1), 0)
            elif cmd == "B":
                row += n or 1
                while len(rows) <= row:
                    rows.append([])
            elif cmd == "C":
                col = min(col + (n or 1), width - 1)
            elif cmd == "D":
                col = max(col - (n or 1), 0)
            elif cmd == "G":
                col = min(max((n or 1) - 1, 0), width - 1)
            elif cmd == "K":
                if (n or 0) == 0:
                    del rows[row][col:]
                elif n == 1:
                    rows[row][: col + 1] = [" "] * min(col + 1, len(rows[row]))
                else:
                    rows[row] = []
            elif cmd == "J" and (n or 0) == 0:
                del rows[row][col:]
                del rows[row + 1:]
            continue
        ch = text[i]
        i += 1
        if ch == "\r":
            col, pending_wrap = 0, False
        elif ch == "\n":  # a terminal's output translation (onlcr) makes it CR LF
            row, col, pending_wrap = row + 1, 0, False
            while len(rows) <= row:
                rows.append([])
        elif ch == "\b":
            col, pending_wrap = max(col - 1, 0), False
        elif ch >= " ":
            put(ch)
    return ["".join(r).rstrip() for r in rows]


def test_the_terminal_model_replays_overwrites_and_clears():
    assert screen("bar 1\rbar 22\r\x1b[2Kline\nnext") == ["line", "next"]
    assert screen("a\nbar\x1b[1A\r\x1b[2Kb\n") == ["b", "bar"]
    assert screen("x" * 85, width=80) == ["x" * 80, "x" * 5]
    assert screen("\x1b[1mbold\x1b[0m \x1b[?25lhidden\x1b[?25h") == ["bold hidden"]


def run_in_terminal(args: list[str], env: dict[str, str], timeout: float = 600) -> tuple[int, str, str]:
    """Run ``args`` with stdout on a pseudo-terminal of :data:`COLUMNS` x 24; (exit code, stdout, stderr)."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    with subprocess.Popen(args, stdout=child, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                          start_new_session=True) as proc:
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(timeout=timeout)
        err = proc.stderr.read().decode(errors="replace")
    os.close(main)
    return code, b"".join(chunks).decode(errors="replace"), err


@pytest.mark.slow
def test_a_terminal_keeps_one_line_per_epoch_above_a_live_bar(tmp_path: Path):
    from tests.conftest import BIN
    from tests.faults import fast_fit_args, tiny_root

    root = tiny_root("det", tmp_path / "set")
    env = {**os.environ, "COLUMNS": str(COLUMNS), "LINES": "24", "TERM": "xterm-256color",
           "LUCIDYOLO_PROGRESS_EVERY_S": "0"}  # a piped run would print a progress line per batch: a terminal gets none
    env.pop("NO_COLOR", None)
    code, raw, err = run_in_terminal([str(BIN / "lucid"), *fast_fit_args("det", root, tmp_path / "runs", epochs=5)],
                                     env)
    assert code == 0, (raw[-3000:], err[-3000:])
    assert "\r" in raw and "\x1b[" in raw, "no live bar was drawn"
    rows = screen(raw)
    shown = "\n".join(rows)
    assert "v_num" not in raw and "progress:" not in shown and "━" not in shown, shown  # the bar leaves nothing
    assert all(len(r) <= COLUMNS for r in rows)
    # what a user reads: the machine's load and the run's size first, then one line per epoch
    assert re.search(r"^machine: .*cores", shown, re.M), shown
    assert re.search(r"^run: 5 epochs x 2 batches of 4 images at 64 px \(estimate after epoch 1\)$", shown, re.M), shown
    epoch_rows = [i for i, r in enumerate(rows) if r.startswith("epoch ")]
    assert [rows[i].split(" | ")[0] for i in epoch_rows] == [f"epoch {e}/5" for e in range(1, 6)], shown
    for k, i in enumerate(epoch_rows):
        # the compact line, broken only between its fields: continuation rows start with two spaces
        line = rows[i]
        nxt = i + 1
        while nxt < len(rows) and rows[nxt].startswith("  ") and not rows[nxt].lstrip().startswith("epoch"):
            line += " | " + rows[nxt].strip()
            nxt += 1
        assert re.search(r"\| box \d\.\d{2,3} cls \d+\.\d+ l1 \d\.\d{2,3} \|", line), line
        assert re.search(r"\| mAP50-95 \d\.\d{3} \|", line) and "val/precision" not in line, line
        ends = r"\| [0-9.]+ s, ~\d+:\d\d left \| est\. total ~\d+:\d\d$" if k == 0 else r"\| [0-9.]+ s, ~\d+:\d\d left$"
        assert re.search(ends, line), line  # the first epoch's line estimates the run's total time
        if k:
            assert nxt == i + 1, line  # a det epoch of a short run: one row of at most 80 columns
    assert rows.index(next(r for r in rows if r.startswith("done: "))) > epoch_rows[-1]
