"""One vocabulary across commands: did-you-mean for other trainers' words, and renamed options (torch-free).

Every command is a :class:`HabitCommand`: an unknown option or a stray ``word=value``
argument that is another trainer's word (``--imgsz``, ``batch=16``, see
:data:`lucidyolo.config.habits.HABITS`) or a typo of one of the command's own
options ends with exit 2 and a did-you-mean, through the same
:class:`~lucidyolo.errors.UserError` printer as every other mistake.
``lucid fit`` and ``lucid gate overfit`` take dotted overrides, so their
leftover tokens are answered by :func:`lucidyolo.config.overrides.parse_overrides`.

:func:`renamed` keeps an old option spelling working for one release, with one
line on stderr naming the new one.
"""

from __future__ import annotations

from typing import Any, TypeVar

import typer
from typer.core import TyperCommand

from lucidyolo.errors import ConfigError

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


class HabitCommand(TyperCommand):
    """A Typer command whose unknown options and stray ``word=value`` arguments get our spelling as a did-you-mean."""

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
            hint = suggest(word, options, config_keys=False)
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
