"""Tiny plugin distributions installed into a temporary directory (a real entry point, no sys.path edits)."""

from __future__ import annotations

import os
from pathlib import Path
from textwrap import dedent


def write_distribution(root: Path, dist: str, module: str, entry_name: str, source: str) -> None:
    """Write ``module`` and ``{dist}-0.3.dist-info`` so importlib.metadata finds the entry point on PYTHONPATH."""
    (root / module).mkdir(parents=True, exist_ok=True)
    (root / module / "__init__.py").write_text(dedent(source))
    info = root / f"{dist.replace('-', '_')}-0.3.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(f"[lucidyolo.tasks]\n{entry_name} = {module}:SPEC\n")


SINGLE_DEVICE = """
    from lucidyolo.config.schema import ModelConfig
    from lucidyolo.tasks.api import MetricSpec, TaskCapabilities, TaskSpec

    class SoloConfig(ModelConfig):
        task: str = "solo"
        solo_gain: float = 1.0

    SPEC = TaskSpec(
        name="solo",
        config_model=SoloConfig,
        capabilities=TaskCapabilities(multi_device=False),
        metrics=MetricSpec(keys=("val/solo",)),
    )
"""

BROKEN = """
    raise RuntimeError("this plugin is broken on purpose")
"""

OLD_API = """
    from lucidyolo.config.schema import ModelConfig
    from lucidyolo.tasks.api import TaskSpec

    # built for plugin API version 1 (a bare int then)
    SPEC = TaskSpec(name="oldapi", config_model=ModelConfig, api_version=1)
"""

STEALS_ALIAS = """
    from lucidyolo.config.schema import ModelConfig
    from lucidyolo.tasks.api import TaskSpec

    SPEC = TaskSpec(name="thief", aliases=("detect",), config_model=ModelConfig)
"""


def env_with(root: Path, allow: str | None = None) -> dict[str, str]:
    env = {"PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if allow is not None:
        env["LUCIDYOLO_PLUGINS"] = allow
    return env
