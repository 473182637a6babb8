"""The start lines and the epoch line's two forms (issue 44, items 2 and 4): how busy the machine is, the
run's size, the estimate of the run's time, and the compact line a narrow terminal gets."""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch

from lucidyolo.engine.run.epoch_lines import (
    EpochLines,
    duration,
    early_estimate_line,
    epoch_fields,
    fit_width,
    machine_line,
    run_line,
    three_digits,
)


def test_the_machine_line_says_how_busy_the_cores_are():
    assert machine_line(2, 1.9, 10.44) == ("machine: 1.9 of 2 cores busy with other work (load average 10.4): "
                                           "this run gets the rest and is slower than on an idle machine")
    assert machine_line(16, 0.2, 0.31) == "machine: 16 cores, idle at the start (load average 0.3)"
    assert machine_line(4, None, 2.0) == "machine: 4 cores, load average 2.0"  # no /proc/stat
    assert machine_line(4, None, None) == "machine: 4 cores"  # Windows


def test_the_run_line_names_epochs_batches_and_image_size():
    assert run_line(0, 50, 16.0, 8, 640) == (
        "run: 50 epochs x 16 batches of 8 images at 640 px (estimate after epoch 1)")
    assert run_line(3, 20, float("inf"), 4, None) == (
        "run: epochs 4-20 of 20 x batches of 4 images (estimate after epoch 4)")


def test_a_long_first_epoch_estimates_the_run_before_it_ends():
    assert early_estimate_line(6730.4, 50, 4.12) == (
        "estimate: ~1:52:10 for the run's 50 epochs at the training pace so far (4.1 img/s; validation not "
        "counted yet)")
    assert "run's 1 epoch at" in early_estimate_line(30, 1, 2.0)


def test_numbers_keep_three_digits_and_durations_read_as_time():
    assert [three_digits(v) for v in (8, 0.627, 12.43, 123.4, 9.999, 1234.0)] == [
        "8.00", "0.627", "12.4", "123", "10.0", "1.23e+03"]
    assert [duration(s) for s in (0.04, 7.25, 42.2, 59.6, 754)] == ["0.0 s", "7.2 s", "42 s", "1:00", "12:34"]


LOSSES = [("box", 0.7271), ("cls", 6.8), ("l1", 2.029)]
METRICS = [("val/precision", 0.5), ("val/recall", 0.25), ("val/mAP50", 0.6), ("val/mAP50-95", 0.41234)]


def test_the_full_line_keeps_every_field_and_the_first_epoch_its_estimate():
    parts = epoch_fields(1, 20, LOSSES, lr=0.00604, images_per_s=5.12, metrics=METRICS, val_s=0.21, epoch_s=7,
                         elapsed=7.4, left=140.6, run_total=148.0)
    assert " | ".join(parts) == (
        "epoch 1/20 | loss box 0.7271 cls 6.8 l1 2.029 | lr 0.00604 | 5.1 img/s | val/precision 0.5000 | "
        "val/recall 0.2500 | val/mAP50 0.6000 | val/mAP50-95 0.4123 | val 0.2 s | est. total ~2:28 | "
        "0:07 elapsed, ~2:21 left")
    later = epoch_fields(2, 20, LOSSES, metrics=METRICS, elapsed=15, left=135)
    assert "est. total" not in " | ".join(later) and later[-1] == "0:15 elapsed, ~2:15 left"


def test_the_compact_line_fits_80_columns_and_keeps_losses_the_main_metric_and_time():
    parts = epoch_fields(12, 20, LOSSES, lr=0.006, images_per_s=5.1, metrics=METRICS, val_s=0.2, epoch_s=7.25,
                         elapsed=90, left=599, compact=True, main_metric="val/mAP50-95")
    line = fit_width(parts, 80)
    assert line == "epoch 12/20 | box 0.727 cls 6.80 l1 2.03 | mAP50-95 0.412 | 7.2 s, ~9:59 left"
    assert len(line) <= 80
    # a long run (50 epochs at 640 px on a CPU) fits too; a task with more loss terms puts its time on a second row
    long = fit_width(epoch_fields(12, 50, LOSSES, metrics=METRICS, epoch_s=134, left=5530, compact=True), 80)
    assert long == "epoch 12/50 | box 0.727 cls 6.80 l1 2.03 | mAP50-95 0.412 | 2:14, ~1:32:10 left"
    seg = fit_width(epoch_fields(12, 50, [*LOSSES, ("seg", 1.234)], metrics=METRICS, epoch_s=134, left=5530,
                                 compact=True), 80)
    assert seg == "epoch 12/50 | box 0.727 cls 6.80 l1 2.03 seg 1.23 | mAP50-95 0.412\n  2:14, ~1:32:10 left"
    first = fit_width(epoch_fields(1, 20, LOSSES, metrics=METRICS, epoch_s=7.4, left=140.6, run_total=148,
                                   compact=True, main_metric="val/mAP50-95"), 80)
    assert first == ("epoch 1/20 | box 0.727 cls 6.80 l1 2.03 | mAP50-95 0.412 | 7.4 s, ~2:21 left\n"
                     "  est. total ~2:28")
    # no validation this epoch: no metric; an unknown main metric keeps the last one
    assert fit_width(epoch_fields(3, 20, LOSSES, epoch_s=1, compact=True), 80).count("|") == 2
    assert "mAP50-95 0.412" in " ".join(epoch_fields(3, 20, LOSSES, metrics=METRICS, compact=True))


def test_lines_break_only_between_fields():
    parts = ["epoch 1/3", "a" * 30, "b" * 30, "c" * 30, "d" * 90]
    lines = fit_width(parts, 80).split("\n")
    assert lines == ["epoch 1/3 | " + "a" * 30 + " | " + "b" * 30, "  " + "c" * 30, "  " + "d" * 90]
    assert fit_width(parts, None) == " | ".join(parts)  # a log or a pipe: one line


def _trainer(epoch: int, max_epochs: int = 10) -> SimpleNamespace:
    metrics = {"train/box_loss": torch.tensor(0.5), "train/cls_loss": torch.tensor(2.0),
               "val/mAP50-95": torch.tensor(0.25)}
    return SimpleNamespace(is_global_zero=True, current_epoch=epoch, max_epochs=max_epochs, callback_metrics=metrics,
                           optimizers=[SimpleNamespace(param_groups=[{"lr": 0.01}])], world_size=1,
                           num_training_batches=4, sanity_checking=False)


def test_the_first_epoch_of_a_run_estimates_its_total_and_every_epoch_its_time_left():
    lines: list[str] = []
    cb = EpochLines(lines.append, ("box", "cls"), ("val/mAP50-95",), 8)
    cb._first_epoch, cb._batches = 0, 4
    now = time.perf_counter()
    cb._fit_start, cb._epoch_start = now - 12.0, now - 10.0  # 2 s of start-up, a 10 s epoch
    cb.on_train_epoch_end(_trainer(0), None)
    # 12 s for 1 of 10 epochs: ~1:48 left, ~2:00 in all
    assert lines[-1].endswith("| est. total ~2:00 | 0:12 elapsed, ~1:48 left"), lines
    cb._fit_start -= 12.0  # the second epoch took 12 s too
    cb.on_train_epoch_end(_trainer(1), None)
    assert "est. total" not in lines[-1] and lines[-1].endswith("elapsed, ~1:36 left"), lines
    cb.on_train_epoch_end(_trainer(9), None)
    assert "est. total" not in lines[-1] and lines[-1].endswith("elapsed, ~0:00 left"), lines


def test_a_resumed_run_estimates_from_its_own_first_epoch():
    lines: list[str] = []
    cb = EpochLines(lines.append, ("box",), ("val/mAP50-95",), 8)
    cb._first_epoch, cb._batches = 5, 4
    cb._fit_start = cb._epoch_start = time.perf_counter() - 10.0
    cb.on_train_epoch_end(_trainer(5), None)
    assert lines[-1].endswith("| est. total ~0:50 | 0:10 elapsed, ~0:40 left"), lines


def test_a_long_first_epoch_says_its_estimate_once(monkeypatch):
    lines: list[str] = []
    cb = EpochLines(lines.append, ("box",), ("val/mAP50-95",), 8)
    cb.every = float("inf")
    trainer = _trainer(0, max_epochs=5)
    trainer.num_training_batches = 100
    clock = [1000.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    cb._fit_start = 995.0
    cb.on_train_epoch_start(trainer, None)
    cb.on_train_batch_end(trainer, None)  # the first step, 5 s after the fit started
    assert lines == ["first training step done 5.0 s after the fit started"]
    for _ in range(10):  # then 2 s a batch: 20 s for 10 batches
        clock[0] += 2.0
        cb.on_train_batch_end(trainer, None)
    # 25 s so far + 89 batches left in this epoch + 4 epochs of 100 batches, 2 s each
    assert lines[1:] == [early_estimate_line(25 + 89 * 2 + 4 * 100 * 2, 5, 88 / 20)]
    clock[0] += 30.0
    cb.on_train_batch_end(trainer, None)
    assert len(lines) == 2


def test_a_terminal_gets_the_full_line_where_it_fits_and_the_compact_one_where_not():
    lines: list[str] = []
    cb = EpochLines(lines.append, ("box", "cls"), ("val/mAP50", "val/mAP50-95"), 8, main_metric="val/mAP50-95")
    cb._first_epoch, cb._batches, cb._validated, cb._val_s = 0, 4, 1, 0.5
    cb._fit_start = cb._epoch_start = time.perf_counter() - 10.0
    for columns in (200, 80):
        cb.width = lambda columns=columns: columns  # type: ignore[method-assign]
        cb.on_train_epoch_end(_trainer(1), None)
    wide, narrow = lines
    assert "\n" not in wide and "lr 0.01" in wide and "val/mAP50-95 0.2500" in wide and len(wide) <= 200
    assert narrow.startswith("epoch 2/10 | box 0.500 cls 2.00 | mAP50-95 0.250 | ") and len(narrow) <= 80
