"""The fault matrix: every command x every fault ends in 130 / 143 / 2 with one message, and nothing is lost.

Rows: ``fit`` (every registered task's smoke preset on its tiny synthetic set),
``eval``, ``predict``, ``export``, ``data tile dota`` and ``data check``.
Faults: SIGINT, SIGTERM, SIGKILL then resume (fit only: the others keep no
state to resume), a full filesystem, a read-only one, a missing input and a
corrupt input. Full and read-only filesystems are real (a tmpfs or a
read-only bind mount in a private mount namespace), so the tests that need
them skip without root. ``docs/fault-matrix.md`` is rendered from the cells
these tests record (``tests/faults/matrix_table.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.conftest import real_data_root, run_lucid
from tests.faults import (
    _needs_mounts,
    in_mount_namespace,
    kill_group,
    start_lucid,
    tiny_root,
    wait_exit,
    wait_for,
)
from tests.faults.matrix import EXIT, MESSAGE, check_ending, has_mapped, inode, interrupt, record

pytestmark = pytest.mark.slow

needs_mounts = _needs_mounts()
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _fit_tasks() -> list[str]:
    from lucidyolo.tasks.registry import get_task, task_names

    return [t for t in task_names() if get_task(t).trainable and get_task(t).make_synthetic and get_task(t).default_preset]


FIT_TASKS = _fit_tasks()
EPOCHS = 6
"""Epochs of the interrupted fits."""


def _fit_args(task: str, root: Path, runs: Path, epochs: int) -> tuple[str, ...]:
    from lucidyolo.tasks.registry import get_task

    return ("fit", task, "-c", str(get_task(task).default_preset), "--data-root", str(root), "--data.img_size", "64",
            "--data.batch_size", "4", "--trainer.max_epochs", str(epochs), "--trainer.default_root_dir", str(runs),
            "--model.num_classes", "auto")  # the obb smoke preset names DOTA's 15


def _an_image(root: Path, split: str = "train") -> Path:
    images = sorted(p for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".png") and split in p.parts)
    assert images, f"no {split} image under {root}"
    return images[0]


def _no_temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*.tmp")]


# --------------------------------------------------------------------------------------------- fit


@pytest.mark.parametrize("task", FIT_TASKS)
def test_fit_stops_on_sigint_and_sigterm_and_resumes_after_sigkill(task, tmp_path):
    # the cls plugin's epoch on 8 images of 64 px takes ~50 ms: its resumed run could end in the second a
    # stop that lands in a lock (signals.DEFER_S x MAX_DEFERRALS) waits, and exit 0 (CI saw it twice)
    root = tiny_root(task, tmp_path / "data", images=64 if task == "cls" else 8)
    run_dir = tmp_path / "runs" / "version_0"
    last = run_dir / "checkpoints" / "last.ckpt"
    resume_line = f"Continue from the last finished epoch with `lucid fit {task} --resume {run_dir}`."
    # 6 epochs: each resumed run must still have epochs to go when its signal lands (with 4, a fast model's
    # resumed run could reach its last epoch before the SIGTERM and end 0)
    rc, _, err = interrupt(_fit_args(task, root, tmp_path / "runs", EPOCHS), signal.SIGINT,
                           lambda p: inode(last) is not None, tmp_path)
    check_ending(f"fit {task}", "SIGINT", rc, err, 130, resume_line)

    saved = inode(last)
    rc, _, err = interrupt(("fit", task, "--resume", str(run_dir)), signal.SIGTERM,
                           lambda p: inode(last) not in (None, saved), tmp_path)
    check_ending(f"fit {task}", "SIGTERM", rc, err, 143, resume_line)

    saved = inode(last)
    proc = start_lucid("fit", task, "--resume", str(run_dir), env={}, cwd=tmp_path)
    try:
        wait_for(lambda: inode(last) not in (None, saved), 300, "another epoch's checkpoint", proc)
        os.killpg(proc.pid, signal.SIGKILL)
        wait_exit(proc, 60)
    finally:
        kill_group(proc)
    r = run_lucid("fit", task, "--resume", str(run_dir), cwd=tmp_path)
    import torch

    rows = (run_dir / "results.csv").read_text().strip().splitlines()
    ok = (r.returncode == 0 and torch.load(last, weights_only=True)["epoch"] == EPOCHS - 1 and len(rows) == EPOCHS + 1
          and not _no_temporaries(run_dir))
    record(f"fit {task}", "SIGKILL, then resume", r.returncode, ok, f"resume ends all {EPOCHS} epochs")
    assert ok, (r.returncode, rows, _no_temporaries(run_dir), r.stderr[-3000:])


@needs_mounts
@pytest.mark.parametrize("task", FIT_TASKS)
def test_fit_on_a_full_or_read_only_filesystem_stops_with_a_message(task, tmp_path):
    root = tiny_root(task, tmp_path / "data")
    full, ro, keep = tmp_path / "full", tmp_path / "ro", tmp_path / "keep"
    for d in (full, ro, keep):
        d.mkdir()
    script = f"""
mount -t tmpfs -o size=8m tmpfs {full} && mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} || exit 77
"$LUCID" {' '.join(_fit_args(task, root, full, 2))} 2> {keep}/full.err; echo $? > {keep}/full.rc
find {full} -name '*.tmp' > {keep}/full.tmp
"$LUCID" {' '.join(_fit_args(task, root, ro, 2))} 2> {keep}/ro.err; echo $? > {keep}/ro.rc
"""
    r = in_mount_namespace(script, tmp_path)
    if r.returncode == 77:
        pytest.skip("cannot mount here")
    rc = int((keep / "full.rc").read_text())
    # 8 MB hold the run's config and logs, not its first checkpoint (~30 MB)
    check_ending(f"fit {task}", "disk full", rc, (keep / "full.err").read_text(), 2,
                 "the filesystem is full (No space left on device)")
    assert (keep / "full.tmp").read_text() == ""  # no temporary checkpoint left behind
    check_ending(f"fit {task}", "read-only root", int((keep / "ro.rc").read_text()), (keep / "ro.err").read_text(), 2,
                 f"Cannot write {ro / 'version_0'}: the filesystem is mounted read-only")


@pytest.mark.parametrize("task", FIT_TASKS)
def test_fit_on_a_missing_or_corrupt_input_stops_with_a_message(task, tmp_path):
    r = run_lucid(*_fit_args(task, tmp_path / "nowhere", tmp_path / "runs", 1), cwd=tmp_path)
    check_ending(f"fit {task}", "missing input", r.returncode, r.stderr, 2, str(tmp_path / "nowhere"))
    root = tiny_root(task, tmp_path / "data")
    bad = _an_image(root)
    bad.write_bytes(b"\x00" * 64)
    r = run_lucid(*_fit_args(task, root, tmp_path / "runs", 1), cwd=tmp_path)
    check_ending(f"fit {task}", "corrupt input", r.returncode, r.stderr, 2, str(bad))
    assert not any((tmp_path / "runs").glob("version_*"))  # the start failed: no empty run folder


# --------------------------------------------------------------------------- eval, predict, export


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, data root) of a finished one-epoch det run."""
    tmp = tmp_path_factory.mktemp("trained")
    root = tiny_root("det", tmp / "data")
    r = run_lucid(*_fit_args("det", root, tmp / "runs", 1), cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp / "runs" / "version_0" / "checkpoints" / "last.ckpt", root


def _commands(ckpt: Path, root: Path, out: Path) -> dict[str, tuple[tuple[str, ...], Path]]:
    """Each command with the output it writes under ``out``."""
    images = _an_image(root).parent
    return {
        "eval": (("eval", "--checkpoint", str(ckpt), "--img-size", "320", "--output", str(out / "report.json")),
                 out / "report.json"),
        "predict": (("predict", "--checkpoint", str(ckpt), "--source", str(images), "--img-size", "320", "--conf", "0.0",
                     "--save", str(out / "drawn"), "--output", str(out / "predictions.json")), out / "predictions.json"),
        "export": (("export", "--checkpoint", str(ckpt), "--img-size", "320", "--output", str(out / "model.onnx")),
                   out / "model.onnx"),
    }


def _whole_or_absent(path: Path) -> bool:
    if not path.exists():
        return True
    if path.suffix == ".json":
        json.loads(path.read_text())
        return True
    import onnx

    onnx.load(str(path))
    return True


@pytest.mark.parametrize("command", ["eval", "predict", "export"])
@pytest.mark.parametrize("sig", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_model_commands_stop_on_signals_leaving_whole_files(trained, command, sig, tmp_path):
    ckpt, root = trained
    before = ckpt.stat().st_mtime_ns
    args, output = _commands(ckpt, root, tmp_path / "out")[command]
    # torch is imported inside the command, after main() installed its handlers
    rc, _, err = interrupt(args, sig, lambda p: has_mapped(p.pid, "libtorch_cpu"), tmp_path)
    check_ending(command, sig.name, rc, err, EXIT[sig], MESSAGE[sig])
    assert _whole_or_absent(output) and not _no_temporaries(tmp_path)
    assert ckpt.stat().st_mtime_ns == before


def _kill_then_rerun(args: tuple[str, ...], ready, cwd: Path):
    """SIGKILL the command's whole process group once ``ready``, then run it again to the end."""
    import time

    proc = start_lucid(*args, env={}, cwd=cwd)
    try:
        wait_for(lambda: ready(proc), 300, "the command's own code", proc)
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
        wait_exit(proc, 60)
    finally:
        kill_group(proc)
    return run_lucid(*args, cwd=cwd)


@pytest.mark.parametrize("command", ["eval", "predict", "export"])
def test_model_commands_killed_then_run_again_finish(trained, command, tmp_path):
    ckpt, root = trained
    args, output = _commands(ckpt, root, tmp_path / "out")[command]
    r = _kill_then_rerun(args, lambda p: has_mapped(p.pid, "libtorch_cpu"), tmp_path)
    ok = r.returncode == 0 and output.is_file() and _whole_or_absent(output)
    record(command, "SIGKILL, then rerun", r.returncode, ok, "the rerun finishes; outputs are whole")
    assert ok, r.stderr[-3000:]


@needs_mounts
@pytest.mark.parametrize("command", ["eval", "predict", "export"])
def test_model_commands_on_a_full_or_read_only_filesystem(trained, command, tmp_path):
    ckpt, root = trained
    full, ro, keep = tmp_path / "full", tmp_path / "ro", tmp_path / "keep"
    for d in (full, ro, keep):
        d.mkdir()
    full_args, full_out = _commands(ckpt, root, full)[command]
    ro_args, ro_out = _commands(ckpt, root, ro)[command]
    script = f"""
mount -t tmpfs -o size=4k tmpfs {full} && mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} || exit 77
"$LUCID" {' '.join(full_args)} 2> {keep}/full.err; echo $? > {keep}/full.rc
find {full} -name '*.tmp' > {keep}/full.tmp
"$LUCID" {' '.join(ro_args)} 2> {keep}/ro.err; echo $? > {keep}/ro.rc
"""
    r = in_mount_namespace(script, tmp_path)
    if r.returncode == 77:
        pytest.skip("cannot mount here")
    check_ending(command, "disk full", int((keep / "full.rc").read_text()), (keep / "full.err").read_text(), 2,
                 "the filesystem is full (No space left on device)")
    assert (keep / "full.tmp").read_text() == ""
    check_ending(command, "read-only root", int((keep / "ro.rc").read_text()), (keep / "ro.err").read_text(), 2,
                 "the filesystem is mounted read-only")


@pytest.mark.parametrize("command", ["eval", "predict", "export"])
def test_model_commands_on_a_missing_or_corrupt_input(trained, command, tmp_path):
    ckpt, root = trained
    args, _ = _commands(tmp_path / "missing.ckpt", root, tmp_path / "out")[command]
    r = run_lucid(*args, cwd=tmp_path)
    check_ending(command, "missing input", r.returncode, r.stderr, 2, f"Checkpoint not found: '{tmp_path / 'missing.ckpt'}'")
    data = ckpt.read_bytes()
    (tmp_path / "truncated.ckpt").write_bytes(data[: len(data) // 3])
    args, _ = _commands(tmp_path / "truncated.ckpt", root, tmp_path / "out")[command]
    r = run_lucid(*args, cwd=tmp_path)
    check_ending(command, "corrupt input", r.returncode, r.stderr, 2, f"Cannot read checkpoint '{tmp_path / 'truncated.ckpt'}'")


# ------------------------------------------------------------------------------ tile and data check


def _dota() -> Path:
    data = real_data_root()
    if data is None or not (data / "dota_v1_examples").is_dir():
        pytest.skip("../shared/data/dota_v1_examples is absent")
    return data / "dota_v1_examples"


def _tile_args(root: Path, out: Path) -> tuple[str, ...]:
    return ("data", "tile", "dota", "--data-root", str(root), "--out", str(out), "--splits", "train", "--patch", "512",
            "--overlap", "100")


def _no_half_split(out: Path) -> bool:
    """No staging folder left, and a split folder only beside its annotations."""
    if not out.exists():
        return True
    staged = [p for p in out.iterdir() if ".partial" in p.name]
    split = out / "train"
    return not staged and (not split.exists() or (out / "annotations" / "instances_train.json").is_file())


@pytest.mark.parametrize("sig", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_tile_stops_on_signals_leaving_no_half_written_split(sig, tmp_path):
    rc, _, err = interrupt(_tile_args(_dota(), tmp_path / "out"), sig, lambda p: has_mapped(p.pid, "_imaging"), tmp_path)
    check_ending("data tile dota", sig.name, rc, err, EXIT[sig], MESSAGE[sig])
    assert _no_half_split(tmp_path / "out")


def test_tile_killed_then_run_again_finishes_and_clears_the_dead_runs_staging(tmp_path):
    out = tmp_path / "out"
    r = _kill_then_rerun(_tile_args(_dota(), out), lambda p: has_mapped(p.pid, "_imaging"), tmp_path)
    ok = r.returncode == 0 and _no_half_split(out) and (out / "annotations" / "instances_train.json").is_file()
    record("data tile dota", "SIGKILL, then rerun", r.returncode, ok, "the rerun removes the dead run's staging folder")
    assert ok, r.stderr[-3000:]


@needs_mounts
def test_tile_on_a_full_or_read_only_filesystem(tmp_path):
    dota = _dota()
    full, ro, keep = tmp_path / "full", tmp_path / "ro", tmp_path / "keep"
    for d in (full, ro, keep):
        d.mkdir()
    script = f"""
mount -t tmpfs -o size=256k tmpfs {full} && mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} || exit 77
"$LUCID" {' '.join(_tile_args(dota, full / 'out'))} 2> {keep}/full.err; echo $? > {keep}/full.rc
ls -a {full}/out > {keep}/full.ls 2>/dev/null
"$LUCID" {' '.join(_tile_args(dota, ro / 'out'))} 2> {keep}/ro.err; echo $? > {keep}/ro.rc
"""
    r = in_mount_namespace(script, tmp_path)
    if r.returncode == 77:
        pytest.skip("cannot mount here")
    check_ending("data tile dota", "disk full", int((keep / "full.rc").read_text()), (keep / "full.err").read_text(), 2,
                 "the filesystem is full (No space left on device)")
    assert not [n for n in (keep / "full.ls").read_text().split() if ".partial" in n]  # staging removed
    check_ending("data tile dota", "read-only root", int((keep / "ro.rc").read_text()), (keep / "ro.err").read_text(), 2,
                 "the filesystem is mounted read-only")


def test_tile_on_a_missing_or_corrupt_input(tmp_path):
    r = run_lucid(*_tile_args(tmp_path / "nowhere", tmp_path / "out"), cwd=tmp_path)
    check_ending("data tile dota", "missing input", r.returncode, r.stderr, 2, str(tmp_path / "nowhere"))
    copy = tmp_path / "dota"
    shutil.copytree(_dota(), copy)
    bad = sorted((copy / "images").iterdir())[0]
    bad.write_bytes(b"\x00" * 64)
    r = run_lucid(*_tile_args(copy, tmp_path / "out2"), cwd=tmp_path)
    check_ending("data tile dota", "corrupt input", r.returncode, r.stderr, 2, bad.name)
    assert _no_half_split(tmp_path / "out2")


def _coco128() -> Path:
    data = real_data_root()
    if data is None or not (data / "coco128_coco").is_dir():
        pytest.skip("../shared/data/coco128_coco is absent")
    return data / "coco128_coco"


@pytest.mark.parametrize("sig", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_data_check_stops_on_signals(sig, tmp_path):
    # Pillow is imported inside the command (after main() installed its handlers); --decode reads for seconds
    rc, _, err = interrupt(("data", "check", "--data-root", str(_coco128()), "--decode"), sig,
                           lambda p: has_mapped(p.pid, "_imaging"), tmp_path)
    check_ending("data check", sig.name, rc, err, EXIT[sig], MESSAGE[sig])


def test_data_check_on_a_missing_or_corrupt_input(tmp_path):
    r = run_lucid("data", "check", "--data-root", str(tmp_path / "nowhere"), cwd=tmp_path)
    check_ending("data check", "missing input", r.returncode, r.stderr, 2, str(tmp_path / "nowhere"))
    root = tiny_root("det", tmp_path / "data")
    bad = _an_image(root)
    bad.write_bytes(b"\x00" * 64)
    r = run_lucid("data", "check", "--data-root", str(root), cwd=tmp_path)
    text = r.stdout + r.stderr
    ok = r.returncode == 2 and str(bad) in " ".join(text.split()) and "Traceback" not in text
    record("data check", "corrupt input", r.returncode, ok)
    assert ok, text[-3000:]
    record("data check", "SIGKILL, then rerun", None, True, "n/a: writes nothing, keeps no state")
    record("data check", "disk full", None, True, "n/a: writes nothing")
    record("data check", "read-only root", None, True, "n/a: writes nothing")
