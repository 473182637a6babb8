"""One vocabulary across commands: did-you-mean for other trainers' words, and renamed options (torch-free).

Every command is a :class:`HabitCommand`: an unknown option or a stray ``word=value``
argument that is another trainer's word (``--imgsz``, ``batch=16``, see
:data:`lucidyolo.config.habits.HABITS`) or a typo of one of the command's own
options ends with exit 2 and a did-you-mean, through the same
:class:`~lucidyolo.errors.UserError` printer as every other mistake.
``lucid fit`` and ``lucid gate overfit`` take dotted overrides, so their
leftover tokens are answered by :func:`lucidyolo.config.overrides.parse_overrides`.
The ``lucid`` group is a :class:`HabitGroup`: another trainer's command (``train``, ``val``,
``detect train``) is answered with ours (``lucid fit``, ``lucid eval``, ``lucid fit det``).

Help pages: a docstring's paragraphs are reflowed to the terminal (typer's rich mode keeps
the docstring's own line breaks, which a terminal of another width wraps raggedly), and a
flag (``--json``, ``--help``) shows no ``<bool>`` value, as it takes none.

:func:`renamed` keeps an old option spelling working for one release, with one
line on stderr naming the new one.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from lucidyolo.errors import ConfigError
from lucidyolo.tasks.default import DEFAULT_TASK

T = TypeVar("T")

# click's UsageError, whether typer vendors click (>= 0.29) or depends on it: BadParameter's base either way
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def command_options(command: Any, hidden: bool = False) -> list[str]:
    """The long options of a click command (``--data-root``, ...); ``hidden`` also lists deprecated spellings."""
    out: list[str] = []
    for param in command.params:
        if getattr(param, "param_type_name", "") == "option" and (hidden or not getattr(param, "hidden", False)):
            out += [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")]
    return out


def _command_path(ctx: Any) -> str:
    return ctx.command_path or "lucid"


def reflow(text: str | None) -> str | None:
    r"""A docstring with each paragraph on one line, for the help page to wrap at the terminal's width.

    A paragraph that starts with ``\b`` (click's "keep these lines") and anything after ``\f`` stay as written.
    """
    if not text:
        return text
    shown, cut, rest = inspect.cleandoc(text).partition("\f")
    paragraphs = [p if p.startswith("\b") else " ".join(ln.strip() for ln in p.splitlines())
                  for p in shown.split("\n\n")]
    return "\n\n".join(paragraphs) + cut + rest


def _flags_without_metavar(params: list[Any]) -> list[Any]:
    """The params, each flag shown without a value (typer's rich help prints ``<bool>`` after ``--json``)."""
    for param in params:
        if getattr(param, "is_flag", False) and getattr(param, "metavar", "") is None:
            param.metavar = ""
    return params


class HabitCommand(TyperCommand):
    """A Typer command whose unknown options and stray ``word=value`` arguments get our spelling as a did-you-mean."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_metavar(super().get_params(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        typed = list(args)  # click's parser consumes the list it is given
        try:
            return super().parse_args(ctx, args)
        except _UsageError as exc:
            err = self._did_you_mean(ctx, exc, typed)
            if err is None:
                raise
            raise err from None

    def _did_you_mean(self, ctx: Any, exc: Any, args: list[str]) -> ConfigError | None:
        from lucidyolo.config.habits import suggest

        options = command_options(self)
        words: list[tuple[str, str, str | None]] = []  # (word, token as typed, value)
        for i, token in enumerate(args):
            if token.startswith("--"):
                name, _, value = token.partition("=")
                if name not in command_options(self, hidden=True):
                    nxt = args[i + 1] if not value and i + 1 < len(args) and not args[i + 1].startswith("-") else None
                    words.append((name, token, value or nxt))
            elif "=" in token and not token.startswith("-"):
                name, _, value = token.partition("=")
                words.append((name, token, value))
        unknown = getattr(exc, "option_name", None)  # click's NoSuchOption (a short option, an abbreviation)
        if unknown and all(unknown != w for w, _, _ in words):
            words.append((unknown, unknown, None))
        for word, token, value in words:
            hint = suggest(word, options, config_keys=False, value=value)
            if hint is None:
                continue
            path = _command_path(ctx)
            why = (f"`{word.lstrip('-')}` is another trainer's word; here {hint.why}" if hint.habit
                   else f"`{word}` is not an option of `{path}`.")
            return ConfigError(
                f"Unknown argument {token!r} for `{path}`; did you mean `{hint.spelling}`?",
                why=why,
                fix=f"Write {hint.example(value)}. Run `{path} --help` for the options.",
            )
        return None


class HabitGroup(TyperGroup):
    """A Typer group whose unknown command, when it is another trainer's (``train``, ``val``), names ours."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = reflow(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_without_metavar(super().get_params(ctx))

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _UsageError:
            from lucidyolo.config.habits import command_for

            found = command_for(args[:2], _task_named, DEFAULT_TASK) if args and ctx.parent is None else None
            if found is None:
                raise
            command, why, example = found
            raise ConfigError(
                f"No such command {args[0]!r}; did you mean `{command}`?",
                why=why if why.startswith("`") else f"`{args[0]}` is another trainer's word; here {why}",
                fix=f"Write `{example}`. Run `{command.split()[0]} {command.split()[1]} --help` for its options.",
            ) from None


def renamed(old_value: T | None, new_value: T | None, old: str, new: str) -> T | None:
    """The value given under the new spelling, or under the old one with one deprecation line on stderr.

    Raises:
        ConfigError: both spellings were given.
    """
    if old_value is None:
        return new_value
    if new_value is not None:
        raise ConfigError(
            f"Both {new} and {old} were given.",
            why=f"{old} is the old spelling of {new}; one value is needed.",
            fix=f"Keep {new} only.",
        )
    from lucidyolo.cli.console import err_console

    err_console.print(
        f"warning: {old} is deprecated and will be removed in the next release; use {new} (same meaning).",
        highlight=False, markup=False, soft_wrap=True,
    )
    return old_value


def _task_named(word: str) -> str | None:
    """Our task for a task word or alias (``detect`` -> ``det``), by the registry; None for another word."""
    from lucidyolo.errors import PluginError
    from lucidyolo.tasks.registry import get_task

    try:
        return get_task(word).name
    except PluginError:
        return None
