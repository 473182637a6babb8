"""Words users bring from other YOLO trainers, and what this project calls them (torch-free).

``HABITS`` is the one table: a word as typed elsewhere (``epochs=2``, ``--imgsz 320``,
``batch=16``, ``data=coco8.yaml``) -> our spelling, with the reason ours differs.
The CLI does not *accept* these words (two spellings of one setting would make
configs, logs and bug reports ambiguous); it answers them with exit 2 and a
did-you-mean naming our key, so a habit costs one retry instead of a search.

:func:`suggest` is used in two places: :func:`lucidyolo.config.overrides.parse_overrides`
(the leftover tokens of ``lucid fit`` and ``lucid gate overfit``) and
:class:`lucidyolo.cli.vocabulary.HabitCommand` (every other command's
unknown options and stray ``word=value`` arguments). :func:`command_for` answers another
trainer's first words (``train``, ``val``, ``detect train``) with our command
(:class:`lucidyolo.cli.vocabulary.HabitGroup`, the ``lucid`` group itself).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Habit:
    """Our spelling of a word from another trainer.

    Args:
        key: our dotted config key (what ``lucid fit`` takes as ``key=value`` / ``--key value``), or None.
        why: why ours is spelled or shaped differently (printed as the error's "why").
        option: the command-line option that carries it on the commands that have one (``--img-size`` on
            ``eval``/``predict``/``export``); preferred over ``key`` where the command has it.
        value: a placeholder shown in the example instead of the user's value, where that value means something
            else here (``resume=True`` -> ``--resume RUN_DIR``).
    """

    key: str | None
    why: str
    option: str | None = None
    value: str | None = None


_AUGMENT = "augmentation strengths are per-variant recipe values; the optional overrides live in `augment`."
_OPTIM = "optimisation settings live in the `optim` section (the LightningModule owns its optimizer)."

HABITS: dict[str, Habit] = {
    "epochs": Habit(
        "trainer.max_epochs",
        "the run length is a Lightning Trainer argument, so it sits in the `trainer` section under Lightning's name.",
        option="--epochs",  # `lucid gate overfit --epochs`
    ),
    "imgsz": Habit(
        "data.img_size",
        "the input side is set by the data pipeline (letterbox, mosaic), and one spelling is used everywhere: "
        "the `data.img_size` key and every command's `--img-size`.",
        option="--img-size",
    ),
    "img": Habit("data.img_size", "the input side is spelled `img_size` everywhere (`--img-size` on commands).",
                 option="--img-size"),
    "batch": Habit(
        "data.batch_size",
        "the batch size is a data-loader setting: images per device per step (`optim.lr` is given at the global "
        "batch `optim.lr_reference_batch`; `optim.lr_scaling` says whether it follows yours).",
        option="--batch-size",  # `lucid eval --batch-size`
    ),
    "data": Habit(
        "data.data_root",
        "a dataset is a root folder (COCO, YOLO or DOTA layout, found by its files); a YOLO root's data.yaml, or "
        "the yaml file itself, is read from there.",
        option="--data-root",
    ),
    "model": Habit(
        "model.variant",
        "a model is a task (the TASK argument) and a size row n, s, m, l or x (`model.variant`); weights to start "
        "from are a separate key, `model.weights` (a file, a run folder or a URL).",
        value="n|s|m|l|x",
    ),
    "weights": Habit("model.weights", "starting weights are a `model` key: a file, a run folder or an http(s) URL."),
    "pretrained": Habit(
        "model.weights", "pretrained weights are named explicitly (a file, a run folder or a URL), never implied.",
        value="PATH",
    ),
    "resume": Habit(
        None, "resuming takes the run folder (or checkpoint) to continue exactly, not a true/false flag.",
        option="--resume", value="RUN_DIR",
    ),
    "device": Habit(
        "trainer.devices",
        "Lightning takes the device kind (`trainer.accelerator`: cpu, gpu, auto) and which/how many "
        "(`trainer.devices`: 1, [0, 1], auto) separately.",
        option="--device",  # `lucid eval/predict --device`
    ),
    "workers": Habit("data.num_workers", "loader processes are a data setting ('auto' sizes them to the machine)."),
    "project": Habit(
        "trainer.default_root_dir",
        "runs are written to `trainer.default_root_dir`/version_N (Lightning's folder and numbering; default "
        "runs/<task>).",
    ),
    "name": Habit(
        "trainer.default_root_dir",
        "run folders are numbered version_N inside `trainer.default_root_dir`; choose the parent folder instead.",
        value="DIR",
    ),
    "amp": Habit(
        "trainer.precision",
        "mixed precision is Lightning's `precision` ('auto': bf16-mixed where the device has it, else 32-true).",
        value="bf16-mixed",
    ),
    "cache": Habit("data.cache_train_images", "image caching is a data setting (true, false or 'auto')."),
    "save_txt": Habit(None, "`lucid predict` writes label files into a folder you name, one per image (or video "
                      "frame), each row ending in its confidence.", option="--save-txt", value="DIR"),
    "save_conf": Habit(None, "`lucid predict --save-txt` rows always end in the confidence.", option="--save-txt",
                       value="DIR"),
    "save_json": Habit(None, "`lucid predict` writes COCO results to a file you name.", option="--save-json",
                       value="FILE"),
    "lr0": Habit("optim.lr", "the peak learning rate is `optim.lr`, given at `optim.lr_reference_batch`; " + _OPTIM),
    "lrf": Habit("optim.lrf", _OPTIM),
    "momentum": Habit("optim.momentum", _OPTIM),
    "weight_decay": Habit("optim.weight_decay", _OPTIM),
    "warmup_epochs": Habit("optim.warmup_epochs", _OPTIM),
    "optimizer": Habit("optim.optimizer", _OPTIM),
    "close_mosaic": Habit("augment.close_mosaic", "the mosaic switch-off is part of the augmentation, in the "
                          "`augment` section."),
    "box": Habit("model.box_gain", "loss gains are `model.*_gain` (ours are normalised differently; see "
                 "docs/coming-from-other-yolo-trainers.md)."),
    "cls": Habit("model.cls_gain", "loss gains are `model.*_gain` (ours are normalised differently; see "
                 "docs/coming-from-other-yolo-trainers.md)."),
    "fliplr": Habit("augment.flip_lr", _AUGMENT),
    "mosaic": Habit("augment.mosaic", _AUGMENT + " `augment.use_mosaic false` turns mosaic off altogether."),
    "mixup": Habit("augment.mixup", _AUGMENT),
    "copy_paste": Habit("augment.copy_paste", _AUGMENT),
    "scale": Habit("augment.scale", _AUGMENT),
    "translate": Habit("augment.translate", _AUGMENT),
    "hsv_h": Habit("augment.hsv_h", _AUGMENT),
    "hsv_s": Habit("augment.hsv_s", _AUGMENT),
    "hsv_v": Habit("augment.hsv_v", _AUGMENT),
}
"""Another trainer's word -> our spelling and the reason (keys are compared lower-case, ``-`` read as ``_``)."""


@dataclass(frozen=True)
class Suggestion:
    """What to type instead of an unknown word: ``spelling`` is an option (``--data-root``) or a dotted key."""

    spelling: str
    why: str | None
    habit: bool
    value: str | None = None

    @property
    def is_option(self) -> bool:
        return self.spelling.startswith("-")

    def example(self, value: str | None) -> str:
        """How to write it, with the user's value when there was one."""
        shown = self.value or (value if value not in (None, "") else "VALUE")
        if self.is_option:
            return f"`{self.spelling} {shown}`" if value is not None or self.value else f"`{self.spelling}`"
        return f"`{self.spelling}={shown}` (or `--{self.spelling} {shown}`)"


@lru_cache(maxsize=1)
def _config_leaves() -> dict[str, str]:
    """Every leaf of the run config by its last name (``batch_size`` -> ``data.batch_size``), first wins."""
    from pydantic import BaseModel

    from lucidyolo.config.schema import RunConfig

    out: dict[str, str] = {}

    def walk(cls: type[BaseModel], prefix: str) -> None:
        for name, field in cls.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            else:
                out.setdefault(name, f"{prefix}{name}")

    walk(RunConfig, "")
    return out


PUBLISHED_NAME = re.compile(r"yolo26([nsmlx])(?:-(seg|obb|pose))?\.pt", re.IGNORECASE)
"""A published YOLO26 weights file's name: the variant letter, then the task suffix (none: detection)."""

_WEIGHTS_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors")


def _model_word(value: str | None, options: Collection[str], config_keys: bool) -> Suggestion | None:
    """``model=VALUE`` by what VALUE is: a checkpoint to run (``--checkpoint``), weights to start from, or a size."""
    if "--checkpoint" in options:  # eval, predict, export: the model is the checkpoint they run
        return Suggestion(
            "--checkpoint",
            "the model a command runs is `--checkpoint`: a lucid checkpoint, its run folder, or a published YOLO26 "
            "file (yolo26n.pt, yolo26s-seg.pt, ...); its task and variant come from the file.",
            True,
        )
    if not config_keys or not value:
        return None
    name = value.replace("\\", "/").rsplit("/", 1)[-1]
    published = PUBLISHED_NAME.fullmatch(name)
    if published is not None or name.lower().endswith(_WEIGHTS_SUFFIXES) or "://" in value:
        why = ("weights to start from are `model.weights` (a file, a run folder or a URL); the size row "
               "(`model.variant`) is read from the file when not given.")
        if published is not None:
            # the suffix (-seg, -obb, -pose) is a task name or alias `lucid fit` takes; none is the publisher's
            # detection model (the config layer does not consult the task registry)
            variant, suffix = published.group(1).lower(), (published.group(2) or "").lower()
            why += (f" {name} is the {suffix} model of variant {variant!r} (`lucid fit {suffix}`)." if suffix else
                    f" {name} is the publisher's detection model of variant {variant!r}.")
        return Suggestion("model.weights", why, True)
    if value.lower() in ("n", "s", "m", "l", "x"):
        return Suggestion("model.variant", HABITS["model"].why, True, value.lower())
    sized = re.fullmatch(r"yolo26([nsmlx])(?:-\w+)?\.ya?ml", name, flags=re.IGNORECASE)
    if sized is not None:  # a model definition file: here the TASK argument plus the size row
        return Suggestion("model.variant", "a model is the TASK argument (det, seg, obb, keypoints) and a size row "
                          "n, s, m, l or x (`model.variant`); the layers are lucid's own.", True,
                          sized.group(1).lower())
    return None


def suggest(word: str, options: Collection[str] = (), config_keys: bool = True,
            value: str | None = None) -> Suggestion | None:
    """Our spelling for an unknown word, or None when nothing is close.

    Order: a habit from :data:`HABITS` (the command's own option when it has it, else the dotted key); a close
    option of the command (a typo: ``--data-roo``, ``--confg``); with ``config_keys``, a config leaf of the same
    or a close name (``batch_size=8`` -> ``data.batch_size``).

    Args:
        word: the word as typed, with or without leading dashes (``--imgsz``, ``imgsz``).
        options: the command's own long options (``--data-root``, ``--config``, ...).
        config_keys: whether dotted config keys are an answer (commands that take overrides).
        value: the value given with the word, if any: ``model=best.ckpt`` names a checkpoint, ``model=s`` a size.
    """
    bare = word.lstrip("-")
    norm = bare.lower().replace("-", "_")
    if norm == "model" and (answer := _model_word(value, options, config_keys)) is not None:
        return answer
    habit = HABITS.get(norm)
    if habit is not None:
        if habit.option is not None and habit.option in options:
            return Suggestion(habit.option, habit.why, True, habit.value)
        if habit.key is not None and config_keys:
            return Suggestion(habit.key, habit.why, True, habit.value)
    long_options = [o for o in options if o.startswith("--")]
    close = difflib.get_close_matches(f"--{bare}", long_options, n=1, cutoff=0.6)
    if close:
        return Suggestion(close[0], None, False)
    if config_keys:
        leaves = _config_leaves()
        if norm in leaves:
            return Suggestion(leaves[norm], "every config key is written with its section, e.g. `data.batch_size`.",
                              False)
        close = difflib.get_close_matches(norm, list(leaves), n=1, cutoff=0.75)
        if close:
            key = leaves[close[0]]
            # a top-level key (`seed`) has no section: the word is a plain misspelling
            why = "every config key is written with its section." if "." in key else None
            return Suggestion(key, why, False)
    return None



COMMAND_HABITS: dict[str, tuple[str, str]] = {
    "train": ("fit", "training is `lucid fit TASK` (`fit` is Lightning's word), with the task as its argument "
              "and every config key as an option."),
    "val": ("eval", "scoring a checkpoint is `lucid eval --checkpoint RUN_DIR`; the task and classes come from "
            "the checkpoint."),
    "predict": ("predict", "`lucid predict --checkpoint RUN_DIR --source IMAGE` runs a checkpoint; the task comes "
                "from the checkpoint."),
    "export": ("export", "`lucid export --checkpoint RUN_DIR --format onnx` writes the deployed graph; the task "
               "comes from the checkpoint."),
}
"""Another trainer's mode word (its command) -> our command and why it is spelled so."""

_EXAMPLE = {"fit": "{task} --data-root DIR", "eval": "--checkpoint RUN_DIR --data-root DIR",
            "predict": "--checkpoint RUN_DIR --source IMAGE", "export": "--checkpoint RUN_DIR --format onnx"}


def command_for(words: Collection[str], task_of: Callable[[str], str | None] = lambda _word: None,
                default_task: str = "TASK") -> tuple[str, str, str] | None:
    """Our command for another trainer's first words, or None: ``(command, why, example)``.

    ``train`` -> ``lucid fit``; ``val`` -> ``lucid eval``; ``detect train`` -> ``lucid fit det`` (the task is
    an argument of ``fit`` here, and eval, predict and export read it from the checkpoint). ``task_of`` names
    our task for a word (the CLI passes the registry's names and aliases, which carry other trainers' words).
    """
    first, *rest = [str(w).lower() for w in words] or [""]
    task = task_of(first) if first else None
    mode = rest[0] if task is not None and rest else first if task is None else "train"
    if mode not in COMMAND_HABITS:
        return None
    ours, why = COMMAND_HABITS[mode]
    command = f"lucid {ours} {task}" if ours == "fit" and task is not None else f"lucid {ours}"
    if task is not None:
        typed = f"{first} {rest[0]}" if rest else first
        why = f"`{typed}` is another trainer's order (task, then mode); here the command comes first: " + why
    example = f"lucid {ours} " + _EXAMPLE[ours].format(task=task or default_task)
    return command, why, example
