"""User-facing errors.

Every mistake a user can make (bad config, path, dataset, device) is raised as a
:class:`UserError` carrying three parts: *what* went wrong, *why* it matters and
*how to fix* it. The CLI prints it as one rich paragraph and exits with code 2,
without a traceback. Bugs are any other exception and keep their traceback.

This module must stay import-light (no torch).
"""

from __future__ import annotations


class UserError(Exception):
    """An error caused by user input; the CLI exits 2 and prints no traceback.

    Args:
        what: one sentence naming the problem (quote the offending value, key or
            ``file:line``).
        why: why it cannot work as given (optional).
        fix: what the user should do instead (optional).
    """

    exit_code = 2

    def __init__(self, what: str, why: str | None = None, fix: str | None = None) -> None:
        self.what = what
        self.why = why
        self.fix = fix
        super().__init__(self.render_plain())

    def render_plain(self) -> str:
        parts = [self.what]
        if self.why:
            parts.append(f"Why: {self.why}")
        if self.fix:
            parts.append(f"Fix: {self.fix}")
        return " ".join(parts)


class ConfigError(UserError):
    """A configuration value, key or combination is invalid."""


class DataError(UserError):
    """A dataset root, file or label is missing or malformed."""


class PluginError(UserError):
    """A task plugin is unknown, broken, conflicting or incompatible."""


class NotAvailableError(UserError):
    """A command or feature that is not built yet; says so honestly and exits 2."""


class RankDied(UserError):
    """A process of a multi-process run died (killed by a signal, or ended with a code); the run stopped.

    The CLI prints it like any user error but exits with ``exit_code``: ``128 + signal`` of a killed
    rank (137 for SIGKILL, what the job got before this message existed), else the rank's own code.
    """

    def __init__(self, what: str, why: str | None = None, fix: str | None = None, exit_code: int = 1) -> None:
        super().__init__(what, why=why, fix=fix)
        self.exit_code = exit_code


class RunInterrupted(BaseException):
    """SIGINT (Ctrl-C) or SIGTERM stopped a run; the CLI exits ``128 + signum`` with a resume hint.

    A ``BaseException`` like ``KeyboardInterrupt``, so ``except Exception`` in
    library code cannot swallow it, but not a ``KeyboardInterrupt``: Lightning
    turns that into ``sys.exit(1)`` and the signal would be lost.

    Args:
        signum: the signal received.
        resume: the command that continues the run (set by the fit runner), if any.
        fix: the advice to print instead (set by commands whose runs cannot be resumed).
    """

    def __init__(self, signum: int, resume: str | None = None, fix: str | None = None) -> None:
        self.signum = int(signum)
        self.resume = resume
        self.fix = fix
        """What to do instead of resuming, when the command that was stopped keeps no checkpoint (a gate)."""
        self.epochs_done: int | None = None
        """Epochs that had finished, when the stopped command trained."""
        super().__init__(f"stopped by signal {self.signum}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum
