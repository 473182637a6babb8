"""The side-by-side benchmark reads the reference trainer's pace from its progress bar."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "fit_shapes.py"


@pytest.fixture(scope="module")
def fit_shapes():
    spec = importlib.util.spec_from_file_location("fit_shapes", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_last_state_of_each_epoch_gives_its_images_per_second(fit_shapes):
    log = (
        "\x1b[K        1/2         0G      2.719      4.729    0.03803         20        320: 50% ━━━━━━────── 4/8 1.1it/s 3.6s<3.6s\r"
        "\x1b[K        1/2         0G      2.719      4.729    0.03803         20        320: 100% ━━━━━━━━━━━━ 8/8 1.4it/s 5.8s\n"
        "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100% ━━━━━━━━━━━━ 1/1 4.9it/s 0.2s\n"
        "\x1b[K        2/2         0G      2.769      4.649    0.03665         25        320: 87% ━━━━━━━━━━── 7/8 2.0it/s 3.7s<0.5s\r"
        "\x1b[K        2/2         0G      2.769      4.649    0.03665         25        320: 100% ━━━━━━━━━━━━ 8/8 2.2it/s 3.2s\n"
    )
    rates = fit_shapes.reference_rates(log)
    assert rates == pytest.approx({1: 64 / 5.8, 2: 20.0})  # 8 batches of 8 in 3.2 s


def test_a_log_without_finished_epochs_gives_nothing(fit_shapes):
    assert fit_shapes.reference_rates("        1/30  0G  2.7  4.7  0.03  20  320: 12% ━── 1/8 1.0it/s 1.0s<7.0s\n") == {}
