"""Discovery of task plugins through the ``lucidyolo.tasks`` entry-point group.

- Lazy: :func:`task_names` reads entry-point names only; specs are loaded on demand.
- Deduplicated: editable installs can list the same entry point twice.
- Fault-isolated: a plugin that raises on import is recorded with its error and
  breaks nothing else; ``lucid plugins`` shows the error.
- Version-gated: a spec whose ``api_version`` major differs from
  ``PLUGIN_API_VERSION``'s is refused naming both versions; a newer minor loads
  with a warning (``PluginRecord.warning``, shown by ``lucid plugins``).
- ``LUCIDYOLO_PLUGINS``: unset = every external plugin loads; otherwise a
  comma-separated allow-list of entry-point or distribution names (empty = none).
  Built-in tasks (from the ``lucidyolo`` distribution) always load.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points

from lucidyolo.errors import PluginError
from lucidyolo.tasks.api import ADAPTED_MAJORS, TASK_NAME_RE, TaskSpec, api_version_problem
from lucidyolo.tasks.api_roles import Task, from_flat

GROUP = "lucidyolo.tasks"
ALLOW_ENV = "LUCIDYOLO_PLUGINS"
_OWN_DIST = "lucidyolo"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class PluginRecord:
    """One discovered entry point and the outcome of loading it."""

    name: str
    value: str
    distribution: str | None
    version: str | None
    builtin: bool
    spec: TaskSpec | None = None
    error: str | None = None
    status: str = "not loaded"  # "ok" | "error" | "skipped" | "conflict" | "not loaded"
    warning: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "aliases": list(self.spec.aliases) if self.spec else [],
            "distribution": self.distribution,
            "version": self.version,
            "api_version": _version_str(self.spec.api_version) if self.spec else None,
            # written for an older major of the plugin API, loaded through the adapter
            "adapted": bool(self.spec and self.spec.api_version[0] in ADAPTED_MAJORS) if self.spec else None,
            "builtin": self.builtin,
            "entry_point": self.value,
            "status": self.status,
            "multi_device": self.spec.capabilities.multi_device if self.spec else None,
            "trainable": self.spec.trainable if self.spec else None,
            "decode_paths": list(self.spec.decode_paths) if self.spec else [],
            "eval_options": [
                {"name": o.name, "default": o.default, "help": o.help} for o in self.spec.eval_options
            ] if self.spec else [],
            "error": self.error,
            "warning": self.warning,
        }


def _version_str(version: object) -> str:
    return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)


def _allow_list() -> set[str] | None:
    raw = os.environ.get(ALLOW_ENV)
    if raw is None:
        return None
    return {_norm(p.strip()) for p in raw.split(",") if p.strip()}


def _dist_of(ep: EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        return dist.metadata["Name"], dist.version
    except Exception:  # a broken METADATA file must not break discovery
        return None, None


def _unique_entry_points() -> list[tuple[EntryPoint, str | None, str | None]]:
    seen: set[tuple[str, str, str | None]] = set()
    out = []
    for ep in entry_points(group=GROUP):
        dist, version = _dist_of(ep)
        key = (ep.name, ep.value, _norm(dist) if dist else None)
        if key in seen:  # editable installs list the same entry point twice
            continue
        seen.add(key)
        out.append((ep, dist, version))
    return out


def task_names() -> list[str]:
    """Names of all registered tasks without importing any plugin (for ``--help``)."""
    return sorted({ep.name for ep, _, _ in _unique_entry_points()})


def _load_one(ep: EntryPoint, rec: PluginRecord) -> None:
    try:
        obj = ep.load()
    except BaseException as exc:  # fault isolation: any import failure is recorded
        if isinstance(exc, KeyboardInterrupt):
            raise
        rec.status, rec.error = "error", f"{type(exc).__name__}: {exc}"
        return
    if not isinstance(obj, Task | TaskSpec):
        rec.status, rec.error = "error", f"entry point gives {type(obj).__name__}, not a lucidyolo Task (or TaskSpec)"
        return
    problem = api_version_problem(obj.api_version)
    if problem is not None and problem[0] == "error":
        rec.status, rec.error = "error", problem[1]
        return
    if problem is not None:
        rec.warning = problem[1]
    # a 3.x Task is compiled to the engine's record; a flat TaskSpec (API 2.x) goes through the adapter
    obj = obj.record() if isinstance(obj, Task) else from_flat(obj).record()
    if obj.name != ep.name:
        rec.status, rec.error = "error", f"entry point name {ep.name!r} differs from TaskSpec.name {obj.name!r}"
        return
    if not TASK_NAME_RE.match(obj.name):
        rec.status, rec.error = "error", f"invalid task name {obj.name!r} (lower-case letters, digits, _)"
        return
    rec.spec, rec.status = obj, "ok"


@lru_cache(maxsize=1)
def discover() -> tuple[PluginRecord, ...]:
    """Load every allowed plugin once and return one record per unique entry point."""
    allow = _allow_list()
    records: list[PluginRecord] = []
    for ep, dist, version in _unique_entry_points():
        builtin = dist is not None and _norm(dist) == _OWN_DIST
        rec = PluginRecord(ep.name, ep.value, dist, version, builtin)
        if not builtin and allow is not None and _norm(ep.name) not in allow and (
            dist is None or _norm(dist) not in allow
        ):
            rec.status = "skipped"
            rec.error = f"not in {ALLOW_ENV}"
        else:
            _load_one(ep, rec)
        records.append(rec)
    _mark_conflicts(records)
    return tuple(records)


def _mark_conflicts(records: list[PluginRecord]) -> None:
    """Two loaded plugins claiming the same name or alias are both refused, naming each other."""
    claims: dict[str, list[PluginRecord]] = {}
    for rec in records:
        if rec.spec is None:
            continue
        for key in (rec.spec.name, *rec.spec.aliases):
            claims.setdefault(key, []).append(rec)
    for key, recs in claims.items():
        if len(recs) < 2:
            continue
        who = ", ".join(f"{r.value} ({r.distribution or 'unknown distribution'})" for r in recs)
        for rec in recs:
            rec.status = "conflict"
            rec.error = f"task name or alias {key!r} is claimed by several plugins: {who}"


def get_task(name: str) -> TaskSpec:
    """The spec of a task by name or alias.

    Raises:
        PluginError: unknown name (with a suggestion), a broken, conflicting,
            skipped or incompatible plugin.
    """
    records = discover()
    for rec in records:
        names = {rec.name, *(rec.spec.aliases if rec.spec else ())}
        if name not in names:
            continue
        if rec.spec is not None and rec.status == "ok":
            return rec.spec
        raise PluginError(
            f"Task {name!r} cannot be used: {rec.error}.",
            why=f"its plugin ({rec.value}, distribution {rec.distribution}) did not load cleanly.",
            fix="Run `lucid plugins` for details; fix or reinstall the plugin, or check LUCIDYOLO_PLUGINS.",
        )
    known = sorted({n for r in records if r.status == "ok" and r.spec for n in (r.name, *r.spec.aliases)})
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise PluginError(
        f"Unknown task {name!r}.{hint}",
        why=f"no installed plugin registers it; known tasks: {', '.join(known) or 'none'}.",
        fix="Use one of the known tasks, or install the plugin that provides it (`lucid plugins` lists them).",
    )


def task_for_fields(fields: tuple[str, ...]) -> TaskSpec | None:
    """The built-in task whose label fields are exactly ``fields`` (``lucid data check`` without ``--task``).

    Fields every reader can do without (``fill_missing``, e.g. crowd flags) do not decide.
    """
    from lucidyolo.structures.fields import field_specs

    def labels_of(names: tuple[str, ...]) -> set[str]:
        return {f.name for f in field_specs(names) if not all(a.fill_missing for a in f.attrs)}

    want = labels_of(tuple(fields))
    for rec in discover():
        if rec.builtin and rec.spec is not None and rec.status == "ok" and labels_of(rec.spec.fields) == want:
            return rec.spec
    return None


def preset_packages() -> tuple[str, ...]:
    """The ``presets_package`` of every loaded task (config resolution finds another task's preset by name)."""
    return tuple(dict.fromkeys(r.spec.presets_package for r in discover()
                               if r.status == "ok" and r.spec is not None and r.spec.presets_package))
