"""Where a run lives: a new ``version_N`` folder, the one a DDP child joins, or the one ``--resume`` names."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lucidyolo.config.schema import RunConfig
from lucidyolo.errors import UserError

RUN_DIR_ENV = "LUCIDYOLO_RUN_DIR"
"""Set by rank 0 so DDP children, which re-run the command line, join its run directory."""


@dataclass(frozen=True)
class RunDir:
    """A run directory: ``root/version`` (Lightning's loggers take the two parts)."""

    root: Path
    version: str
    checkpoint: Path | None = None
    """The checkpoint to resume from, if any."""

    @property
    def path(self) -> Path:
        return self.root / self.version

    def resume_command(self, task: str) -> str | None:
        """The command that continues this run, once an epoch has finished."""
        return f"lucid fit {task} --resume {self.path}" if (self.path / "checkpoints" / "last.ckpt").is_file() else None


def resolve_resume(resume: Path) -> tuple[Path, Path]:
    """``--resume`` given a run directory or a checkpoint -> (checkpoint, run directory)."""
    path = Path(resume)
    if path.is_dir():
        ckpt = path / "checkpoints" / "last.ckpt"
        if not ckpt.is_file():
            raise UserError(
                f"Run directory {path} has no checkpoints/last.ckpt to resume from.",
                fix="Pass the run's version folder (runs/<task>/version_N) or a .ckpt file.",
            )
        return ckpt, path
    if path.is_file():
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        return path, run_dir
    raise UserError(f"--resume {path}: no such file or directory.", fix="Pass a run directory or a .ckpt file.")


def next_version(root: Path) -> int:
    """One past the highest ``version_N`` under ``root`` (0 for none)."""
    versions = [int(p.name.split("_", 1)[1]) for p in root.glob("version_*") if p.name.split("_", 1)[1].isdigit()]
    return max(versions, default=-1) + 1


def run_dir_for(task: str, cfg: RunConfig, resume: Path | None = None) -> RunDir:
    """The run directory of this process: resumed, joined (DDP child) or new (``trainer.default_root_dir`` or ``runs/<task>``)."""
    if resume is not None:
        ckpt, path = resolve_resume(resume)
        return RunDir(path.parent, path.name, ckpt)
    if os.environ.get(RUN_DIR_ENV) and os.environ.get("LOCAL_RANK", "0") != "0":
        path = Path(os.environ[RUN_DIR_ENV])
        return RunDir(path.parent, path.name)
    root = Path(cfg.trainer.default_root_dir or Path("runs") / task)
    root.mkdir(parents=True, exist_ok=True)
    run = RunDir(root, f"version_{next_version(root)}")
    os.environ[RUN_DIR_ENV] = str(run.path.resolve())  # inherited by DDP children
    return run
