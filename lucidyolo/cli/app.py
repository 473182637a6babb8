"""The ``lucid`` command-line program (Typer).

Every sub-command module is torch-free at import time; heavy modules are
imported inside the command bodies, so ``lucid --help`` and ``lucid plugins``
never import torch or Lightning.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

from lucidyolo._version import __version__
from lucidyolo.cli import data, export, fit, gate, model, plugins, predict
from lucidyolo.cli import evaluate as eval_cmd
from lucidyolo.cli.console import print_user_error, set_verbosity
from lucidyolo.cli.vocabulary import HabitCommand, HabitGroup
from lucidyolo.errors import RunInterrupted, UserError

app = typer.Typer(
    name="lucid",
    help="Train, evaluate and deploy YOLO26-family models (det, seg, obb, pose).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,
    cls=HabitGroup,  # `lucid train` names `lucid fit`; flags show no <bool>
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lucid {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="More output."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors and results."),
) -> None:
    """lucid: YOLO26-family training and evaluation."""
    set_verbosity(0 if quiet else 2 if verbose else 1)


_EXTRA = {"allow_extra_args": True, "ignore_unknown_options": True}
app.command("fit", context_settings=_EXTRA, cls=HabitCommand)(fit.fit)
app.command("eval", cls=HabitCommand)(eval_cmd.evaluate)
app.command("predict", cls=HabitCommand)(predict.predict)
app.command("export", cls=HabitCommand)(export.export)
app.command("plugins", cls=HabitCommand)(plugins.plugins)
app.add_typer(data.app, name="data", help="Check, generate and download datasets.")
app.add_typer(gate.app, name="gate", help="Minutes-long wiring gates.")
app.add_typer(model.app, name="model", help="Model family: size summary (params, GFLOPs).")


def main() -> None:
    """Console-script entry point: user errors exit 2 with a message, never a traceback.

    SIGINT / SIGTERM end any command with ``128 + signum`` and one line (:mod:`lucidyolo.signals`); a write
    that the filesystem refuses (full, read-only, forbidden) ends it with exit 2 naming the path.
    """
    from lucidyolo.cli.console import show_own_warnings
    from lucidyolo.signals import stop_on_signals

    show_own_warnings()
    try:
        with stop_on_signals():
            app()
    except UserError as err:
        print_user_error(err)
        sys.exit(err.exit_code)
    except RunInterrupted as stop:
        name = {2: "Ctrl-C (SIGINT)", 15: "SIGTERM"}.get(stop.signum, f"signal {stop.signum}")
        print_user_error(UserError(
            f"Stopped by {name}.",
            fix=stop.fix or (f"Continue from the last finished epoch with `{stop.resume}`." if stop.resume else
                             "Run the command again: the files it had finished are whole (each is written to a "
                             "temporary file and renamed), the rest were not started."),
        ))
        _exit_after_stop(stop.exit_code)
    except KeyboardInterrupt:
        print_user_error(UserError("Interrupted.", fix="Resume a training run with `lucid fit TASK --resume RUN_DIR`."))
        _exit_after_stop(130)
    except OSError as exc:
        from lucidyolo.engine.process.disk_errors import write_fault_error

        err = write_fault_error(exc)
        if err is None:
            raise
        print_user_error(err)
        sys.exit(err.exit_code)


def _exit_after_stop(code: int) -> NoReturn:
    """Exit after a stop signal: exit handlers and stream flushes run, the interpreter's final collection does not.

    The run's own teardown (checkpoint, loggers, loader workers) has already
    happened on the exception path. What remains is an interrupted run's
    object graph (loader iterators, trainer, tensors in flight); in CI a fit
    stopped by SIGINT printed its message and then hung for minutes inside
    that final garbage collection (no Python frame on the stack). The atexit
    handlers still run (they remove shared-memory segments, end the workers
    of multiprocessing and flush the logging module); ``os._exit`` skips
    only the collection.
    """
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say on it
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
