"""Shared rich consoles, verbosity and the user-error printer (torch-free)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from lucidyolo.errors import UserError

console = Console()
err_console = Console(stderr=True)

_state = {"verbosity": 1}  # 0 quiet, 1 normal, 2 verbose


def set_verbosity(level: int) -> None:
    _state["verbosity"] = level


def verbosity() -> int:
    return _state["verbosity"]


def info(message: str) -> None:
    """Print unless ``--quiet``."""
    if _state["verbosity"] >= 1:
        # a log file or a pipe gets whole lines: wrapping at 80 columns would split paths and epoch lines
        console.print(message, soft_wrap=not console.is_terminal)


def print_user_error(err: UserError) -> None:
    """One paragraph: what, why, how to fix."""
    text = f"[bold red]error:[/bold red] {escape(err.what)}"
    if err.why:
        text += f"\n  [bold]why:[/bold] {escape(err.why)}"
    if err.fix:
        text += f"\n  [bold]fix:[/bold] {escape(err.fix)}"
    err_console.print(text, highlight=False, soft_wrap=True)


class DownloadBar:
    """A byte progress bar fed ``(done, total)`` by a download; appears on the first call, ends with :meth:`close`."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, done: int, total: int | None) -> None:
        if self._progress is None:
            from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

            self._progress = Progress(*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(),
                                      console=console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def show_own_warnings() -> None:
    """Print the warnings lucid's own code raises (a reader's skipped links or files) as one ``warning:`` line.

    Python's default format leads with the module's file and line and repeats the source line, which reads
    as a crash to a user; other libraries' warnings keep it (their location is what a bug report needs).
    """
    import warnings
    from pathlib import Path

    package = str(Path(__file__).resolve().parents[1])
    default = warnings.showwarning

    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if issubclass(category, UserWarning) and str(filename).startswith(package):
            err_console.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False, soft_wrap=True)
        else:
            default(message, category, filename, lineno, file, line)

    warnings.showwarning = show
