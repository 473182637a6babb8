"""``lucid fit TASK``: resolve and validate the config, then train."""

from __future__ import annotations

from pathlib import Path

import typer

from lucidyolo.cli.console import console


def _task_help() -> str:
    from lucidyolo.tasks.registry import task_names

    return "Task to train: " + ", ".join(task_names()) + " (or an alias)."


def fit(
    ctx: typer.Context,
    task: str = typer.Argument(..., help=_task_help(), show_default=False),
    config: list[str] = typer.Option(
        [], "--config", "-c", metavar="PRESET|FILE", help="Packaged preset name (e.g. det_nano_smoke.yaml) or YAML file; repeatable."
    ),
    data_root: Path | None = typer.Option(None, "--data-root", help="Dataset root (COCO, YOLO or DOTA layout)."),
    print_config: bool = typer.Option(False, "--print-config", help="Print the resolved config as YAML and exit."),
    resume: Path | None = typer.Option(None, "--resume", help="Run directory or checkpoint to continue exactly."),
) -> None:
    """Train a model; any config key can be overridden with a dotted option.

    Example:

    [bold]lucid fit det --data.batch_size 32 --model.variant s trainer.max_epochs=100[/bold]

    Precedence: schema defaults < packaged preset < --config files < dotted overrides.
    Other trainers' words (epochs=, imgsz=, batch=, data=) stop with our key's name
    (trainer.max_epochs, data.img_size, data.batch_size, --data-root).
    Without --data-root and --config, `det` trains the nano model briefly on the built-in
    synthetic shapes set (preset det_nano_synthetic.yaml).
    """
    from lucidyolo.config.overrides import parse_overrides
    from lucidyolo.config.resolve import config_to_yaml, resolve_config
    from lucidyolo.config.schema import DataConfig
    from lucidyolo.errors import NotAvailableError
    from lucidyolo.tasks.registry import get_task, preset_packages

    spec = get_task(task)
    from lucidyolo.cli.vocabulary import command_options

    overrides = parse_overrides(list(ctx.args), command_options(ctx.command), "lucid fit")
    if resume is not None and (config or overrides or data_root is not None):
        from lucidyolo.errors import ConfigError

        raise ConfigError(
            "--resume cannot be combined with --config, --data-root or dotted overrides.",
            why="a resumed run continues exactly where it stopped, with the config stored in its checkpoint.",
            fix="Drop the other options, or start a new run (optionally from a config) instead of resuming.",
        )
    embedded = (
        not config and data_root is None and resume is None and spec.synthetic_preset is not None
        and not any(k in overrides.get("data", {}) for k in DataConfig.source_keys())
    )
    if embedded:  # the embedded default: a short recipe on the built-in synthetic set
        config = [spec.synthetic_preset]  # type: ignore[list-item]
    cfg = resolve_config(spec, config, overrides, data_root, get_task=get_task, other_presets=preset_packages())
    if print_config:
        console.print(config_to_yaml(cfg), end="", highlight=False, markup=False)
        return
    missing = spec.missing_hooks(*spec.FIT_HOOKS)
    if missing:
        raise NotAvailableError(
            f"Task {spec.name!r} cannot be trained yet: its plugin does not provide {', '.join(missing)}.",
            why=(f"the {spec.name} task's plugin ({spec.description or 'no description'}) declares the task but "
                 "not its training hooks yet; `lucid plugins` shows which distribution provides it."),
            fix="Nothing was run. Use `--print-config` to validate a config meanwhile.",
        )
    from lucidyolo.cli.console import DownloadBar, info, verbosity
    from lucidyolo.engine.loop.fit import run_fit

    bar = DownloadBar("weights") if console.is_terminal and verbosity() >= 1 else None
    try:
        run_fit(spec, cfg, resume=resume, log=info, progress_bar=console.is_terminal, verbose=verbosity() >= 2,
                download_progress=bar)
    finally:
        if bar is not None:
            bar.close()
