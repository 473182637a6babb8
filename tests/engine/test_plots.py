"""plot_results: a real PNG from results.csv, headless."""

from __future__ import annotations

import struct
import subprocess
import sys

from PIL import Image

from lucidyolo.engine.run.plots import plot_results
from lucidyolo.engine.run.results_csv import task_results_columns, write_results_row
from lucidyolo.tasks.registry import get_task

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_run(path, epochs: int = 5) -> None:
    cols = task_results_columns(get_task("det"), num_param_groups=2)
    for e in range(epochs):
        row = {"epoch": e, "train/box_loss": 2.0 / (e + 1), "train/cls_loss": 1.0 / (e + 1),
               "metrics/mAP50-95(B)": 0.1 * e, "lr/pg0": 0.01, "lr/pg1": 0.01 * (1 - e / epochs)}
        if e % 2 == 0:
            row["metrics/mAP50(B)"] = 0.15 * e  # validation every other epoch: NaN gaps
        write_results_row(path, row, cols)


def test_plot_results_writes_a_valid_png(tmp_path):
    csv_path = tmp_path / "results.csv"
    _write_run(csv_path)
    paths = plot_results(csv_path, tmp_path / "plots")
    assert [p.name for p in paths] == ["results.png"]
    data = paths[0].read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    with Image.open(paths[0]) as im:
        im.verify()  # checks the chunk CRCs
    with Image.open(paths[0]) as im:
        assert im.size == (width, height)
        # 6 columns with values -> 5 panels per row, 2 rows: wider than tall, not blank
        assert width > height > 200
        extrema = im.convert("L").getextrema()
        assert extrema[0] < 128 < extrema[1]


def test_empty_results_write_nothing(tmp_path):
    csv_path = tmp_path / "results.csv"
    csv_path.write_text(",".join(task_results_columns(get_task("det"))) + "\n")
    assert plot_results(csv_path, tmp_path / "plots") == []


def test_matplotlib_is_imported_lazily_and_without_pyplot(tmp_path):
    csv_path = tmp_path / "results.csv"
    _write_run(csv_path, epochs=2)
    code = (
        "import sys; from lucidyolo.engine.run.plots import plot_results; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'; "
        f"plot_results({str(csv_path)!r}, {str(tmp_path)!r}); "
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert (tmp_path / "results.png").stat().st_size > 1000
