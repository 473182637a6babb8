"""Ctrl-C in ``Model.fit()`` from a script: the CLI's one line with the resume command and a short traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.faults import kill_group, tiny_root, wait_exit, wait_for

SCRIPT = textwrap.dedent("""
    import sys
    from lucidyolo import Model

    Model.new("det").fit(sys.argv[1], trainer__max_epochs=200, trainer__default_root_dir=sys.argv[2],
                         data__img_size=64, data__batch_size=4, data__num_workers=0)
""")


@pytest.mark.slow
def test_ctrl_c_in_a_script_prints_one_line_and_a_short_traceback(tmp_path):
    root = tiny_root("det", tmp_path / "data")
    runs = tmp_path / "runs"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(root), str(runs)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        last = runs / "version_0" / "checkpoints" / "last.ckpt"
        wait_for(last.is_file, 300, "the first last.ckpt", proc)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole foreground group
        _, out, err = wait_exit(proc, 120)
    finally:
        kill_group(proc)
    assert proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), err[-3000:]
    assert "epoch 1/200 |" in out  # the epoch lines, printed without log=print
    resume = f"lucid fit det --resume {runs / 'version_0'}"
    lines = err.strip().splitlines()
    assert any(line.startswith("Stopped by Ctrl-C (SIGINT). Fix: Continue from the last finished epoch with `")
               and "--resume" in line for line in lines), err[-3000:]
    assert lines[-1].startswith("KeyboardInterrupt: Stopped by Ctrl-C (SIGINT).")
    tb = lines[lines.index("Traceback (most recent call last):"):]
    assert len(tb) <= 8, "\n".join(tb)  # the script's line and Model.fit's raise, not Lightning's loop
    assert resume.split(" --resume ")[0] in lines[-1]
