"""`lucid eval` scores at the run's training size unless --img-size says otherwise, and says which it used."""

from __future__ import annotations

import json

from tests.cli.tiny_run import IMG_SIZE, write_tiny_run


def test_eval_defaults_to_the_checkpoints_img_size_and_reports_it(tmp_path, lucid):
    ckpt, _ = write_tiny_run(tmp_path)
    report_file = tmp_path / "report.json"
    r = lucid("eval", "--checkpoint", str(ckpt), "--device", "cpu", "--output", str(report_file))
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(report_file.read_text())
    assert report["img_size"] == IMG_SIZE == report["config"]["data"]["img_size"]  # not the task's 640
    assert report["img_size_source"] == "the run's data.img_size"
    assert f"image size: {IMG_SIZE} px (the run's data.img_size)" in r.stdout
    assert f"at {IMG_SIZE} px" in r.stdout  # the table title too


def test_an_explicit_img_size_wins_and_is_named_as_such(tmp_path):
    from lucidyolo.engine.evaluate import run_eval

    ckpt, _ = write_tiny_run(tmp_path)
    report = run_eval(ckpt, img_size=96, device="cpu")
    assert (report["img_size"], report["img_size_source"]) == (96, "--img-size")
