"""The task a command takes when none is named (``--task``): the built-in detection task.

A constant of its own, importing nothing, so the CLI's option defaults read it
without loading the registry (``lucid --help`` stays fast)."""

DEFAULT_TASK = "det"
