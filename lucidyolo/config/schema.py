"""The run configuration schema (pydantic v2).

This is the only layer that knows the config. Every section forbids unknown
keys; :mod:`lucidyolo.config.resolve` turns pydantic's errors into messages
with a did-you-mean that names the full dotted key.

Task plugins extend :class:`ModelConfig` with their own options (two-phase
validation: ``model.task`` picks the plugin, the plugin's model validates the
``model`` section). Rules that compare fields live here too, as validators of
the run config class each task builds (:func:`run_config_class`): every path
that makes a config (the CLI, ``--resume``, checkpoint restore, Python) passes
through them, not only the CLI's resolution.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from lucidyolo.config.moved_keys import move_keys
from lucidyolo.data.layout_names import LAYOUTS
from lucidyolo.data.pixel_limit import DEFAULT_MAX_IMAGE_PIXELS

Variant = Literal["n", "s", "m", "l", "x"]


def _count_or_auto(v: int | str, least: int, reason: str) -> int | str:
    """``v`` unchanged when it is 'auto' or an int >= ``least``; else ValueError(``reason``), the field's own words."""
    if isinstance(v, int) and v < least:
        raise ValueError(reason)
    return v


class StrictModel(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(StrictModel):
    """The model: its task, size and classes, the weights it starts from (a task's subclass adds its loss
    gains and heads). Topology is never here: ``variant`` names a scale-table row."""

    task: str = Field("", description="task name (a registered task plugin; each task's section sets its own)")
    variant: Variant = Field("n", description="row of the scale table: n, s, m, l, x")
    num_classes: int | Literal["auto"] = Field(
        "auto", description="'auto' reads the dataset's class list; a number must match it"
    )
    compile_step: bool = Field(False, description="torch.compile the objective region (CUDA + det only)")
    weights: str | None = Field(
        None, description="start from these weights: a lucid checkpoint or weights file, a run directory (its best "
        "checkpoint), or an http(s):// / file:// URL (downloaded once into the cache; `#sha256=HEX` verifies it)",
    )
    weights_sha256: str | None = Field(
        None, description="expected SHA-256 of the `weights` file (hex); a mismatch deletes a download and stops",
    )
    class_match: Literal["name", "position"] = Field(
        "name", description="how `weights` classes meet the dataset's: by name (any order), or by index",
    )
    freeze: Literal["none", "backbone", "neck"] | Annotated[int, Field(ge=0)] = Field(
        "none", description="keep fixed: 'backbone', 'neck' (backbone + neck), or the first N trunk modules; "
        "BatchNorm statistics included",
    )
    freeze_epochs: Annotated[int, Field(gt=0)] | None = Field(
        None, description="release the frozen modules after this many epochs (None: frozen for the whole run)",
    )

    @field_validator("weights_sha256")
    @classmethod
    def _sha256_hex(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", v):
            raise ValueError("must be 64 hexadecimal digits (a SHA-256 digest)")
        return None if v is None else v.lower()

    @field_validator("num_classes")
    @classmethod
    def _positive_classes(cls, v: int | str) -> int | str:
        return _count_or_auto(v, 1, "must be a positive integer or 'auto'")


class OptimConfig(StrictModel):
    """How the weights move: the optimizer, the peak learning rate and its schedule, the warmup."""

    optimizer: Literal["musgd", "sgd"] = "musgd"
    lr: float = Field(0.01, gt=0, description="peak learning rate at `lr_reference_batch`, scaled to the batch")
    lr_reference_batch: int = Field(64, gt=0, description="batch size at which `lr` applies")
    lr_scaling: Literal["auto", "linear", "none"] = Field(
        "auto", description="lr vs global batch: 'auto' is linear at or above the reference batch, unscaled below"
    )
    lrf: float = Field(0.01, gt=0, le=1, description="final lr as a fraction of the peak")
    momentum: float = Field(0.95, ge=0, lt=1)
    weight_decay: float = Field(5e-4, ge=0)
    warmup_epochs: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="'auto': 3 epochs, at most 3% of the run's optimizer steps"
    )
    newton_schulz_dtype: Literal["float32", "auto", "bfloat16"] = Field(
        "float32", description="MuSGD's orthogonalisation dtype (the spec's float32 by default); 'auto': bfloat16 "
        "where the device multiplies it natively (CUDA, AMX CPUs), else float32",
    )


class EmaConfig(StrictModel):
    """The exponential moving average of the weights."""

    enabled: bool = Field(True, description="keep an exponential moving average of the weights (validation, "
                          "best.ckpt and the slim weights use it)")
    decay: float = Field(0.9999, gt=0, lt=1)
    tau: Annotated[float, Field(gt=0)] | Literal["auto"] = Field(
        "auto", description="EMA ramp in updates; 'auto': 2000, at most a quarter of the run's optimizer steps"
    )


class AugmentConfig(StrictModel):
    """Training augmentation: each strength overrides the variant's spec value (None keeps it), mosaic on or
    off, and the last epochs trained without it."""

    mosaic: float | None = Field(None, ge=0, le=1, description="mosaic probability")
    scale: float | None = Field(None, ge=0, lt=1, description="affine scale gain s: U[1 - s, 1 + s]")
    translate: float | None = Field(None, ge=0, le=0.5)
    mixup: float | None = Field(None, ge=0, le=1)
    copy_paste: float | None = Field(None, ge=0, le=1)
    hsv_h: float | None = Field(None, ge=0, le=0.5)
    hsv_s: float | None = Field(None, ge=0, le=1)
    hsv_v: float | None = Field(None, ge=0, le=1)
    flip_lr: float | None = Field(None, ge=0, le=1)
    use_mosaic: bool = Field(True, description="false: no mosaic at all (the strengths stay)")
    close_mosaic: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="epochs at the end trained without mosaic; 'auto': 10, at most 1/6 of the epochs"
    )

    STRENGTHS: ClassVar[tuple[str, ...]] = (
        "mosaic", "scale", "translate", "mixup", "copy_paste", "hsv_h", "hsv_s", "hsv_v", "flip_lr")
    """The keys that override a strength of the variant's recipe."""

    def as_overrides(self) -> dict[str, float]:
        """The strengths set (``{name: value}``), the variant's spec value for the others."""
        return {k: v for k in self.STRENGTHS if (v := getattr(self, k)) is not None}


_EXPLICIT = "explicit_path"
"""Field mark of the paths that name a split's files directly (its value: the split, ``train`` or ``val``)."""


class DataConfig(StrictModel):
    """Where the data is and how it is loaded."""

    data_root: Path | None = Field(None, description="dataset root; None trains on the built-in synthetic set")
    layout: str | None = Field(
        None, description="the dataset layout when the root matches several (a built-in reader's, or one the "
        "task's own reader names); None: probed"
    )
    LAYOUT_NAMES: ClassVar[tuple[str, ...]] = LAYOUTS
    """The names ``layout`` accepts; a task's run config adds its reader's (``TaskSpec.layouts``)."""

    @field_validator("layout")
    @classmethod
    def _known_layout(cls, v: str | None) -> str | None:
        if v is not None and v not in cls.LAYOUT_NAMES:
            raise ValueError(f"unknown layout {v!r}; the readers of this task know {', '.join(cls.LAYOUT_NAMES)}")
        return v

    img_size: int = Field(640, description="square network input side, a positive multiple of 32")
    batch_size: int = Field(16, gt=0)
    num_workers: int | Literal["auto"] = "auto"
    val_num_workers: int | None = Field(None, ge=0)
    prefetch_factor: int = Field(2, gt=0)
    persistent_workers: bool = False
    cache_train_images: bool | Literal["auto"] = Field(
        "auto", description="decode training images once into RAM; auto: when they take <= 1 GiB and <= 1/4 of free RAM"
    )
    device_hsv: bool = False
    skip_bad_images: bool = Field(
        False, description="train on the rest when image files are unreadable or truncated (listed in bad_images.txt)"
    )
    max_image_pixels: int = Field(
        DEFAULT_MAX_IMAGE_PIXELS, gt=0,
        description="largest image (width x height) read; a larger file is refused from its header before decoding, "
        "as a bad file (a decompression bomb). Default: Pillow's limit, ~179 MP. Cut gigapixel scenes into tiles "
        "(`lucid data tile dota`) rather than raising it",
    )
    plot_batches: int = Field(
        3, ge=0, description="batches drawn into the run folder: train_batch*.jpg, val_batch*_labels/_pred.jpg; 0: none"
    )
    synthetic_images: int = Field(240, gt=1, description="size of the built-in synthetic set (no data_root)")
    train_split: str = "train"
    val_split: str = "val"
    train_images: Path | None = Field(None, json_schema_extra={_EXPLICIT: "train"},
                                      description="a training image folder (with train_ann_file) instead of a root")
    train_ann_file: Path | None = Field(None, json_schema_extra={_EXPLICIT: "train"},
                                        description="the COCO JSON of train_images")
    val_images: Path | None = Field(None, json_schema_extra={_EXPLICIT: "val"},
                                    description="a validation image folder (with val_ann_file)")
    val_ann_file: Path | None = Field(None, json_schema_extra={_EXPLICIT: "val"},
                                      description="the COCO JSON of val_images")

    @classmethod
    def explicit_path_keys(cls, which: str) -> tuple[str, ...]:
        """The keys that name split ``which`` (``train``/``val``) without a root, read from the fields' marks."""
        return tuple(
            name for name, f in cls.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get(_EXPLICIT) == which
        )

    @classmethod
    def source_keys(cls) -> tuple[str, ...]:
        """Keys that name a training dataset: setting any of them turns the embedded synthetic set off."""
        return ("data_root", *cls.explicit_path_keys("train"))

    def explicit_paths(self, which: str) -> dict[str, Path]:
        """``{key: path}`` of the explicit paths of split ``which`` that are set."""
        return {k: v for k in self.explicit_path_keys(which) if (v := getattr(self, k)) is not None}

    @field_validator("img_size")
    @classmethod
    def _multiple_of_32(cls, v: int) -> int:
        if v <= 0 or v % 32:
            raise ValueError(f"must be a positive multiple of 32 (the largest stride); got {v}")
        return v

    @field_validator("num_workers")
    @classmethod
    def _workers(cls, v: int | str) -> int | str:
        return _count_or_auto(v, 0, "must be >= 0 or 'auto'")


def device_count(devices: int | str | list[int]) -> int | None:
    """How many devices ``trainer.devices`` asks for: a count, -1 for every device of the machine, None for
    'auto' (the accelerator decides: every GPU, one CPU).

    The one reader of the key's forms (an int, a list of indices, a string count, a comma-separated list of
    indices, ``"-1"``, ``"auto"``): the schema's rules and the engine's processes-per-host both ask here, so
    ``[0, 1]``, ``"0,1"`` and ``2`` mean the same everywhere.

    Raises:
        ValueError: a value Lightning would refuse too (a word, a count of 0 or below -1).
    """
    if isinstance(devices, list):
        return len(devices)
    text = str(devices).strip()
    if text == "auto":
        return None
    if "," in text:  # Lightning's indices string: "0,1" is two devices, "0," device 0
        return len([p for p in text.split(",") if p.strip()])
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count == 0 or count < -1:
        raise ValueError(
            "is not a device count; use a number (2), -1 for every device, a list of indices ([0, 1]), "
            "a comma-separated string ('0,1') or 'auto'"
        )
    return count


class TrainerConfig(StrictModel):
    """The subset of Lightning ``Trainer`` arguments we support."""

    max_epochs: int = Field(50, gt=0)
    devices: int | str | list[int] = Field(
        "auto", description="a count, -1 (every device), indices ([0, 1] or '0,1') or 'auto'"
    )
    accelerator: str = "auto"
    strategy: str = "auto"
    num_nodes: int = Field(1, gt=0)
    sync_batchnorm: bool = Field(
        True, description="BatchNorm statistics over the global batch when training in several processes (no-op in "
        "one): 2 processes at batch 4 then train as 1 at batch 8",
    )
    precision: str = Field(
        "auto", description="Lightning precision, or 'auto': bf16-mixed where the device multiplies bfloat16 in "
        "hardware (AMX CPUs, CUDA >= 8.0), else 32-true; validation always runs in float32",
    )
    threads: int | Literal["auto"] = Field(
        "auto", description="torch CPU threads per training process: 'auto' takes the cores idle at the start "
        "(OMP_NUM_THREADS when set), shared among this host's processes; a run records the number it used",
    )
    default_root_dir: Path | None = Field(None, description="defaults to ./runs/<task>")
    deterministic: bool = True
    gradient_clip_val: float = Field(10.0, ge=0)
    accumulate_grad_batches: int = Field(1, gt=0)
    limit_train_batches: int | float | None = None
    limit_val_batches: int | float | None = None
    check_val_every_n_epoch: int = Field(1, gt=0)
    log_every_n_steps: int = Field(10, gt=0)

    @field_validator("threads")
    @classmethod
    def _threads(cls, v: int | str) -> int | str:
        return _count_or_auto(v, 1, "is not a thread count; use a number >= 1 or 'auto'")

    @field_validator("devices")
    @classmethod
    def _devices(cls, v: int | str | list[int]) -> int | str | list[int]:
        device_count(v)  # refuses what no Trainer understands; the value stays as written
        return v


class RunConfig(StrictModel):
    """A whole run, in sections by concern: ``model``, ``optim``, ``ema``, ``augment``, ``data``, ``trainer``,
    and ``seed``."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    ema: EmaConfig = Field(default_factory=EmaConfig)
    augment: AugmentConfig = Field(default_factory=AugmentConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    seed: int = Field(0, ge=0, le=2**32 - 1)
    """numpy's and torch's seeding take 0 .. 2**32 - 1; a negative seed used to pass here and crash in seeding."""

    @classmethod
    def top_level_keys(cls) -> frozenset[str]:
        """The keys outside every section (``seed``): the fields whose value is not a section model."""
        return frozenset(
            name for name, f in cls.model_fields.items()
            if not (isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel))
        )

    @classmethod
    def section_names(cls) -> tuple[str, ...]:
        """The sections (``model``, ``data``, ``trainer``), in declaration order."""
        return tuple(name for name in cls.model_fields if name not in cls.top_level_keys())

    multi_device: ClassVar[bool] = True
    """False when the task's capabilities say it trains in one process (set by :func:`run_config_class`)."""

    @model_validator(mode="before")
    @classmethod
    def _pre_1_0_keys(cls, data: Any) -> Any:
        """A config stored before 1.0 (a run's ``config.yaml``, a checkpoint) has its keys moved to the
        sections they live in now, silently (the sources a user writes are moved, with a warning, by
        :func:`lucidyolo.config.resolve.resolve_config`)."""
        return move_keys(data, warn=False)

    @model_validator(mode="after")
    def _one_process(self, info: ValidationInfo) -> RunConfig:
        """A task with ``multi_device=False`` asks for one device in one process.

        'auto' becomes 1: Lightning's 'auto' takes every GPU, which would refuse the
        default config on any multi-GPU machine. A config that does not train
        (validation context ``{"trains": False}``: a checkpoint restored for eval,
        predict or export) is brought to one process instead of refused: how the
        run was trained says nothing about how its model is used.
        """
        if type(self).multi_device:
            return self
        t, task = self.trainer, self.model.task
        count = device_count(t.devices)
        several = any(s in t.strategy.lower() for s in _MULTI_PROCESS_STRATEGIES) or t.num_nodes != 1
        if not (info.context or {}).get("trains", True) and (count != 1 or several):
            t.devices, t.strategy, t.num_nodes = 1, "auto", 1
            return self
        if count is None:
            t.devices = 1
            count = 1
        why = (
            f"task {task!r} declares multi_device=False: its epoch metric ranks every detection of the split "
            "together and is not gathered across ranks, so each rank would report a per-rank number that looks "
            "plausible and is wrong."
        )
        if count != 1:
            asks = "every device of the machine" if count == -1 else f"{count} devices"
            raise rule_error(
                f"`trainer.devices` = {t.devices!r} asks for {asks}, but task {task!r} trains on exactly one.",
                why=why, fix="Set `trainer.devices` to 1 (and a larger batch size if you want more throughput).",
            )
        if several:
            raise rule_error(
                f"`trainer.strategy` = {t.strategy!r} / `trainer.num_nodes` = {t.num_nodes} starts several "
                f"processes, but task {task!r} trains in one.",
                why=why, fix="Set `trainer.strategy` to auto and `trainer.num_nodes` to 1.",
            )
        return self


_MULTI_PROCESS_STRATEGIES = ("ddp", "fsdp", "deepspeed")

RULE_ERROR = "config_rule"
"""pydantic error type of a rule between fields; its context holds the rule's ``what``, ``why`` and ``fix``."""


def rule_error(what: str, why: str, fix: str) -> PydanticCustomError:
    """A broken rule as a pydantic error: a ``ValidationError`` in Python (its message says what and how to
    fix it), one :class:`~lucidyolo.errors.ConfigError` with all three parts through
    :func:`lucidyolo.config.resolve.format_validation_error`."""
    return PydanticCustomError(RULE_ERROR, "{what} Fix: {fix}", {"what": what, "why": why, "fix": fix})


@cache
def run_config_class(task: str, model: type[ModelConfig], multi_device: bool = True,
                     data: type[DataConfig] = DataConfig, trainer: type[TrainerConfig] = TrainerConfig,
                     layouts: tuple[str, ...] = ()) -> type[RunConfig]:
    """The run config class of a task: ``model`` validates the ``model`` section, ``multi_device`` switches
    the single-process rule on (``TaskSpec.run_config`` passes the task's capabilities); ``data`` and
    ``trainer`` are the task's subclasses of those sections where it sets its own defaults (API 2.5);
    ``layouts`` the names its own reader accepts in ``data.layout`` beside the built-in ones.

    Cached, so that one task's configs are instances of one class.
    """
    if layouts:
        extended: Any = create_model(f"{data.__name__}_{task}", __base__=data)
        extended.LAYOUT_NAMES = (*data.LAYOUT_NAMES, *(n for n in layouts if n not in data.LAYOUT_NAMES))
        data = extended
    cls: Any = create_model(f"RunConfig_{task}", __base__=RunConfig, model=(model, ...),
                            data=(data, Field(default_factory=data)), trainer=(trainer, Field(default_factory=trainer)))
    cls.multi_device = multi_device
    return cls  # type: ignore[no-any-return]
