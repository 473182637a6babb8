"""Where a run lives: a new ``version_N`` folder, the one another rank joins, or the one ``--resume`` names.

A new folder is *claimed*: ``mkdir`` without ``exist_ok`` is atomic on POSIX
filesystems (NFS included), so of several fits started at the same moment on
one root exactly one gets each ``version_N``; the others move on to the next
number. Only global rank 0 claims. Its local DDP children inherit the folder
through :data:`RUN_DIR_ENV`; ranks on other nodes cannot see that variable, so
they start with a *pending* folder and take rank 0's path when the process
group exists (:class:`JoinRankZeroRunDir`). Nothing is written there by them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from lucidyolo.config.schema import RunConfig
from lucidyolo.errors import UserError

RUN_DIR_ENV = "LUCIDYOLO_RUN_DIR"
"""Set by rank 0 so DDP children, which re-run the command line, join its run directory."""

_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "NODE_RANK", "GROUP_RANK", "LOCAL_RANK")
"""What launchers set before the process group exists: torchrun (RANK, GROUP_RANK, LOCAL_RANK), SLURM
(SLURM_PROCID), Lightning's own and the plain environment-variable launch (NODE_RANK, LOCAL_RANK)."""

_CLAIM_ATTEMPTS = 1000


def is_global_rank_zero() -> bool:
    """Whether this process is global rank 0 by what the launcher set (true for a plain single process).

    A node-rank-1 process has ``LOCAL_RANK`` 0, so the local rank alone cannot tell.
    """
    return all(os.environ.get(name, "0").strip() in ("", "0") for name in _RANK_VARIABLES)


@dataclass
class RunDir:
    """A run directory: ``root/version`` (Lightning's loggers take the two parts).

    ``pending`` (a rank on another node before the process group exists): the
    path is not known yet and nothing may be written there; :meth:`join` sets it.
    """

    root: Path
    version: str
    checkpoint: Path | None = None
    """The checkpoint to resume from, if any."""
    claimed: bool = False
    """This process created the folder (and may remove it if the run fails before it starts)."""
    pending: bool = False

    @property
    def path(self) -> Path:
        return self.root / self.version

    def join(self, path: Path) -> None:
        """Take another rank's run folder (rank 0's, broadcast once the process group exists)."""
        self.root, self.version, self.pending = path.parent, path.name, False

    def resume_command(self, task: str) -> str | None:
        """The command that continues this run, once an epoch has finished."""
        return f"lucid fit {task} --resume {self.path}" if (self.path / "checkpoints" / "last.ckpt").is_file() else None


def resolve_resume(resume: Path, task: str = "<task>") -> tuple[Path, Path]:
    """``--resume`` given a run directory or a checkpoint -> (checkpoint, run directory).

    A run folder without ``checkpoints/last.ckpt`` is refused: its run never finished an
    epoch's save. The temporary files of that interrupted save are removed first.
    """
    path = Path(resume)
    if path.is_dir():
        ckpt = path / "checkpoints" / "last.ckpt"
        if not ckpt.is_file():
            refuse_unsaved(path, task)
        return ckpt, path
    if path.is_file():
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        return path, run_dir
    raise UserError(f"--resume {path}: no such file or directory.", fix="Pass a run directory or a .ckpt file.")


def refuse_unsaved(path: Path, task: str) -> None:
    """``--resume`` of a folder with no ``last.ckpt``: remove what an interrupted first save left, say why, exit 2.

    A SIGKILL during the first checkpoint write leaves only ``.last.ckpt.<random>.tmp``
    (the size of a checkpoint). It is removed here, before the refusal, unless a live
    process is still writing it (:func:`lucidyolo.atomic_write.remove_abandoned`).
    """
    import shlex

    from lucidyolo.atomic_write import remove_abandoned

    gone, size = remove_abandoned(stale_temporaries(path))
    removed = len(gone)
    config = path / "config.yaml"
    if not (config.is_file() or (path / "checkpoints").is_dir() or removed):
        raise UserError(
            f"Run directory {path} has no checkpoints/last.ckpt to resume from.",
            fix="Pass the run's version folder (runs/<task>/version_N) or a .ckpt file.",
        )
    why = ("--resume continues from checkpoints/last.ckpt, which is written when an epoch ends; this run was stopped "
           "(killed or crashed) before its first one was saved.")
    if removed:
        files = "file" if removed == 1 else f"{removed} files"
        why += f" The unfinished checkpoint {files} it left ({size / 1e6:.1f} MB) {'was' if removed == 1 else 'were'} removed."
    if config.is_file():
        start = f"lucid fit {task} -c {shlex.quote(str(config))}"
        fix = f"Start it again: `{start}` (a new version folder; delete {path} when you no longer need it)."
    else:
        fix = "Start it again with the command that started it."
    raise UserError(f"The run in {path} was stopped before its first checkpoint was saved: there is nothing to "
                    "resume.", why=why, fix=fix)


def epochs_done(ckpt: dict) -> int:
    """Epochs a checkpoint of ours has finished: every one is written at an epoch's end, where Lightning's
    ``epoch`` is that epoch's index (its loop counter ``completed`` is still one behind there)."""
    return int(ckpt.get("epoch", -1)) + 1


def refuse_finished(task: str, run_path: Path, ckpt: dict, cfg: RunConfig) -> None:
    """``--resume`` of a run that has trained every epoch it asked for: exit 2 before anything is touched.

    Lightning would "resume" it with no epoch to run, report NaN metrics and rewrite
    the run's config, plots and logs.
    """
    done, asked = epochs_done(ckpt), int(cfg.trainer.max_epochs)
    if done >= asked:
        raise UserError(
            f"The run in {run_path} is complete: {done} of {asked} epochs done; there is nothing to resume.",
            why="--resume continues an interrupted run; a finished one keeps its checkpoints, metrics and plots as they are.",
            fix=(f"Evaluate it (`lucid eval --checkpoint {run_path}/checkpoints/best.ckpt`) or start a new run "
                 f"(`lucid fit {task} --config {run_path}/config.yaml --trainer.max_epochs N`)."),
        )


def next_version(root: Path) -> int:
    """One past the highest ``version_N`` under ``root`` (0 for none)."""
    versions = [int(p.name.split("_", 1)[1]) for p in root.glob("version_*") if p.name.split("_", 1)[1].isdigit()]
    return max(versions, default=-1) + 1


def claim_version(root: Path) -> Path:
    """Create and return the next free ``root/version_N``; atomic against other processes doing the same.

    Raises:
        OSError: the root cannot be created or written (the caller reports it as a user error).
    """
    root.mkdir(parents=True, exist_ok=True)
    n = next_version(root)
    for _ in range(_CLAIM_ATTEMPTS):
        path = root / f"version_{n}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n = max(n + 1, next_version(root))
    raise UserError(f"Could not claim a version folder under {root} after {_CLAIM_ATTEMPTS} attempts.",
                    fix="Use another --trainer.default_root_dir.")


def run_dir_for(task: str, cfg: RunConfig, resume: Path | None = None) -> RunDir:
    """The run directory of this process: resumed, joined (DDP child), pending (another node) or claimed.

    A new run's folder (``trainer.default_root_dir`` or ``runs/<task>``) is created
    here by global rank 0 only.
    """
    if resume is not None:
        ckpt, path = resolve_resume(resume, task)
        return RunDir(path.parent, path.name, ckpt)
    if os.environ.get(RUN_DIR_ENV) and os.environ.get("LOCAL_RANK", "0") != "0":
        path = Path(os.environ[RUN_DIR_ENV])
        return RunDir(path.parent, path.name)
    root = Path(cfg.trainer.default_root_dir or Path("runs") / task)
    if not is_global_rank_zero():
        return RunDir(root, "pending", pending=True)
    path = claim_version(root)
    os.environ[RUN_DIR_ENV] = str(path.resolve())  # inherited by DDP children
    return RunDir(root, path.name, claimed=True)


def remove_unstarted(run: RunDir) -> None:
    """Remove a folder this process claimed for a run that failed before its first training step.

    It holds only what set-up wrote (``config.yaml``, empty logger files); leaving it
    would make the next run ``version_N+1`` beside an empty-looking failure.
    """
    if run.claimed and run.checkpoint is None and not (run.path / "checkpoints").exists():
        shutil.rmtree(run.path, ignore_errors=True)


def stale_temporaries(run_path: Path) -> list[Path]:
    """Temporary files of interrupted atomic writes (``.last.ckpt.<random>.tmp``, ~the checkpoint's size each).

    A SIGKILL between creating one and renaming it leaves it behind; nothing else
    writes into a run folder while its run is not running, so they are safe to remove
    at the start of a resume.
    """
    found: list[Path] = []
    for folder in (run_path, run_path / "checkpoints"):
        if folder.is_dir():
            found += [p for p in folder.glob(".*.tmp") if p.is_file()]
    return sorted(found)

