"""``trainer.threads``: ``auto`` takes the cores other processes leave idle, shared among this host's training processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucidyolo.config.schema import RunConfig
from lucidyolo.engine.process import cpu_threads
from lucidyolo.engine.process.cpu_threads import (
    CHILD_ENV,
    auto_threads,
    busy_cores,
    resolve_threads,
)


@pytest.mark.parametrize(
    ("cores", "busy", "processes", "expected"),
    [
        (2, 0.05, 1, 2),  # an idle laptop: every core
        (2, 1.0, 1, 1),  # one other CPU-bound process: the measured case (10.1 vs 4.5 img/s)
        (2, 1.6, 1, 1),  # nothing idle: still one thread
        (2, 2.0, 1, 1),
        (8, 0.0, 2, 4),  # two training processes share the idle cores
        (8, 3.4, 2, 2),  # 8 - 3 = 5 idle cores, 2 each
        (4, 0.0, 8, 1),  # more processes than cores: one thread each
    ],
)
def test_auto_is_the_idle_cores_shared_among_the_processes(cores, busy, processes, expected):
    assert auto_threads(processes, busy=busy, cores=cores) == expected


def _stat(path: Path, user: int, idle: int) -> None:
    # 2 CPUs; columns: user nice system idle iowait irq softirq steal guest guest_nice
    path.write_text(f"cpu  {user} 0 0 {idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n")


def test_busy_cores_reads_the_kernel_counters_over_the_sample(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    _stat(stat, user=1000, idle=5000)
    # during the sample 30 ticks busy and 10 idle of 40: 3/4 of 2 CPUs
    monkeypatch.setattr(cpu_threads.time, "sleep", lambda s: _stat(stat, user=1030, idle=5010))
    assert busy_cores(stat) == pytest.approx(1.5)
    assert busy_cores(tmp_path / "absent") is None


def test_resolve_keeps_a_number_takes_the_parents_count_then_omp(monkeypatch):
    cfg = RunConfig.model_validate({"trainer": {"threads": 3}})
    assert resolve_threads(cfg, 1) == (cfg, None)
    auto = RunConfig()
    assert auto.trainer.threads == "auto"
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    monkeypatch.setenv(CHILD_ENV, "2")
    assert resolve_threads(auto, 1)[0].trainer.threads == 2  # a DDP child takes what its parent resolved
    monkeypatch.delenv(CHILD_ENV)
    assert resolve_threads(auto, 1)[0].trainer.threads == 5


def test_auto_on_a_busy_machine_says_what_it_chose(monkeypatch):
    monkeypatch.delenv(CHILD_ENV, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda: 1.02)
    cfg, note = resolve_threads(RunConfig(), 1)
    assert cfg.trainer.threads == 1
    assert note is not None and "1.0 of 2 cores busy" in note and "--trainer.threads" in note
    monkeypatch.setattr(cpu_threads, "busy_cores", lambda: 0.1)
    cfg, note = resolve_threads(RunConfig(), 1)
    assert cfg.trainer.threads == 2 and note is None


def test_a_thread_count_below_one_is_refused_on_the_command_line(lucid, tmp_path):
    r = lucid("fit", "det", "--trainer.threads", "0", "--trainer.default_root_dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "trainer.threads" in r.stderr and "thread count" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()
