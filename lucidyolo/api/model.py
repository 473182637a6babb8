"""``Model``: train, score, run and export a lucid-yolo model from Python.

::

    from lucidyolo import Model

    model = Model.new("det", variant="n")                    # untrained; any task or alias, plugins too
    fit = model.fit("data/shapes", trainer__max_epochs=10)   # as `lucid fit det --data-root ...`, same epoch lines
    report = model.evaluate()                                # as `lucid eval` on the run's val split (or .val())
    report.box.map, report.box.map50, report.box.maps        # mAP50-95, mAP50, per class
    (pred,) = model("photo.jpg", conf=0.25)                  # as `lucid predict` (model.predict)
    pred.boxes.xyxy, pred.boxes.conf, pred.boxes.cls         # (N, 4) px, (N,), (N,) int64; model.names[int(c)]
    pred.save()                                              # photo_pred.jpg
    model.export("onnx")

    tuned = Model("runs/det/version_0")                      # a run folder, a checkpoint, a weights file or URL
    tuned.fit("data/other", trainer={"max_epochs": 5})       # fine-tunes from it (model.weights)

Every step is the library call behind a ``lucid`` command, resolved and checked
the same way: a user mistake raises :class:`~lucidyolo.errors.UserError`
(``ConfigError``, ``DataError``, ``PluginError``, ``NotAvailableError``) with
what / why / fix, the errors on which ``lucid`` exits 2.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lucidyolo.api.results import EvalReport, ExportResult, FitResult
from lucidyolo.errors import ConfigError, DataError, NotAvailableError, RunInterrupted, UserError

if TYPE_CHECKING:
    from lucidyolo.api.prediction import FieldLayout, Prediction
    from lucidyolo.config.schema import RunConfig
    from lucidyolo.engine.commands.predict import Predictor
    from lucidyolo.engine.weights.restore import Restored
    from lucidyolo.tasks.api import TaskSpec

class Model:
    """A model of one task: untrained (:meth:`new`) or backed by a checkpoint (:meth:`load`, or after :meth:`fit`).

    ``Model(source)`` is :meth:`load` (a checkpoint, run folder, weights file or URL); :meth:`new`
    describes an untrained one.
    """

    def __init__(self, source: str | Path) -> None:
        """The trained model in ``source``, as :meth:`load` (which see for what it accepts and raises)."""
        loaded = type(self).load(source)
        self.__dict__.update(loaded.__dict__)

    @classmethod
    def _build(cls, spec: TaskSpec, *, options: Mapping[str, Any] | None = None,
               names: Sequence[str] | None = None, restored: Restored | None = None,
               checkpoint: Path | None = None) -> Model:
        """The internal constructor behind :meth:`new`, :meth:`load` and ``Model(source)``."""
        self = cls.__new__(cls)
        self._spec = spec
        self._options: dict[str, Any] = dict(options or {})  # the config sections Model.new was given
        self._names = list(names) if names is not None else None
        self._restored = restored
        self._checkpoint = checkpoint
        self._predictors: dict[tuple[str, int | None, str], Predictor] = {}
        self._layout: dict[str, FieldLayout] | None = None
        return self

    # ------------------------------------------------------------------ construction

    @classmethod
    def new(cls, task: str, variant: str = "n", num_classes: int | str = "auto", names: Sequence[str] | None = None,
            **model_options: Any) -> Model:
        """A fresh, untrained model description; :meth:`fit` trains it from scratch.

        Args:
            task: a task name or alias (``det``, ``seg``, ``obb``, ``keypoints``, a plugin's, e.g. ``cls``).
            variant: row of the scale table, ``n``, ``s``, ``m``, ``l`` or ``x``.
            num_classes: ``"auto"`` (the dataset's class count) or a number the dataset must match.
            names: the class names the training data must declare, in order (checked before training).
            **model_options: any other key of the task's ``model`` config section, or of ``optim``, ``ema``
                or ``augment`` by its bare name (``lr=0.02`` is ``optim.lr``, ``num_keypoints=17``,
                ``weights="runs/det/version_3"``...).

        These values win over config files and presets at :meth:`fit`, as dotted overrides do in ``lucid fit``.

        Raises:
            PluginError: unknown task (with a did-you-mean) or a broken plugin.
            ConfigError: an unknown ``model`` key or a bad value (checked now, as ``lucid fit`` checks it).
        """
        from lucidyolo.config.resolve import resolve_config
        from lucidyolo.tasks.registry import get_task

        spec = get_task(task)
        if names is not None:
            names = [str(n) for n in names]
            if not names:
                raise ConfigError("Model.new got an empty list of class names.", fix="Pass names=None or the names.")
            if num_classes == "auto":
                num_classes = len(names)
            elif num_classes != len(names):
                raise ConfigError(
                    f"Model.new got num_classes={num_classes} and {len(names)} class names.",
                    why="each class needs exactly one name.",
                    fix="Drop num_classes (the names count them) or give as many names.",
                )
        options = _by_section(spec, {"variant": variant, "num_classes": num_classes, **model_options})
        resolve_config(spec, overrides=options)  # every key and value checked now, not after loading data
        return cls._build(spec, options=options, names=names)

    @classmethod
    def load(cls, source: str | Path) -> Model:
        """A trained model from a checkpoint, a run directory (its ``best.ckpt``, else ``last.ckpt``),
        a weights file from ``lucid export --format weights``, or an ``http(s)://`` / ``file://`` URL
        (downloaded once into the cache; a ``#sha256=HEX`` suffix is verified).

        The task, variant, class names and training size come from the file.

        Raises:
            UserError: the path does not exist, holds no checkpoint, is not a lucid checkpoint, is unsafe,
                or its weights do not fit the model its config describes.
        """
        from lucidyolo.engine.weights.restore import restore
        from lucidyolo.engine.weights.weights_source import checkpoint_in, is_url, resolve_weights

        text = str(source)
        if is_url(text) or "#sha256=" in text:
            path = resolve_weights(text)
        else:
            path = Path(text).expanduser()
            if path.is_dir():
                path = checkpoint_in(path, "Model.load")
        restored = restore(path)
        return cls._build(restored.spec, restored=restored, checkpoint=path)

    # ------------------------------------------------------------------ what it is

    @property
    def spec(self) -> TaskSpec:
        """The task plugin's spec."""
        return self._spec

    @property
    def task(self) -> str:
        """The task's name (an alias given to :meth:`new` resolves to it)."""
        return self._spec.name

    @property
    def checkpoint(self) -> Path | None:
        """The checkpoint or weights file behind the model; None until it is trained."""
        return self._checkpoint

    @property
    def trained(self) -> bool:
        return self._checkpoint is not None

    @property
    def config(self) -> RunConfig | None:
        """The run config stored in the checkpoint (None for an untrained model)."""
        return self._restored.config if self._restored is not None else None

    @property
    def variant(self) -> str:
        if self._restored is not None:
            return str(self._restored.config.model.variant)
        return str(self._options.get("model", {}).get("variant", "n"))

    @property
    def class_names(self) -> list[str]:
        """The classes, in label order: the checkpoint's, or the names given to :meth:`new` (else ``[]``)."""
        if self._restored is not None:
            return list(self._restored.checkpoint["lucid"].get("class_names") or [])
        return list(self._names or [])

    @property
    def names(self) -> dict[int, str]:
        """The classes as ``{index: name}`` (:attr:`class_names` as a dict; ``names[int(cls)]``)."""
        return dict(enumerate(self.class_names))

    @property
    def img_size(self) -> int | None:
        """The input size the model was trained at (None for an untrained model)."""
        return int(self._restored.config.data.img_size) if self._restored is not None else None

    @property
    def torch_model(self) -> Any:
        """The restored ``torch.nn.Module`` (eval mode, EMA weights when the checkpoint has them)."""
        return self._require_restored("torch_model").model

    def __repr__(self) -> str:
        where = f"checkpoint={str(self._checkpoint)!r}" if self._checkpoint else "untrained"
        return f"Model(task={self.task!r}, variant={self.variant!r}, {where})"

    # ------------------------------------------------------------------ training

    def fit(self, data_root: str | Path | None = None, *, config: str | Path | Sequence[str | Path] | None = None,
            weights: str | Path | None = None, verbose: bool = True, log: Callable[[str], None] | None = None,
            progress_bar: bool = False, **overrides: Any) -> FitResult:
        """Train, as ``lucid fit TASK``; afterwards the model is the run's best checkpoint.

        Args:
            data_root: a dataset root (COCO, YOLO, DOTA, or the layout a plugin reads). None, without
                ``config`` and without a dataset override: the task's embedded synthetic recipe, as a
                bare ``lucid fit TASK``.
            config: packaged preset names (``"det_nano_smoke.yaml"``) and/or YAML files, lowest first.
            weights: start from these weights (``model.weights``): a checkpoint, weights file, run
                directory or URL; classes are matched by name. A loaded model starts from its own
                checkpoint unless this (or ``model__weights``) says otherwise.
            verbose: print the run's status lines and one line per epoch (losses, lr, img/s, the task's
                metrics, time left) to stdout, as ``lucid fit`` does; False prints nothing.
            log: receives those lines as plain text instead of stdout (whatever ``verbose`` says).
            progress_bar: show Lightning's progress bar.
            **overrides: config overrides, highest precedence, in any of three spellings:
                a section dict ``trainer={"max_epochs": 2}``, a ``section__key`` keyword
                ``trainer__max_epochs=2``, or a dotted key ``**{"trainer.max_epochs": 2}``.

        A model that is trained already (loaded, or fitted before) starts a new run from its own
        checkpoint: ``model.weights`` is that file and ``model.variant`` its variant.

        Precedence, as in ``lucid fit``: schema defaults < presets < config files < :meth:`new`'s
        options (a loaded model: its variant and weights) < ``overrides`` < ``weights`` < ``data_root``.

        Returns:
            :class:`FitResult` (``run_dir``, ``best``, ``metrics``, ``transfer``, ``config``).

        Raises:
            ConfigError: an unknown key (with a did-you-mean) or a bad value, before anything runs.
            DataError: the dataset cannot be read, or its classes differ from :meth:`new`'s ``names``.
            NotAvailableError: the task's plugin provides no training hooks.
            KeyboardInterrupt: Ctrl-C (SIGINT) stopped the run: its message is ``lucid fit``'s one line with
                the command that continues from the last finished epoch (also its ``resume`` attribute);
                the line is printed to stderr too unless ``verbose=False``.
            RunInterrupted: SIGTERM (or another handled signal) stopped the run (a ``BaseException``).
        """
        from lucidyolo.api.overrides import nest_overrides
        from lucidyolo.config.overrides import deep_merge
        from lucidyolo.config.resolve import resolve_config

        spec = self._spec
        configs = [str(config)] if isinstance(config, str | Path) else [str(c) for c in config or []]
        base: dict[str, Any] = {k: dict(v) for k, v in self._options.items()}
        if self._checkpoint is not None:  # fine-tune: this model's architecture, started from its weights
            base = {"model": {"variant": self.variant, "weights": str(self._checkpoint)}}
        merged = deep_merge(base, nest_overrides(overrides))
        if weights is not None:
            merged = deep_merge(merged, {"model": {"weights": str(weights)}})
        root = Path(data_root).expanduser() if data_root is not None else None
        data = merged.get("data")
        from lucidyolo.config.schema import DataConfig

        # any key that names a dataset turns the embedded synthetic recipe off (as in `lucid fit`)
        embedded = (not configs and root is None and spec.synthetic_preset is not None
                    and not (isinstance(data, dict) and any(k in data for k in DataConfig.source_keys())))
        if embedded:  # the embedded default of `lucid fit TASK`: a short recipe on the task's synthetic set
            configs = [spec.synthetic_preset]  # type: ignore[list-item]
        from lucidyolo.tasks.registry import get_task, preset_packages

        cfg = resolve_config(spec, configs, merged, root, get_task=get_task, other_presets=preset_packages())
        missing = spec.missing_hooks(*spec.FIT_HOOKS)
        if missing:
            raise NotAvailableError(
                f"Task {spec.name!r} cannot be trained yet: its plugin does not provide {', '.join(missing)}.",
                why=f"the {spec.name} task's plugin declares the task but not its training hooks yet.",
                fix="Nothing was run.",
            )
        if self._names is not None and self._checkpoint is None:
            self._check_names(cfg)
        from lucidyolo.config.resolve import config_to_yaml
        from lucidyolo.engine.loop.fit import run_fit

        sink = log if log is not None else (_stdout if verbose else None)
        try:
            out = run_fit(spec, cfg, log=_plain(sink) if sink is not None else None, progress_bar=progress_bar)
        except RunInterrupted as stop:
            if stop.signum != signal.SIGINT:
                raise
            # Ctrl-C: the CLI's line instead of the ~50 frames of Lightning's loop, as a KeyboardInterrupt so a
            # script or notebook stops; `from None` leaves a traceback of the caller's line and this one
            message = stop_message(stop)
            if verbose:
                print(message, file=sys.stderr, flush=True)
            interrupted = KeyboardInterrupt(message)
            interrupted.resume = stop.resume  # type: ignore[attr-defined]
            raise interrupted from None
        best = Path(out["best"])
        self._use_checkpoint(best)
        import yaml

        return FitResult(run_dir=Path(out["run_dir"]), best=best, metrics=dict(out["metrics"]),
                         transfer=out.get("transfer"), config=yaml.safe_load(config_to_yaml(cfg)))

    def _check_names(self, cfg: RunConfig) -> None:
        from lucidyolo.engine.loop.build import data_root_of, open_split

        found = list(open_split(self._spec, cfg, data_root_of(self._spec, cfg), cfg.data.train_split,
                                "train").class_names)
        if found != self._names:
            raise DataError(
                f"The training data declares the classes {found}, not the {self._names} given to Model.new.",
                why="a label index would mean another class than the names say.",
                fix="Pass the dataset's names in its order, or names=None to take them from the dataset.",
            )

    # ------------------------------------------------------------------ scoring

    def evaluate(self, data_root: str | Path | None = None, *, split: str = "val", img_size: int | None = None,
                 batch_size: int | None = None, device: str = "auto", limit: int | None = None,
                 options: Mapping[str, Any] | None = None, ema: bool = True, output: str | Path | None = None,
                 save_json: str | Path | None = None, masks: bool | None = None) -> EvalReport:
        """Score the model with the task's protocol on one split, as ``lucid eval`` (every decode path of the task).

        Args:
            data_root: the dataset (default: the one the model was trained on).
            split: the split to score.
            img_size: input size (default: the size the model was trained at).
            batch_size: images per forward (default: the task's).
            device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
            limit: score only the first ``limit`` images.
            options: the task's evaluation options by name, e.g. ``{"masks": False}`` for segmentation
                (boxes only); ``lucid plugins`` lists each task's. Values are Python values or strings.
            ema: use the EMA weights when the checkpoint has them.
            output: also write the report here (JSON).
            save_json: also write the raw results here (COCO results JSON).
            masks: deprecated, ``options={"masks": ...}``; ignored by a task without that option.

        Returns:
            :class:`EvalReport`: the whole report (``.report``, ``.stats``, ``.metrics``) and the task's
            metric families by the names its spec declares, e.g. ``report.box.map`` (mAP50-95),
            ``.map50``, ``.map75``, ``.maps`` (per class, indexed by class).

        Raises:
            UserError: an untrained model, a dataset with other classes, a bad size or device, an
                evaluation option the task does not declare or a value not of its type.
        """
        from lucidyolo.engine.commands.evaluate import run_eval

        fallback = {}
        if masks is not None:
            import warnings

            warnings.warn("Model.evaluate(masks=...) is deprecated; use options={'masks': ...}.",
                          DeprecationWarning, stacklevel=2)
            fallback["masks"] = masks
        checkpoint = self._require_checkpoint("evaluate")
        report = run_eval(
            checkpoint=checkpoint, data_root=Path(data_root).expanduser() if data_root is not None else None,
            split=split, ema=ema, img_size=img_size, batch_size=batch_size, device=device, limit=limit,
            output=Path(output) if output is not None else None,
            save_json=Path(save_json) if save_json is not None else None, options=options,
            fallback_options=fallback,
        )
        return EvalReport(report, families=dict(self._spec.metrics.families), names=self.class_names)

    def val(self, data_root: str | Path | None = None, **kwargs: Any) -> EvalReport:
        """:meth:`evaluate` under the name other YOLO trainers use (same arguments, same report)."""
        return self.evaluate(data_root, **kwargs)

    # ------------------------------------------------------------------ inference

    def __call__(self, source: Any, **kwargs: Any) -> list[Prediction] | Iterator[Prediction]:
        """:meth:`predict`: ``model(source, conf=0.25, ...)``."""
        return self.predict(source, **kwargs)

    def predict(self, source: Any, *, conf: float = 0.25, decoder: str | None = None, img_size: int | None = None,
                device: str = "auto", batch_size: int = 16, channels: str = "bgr",
                stream: bool = False) -> list[Prediction] | Iterator[Prediction]:
        """Predict images, as ``lucid predict``; one :class:`~lucidyolo.api.prediction.Prediction` per image.

        Args:
            source: an image file, a folder, a glob, an ``(H, W, 3)`` uint8 numpy array (in ``channels``
                order), a PIL image, or a list of these; with ``stream=True`` also a video file.
            conf: keep rows scoring at least this, in ``[0, 1]``.
            decoder: one of the task's decode paths (``None``: its default, the first of its
                ``decode_paths``; the built-in tasks: ``"e2e"``, or ``"nms"``).
            img_size: input size (default: the size the model was trained at), a multiple of 32.
            device: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``.
            batch_size: images per forward pass (the answers do not depend on it, to float rounding).
            channels: the channel order of numpy arrays: ``"bgr"`` (the default: what ``cv2.imread`` and
                OpenCV video frames give, and what other YOLO trainers' APIs expect) or ``"rgb"`` (PIL,
                imageio, matplotlib arrays). Files and PIL images ignore it.
            stream: return a generator that reads, predicts and yields batch by batch, so a folder of any
                size or a video (frame by frame; ``Prediction.frame`` is the frame index) is never held in
                memory at once. The source is checked now; images are read as the generator is consumed.

        Each result holds, in original-image pixels: ``boxes`` (``.xyxy (N, 4)``, ``.xywh``, ``.conf (N,)``,
        ``.cls (N,)`` int64), and what the task adds (``masks.data (N, H, W)`` bool / ``masks.xy``,
        ``obb.xywhr (N, 5)``, ``keypoints.xy (N, K, 2)`` / ``.conf (N, K)``...); the plain tensors are
        ``scores``, ``labels`` and ``fields``. ``plot()`` / ``show()`` / ``save()`` draw them; ``to_json()``
        is the dict ``lucid predict --output`` writes for the image.

        Raises:
            UserError: an untrained model, a bad ``conf`` / ``decoder`` / ``img_size`` / device / batch size /
                ``channels``, a source that names no image (a video without ``stream=True``) or an array
                that is not ``(H, W, 3)`` uint8.
        """
        from lucidyolo.api.images import image_items, stream_items
        from lucidyolo.api.prediction import check_channels
        from lucidyolo.engine.commands.predict import check_predict_args
        from lucidyolo.engine.process.known_warnings import quiet_known_warnings

        quiet_known_warnings()
        self._require_checkpoint("predict")
        check_predict_args(conf, api=True)
        if batch_size < 1:
            raise UserError(f"Model.predict got batch_size={batch_size}.", fix="Use e.g. batch_size=16.")
        order = check_channels(channels, "Model.predict")
        if stream:
            frames = stream_items(source, order)  # checked now; read as the generator runs
            predictor = self._predictor(decoder, img_size, device)
            return self._predict_batches(frames, predictor, conf, batch_size)
        items = [(path, None, read) for path, read in image_items(source, order)]
        predictor = self._predictor(decoder, img_size, device)
        return list(self._predict_batches(iter(items), predictor, conf, batch_size))

    def _predict_batches(self, items: Iterator[tuple[Path | None, int | None, Callable[[], Any]]],
                         predictor: Predictor, conf: float, batch_size: int) -> Iterator[Prediction]:
        """One :class:`Prediction` per item, read and predicted ``batch_size`` at a time."""
        from itertools import islice

        from lucidyolo.api.prediction import NAME_KEY, Prediction, fields_from_rows

        while chunk := list(islice(items, batch_size)):  # read a batch, one forward pass: letterbox evens sizes
            images = [read() for _, _, read in chunk]
            for (path, frame, _), image, outcome in zip(chunk, images, predictor.batch(images, conf), strict=True):
                hw = (int(image.shape[0]), int(image.shape[1]))
                layout = self._field_layout(predictor, outcome, hw, conf)
                yield Prediction(
                    path=path, image=image, names=list(predictor.class_names), rows=outcome.rows,
                    fields=fields_from_rows(outcome.rows, layout, hw),
                    label_names=[str(r.get(NAME_KEY, "")) for r in outcome.rows], drawer=predictor.draw,
                    frame=frame,
                )

    def _predictor(self, decoder: str | None, img_size: int | None, device: str) -> Predictor:
        from lucidyolo.engine.commands.predict import Predictor

        key = (decoder, img_size, device)
        if key not in self._predictors:
            self._predictors[key] = Predictor(self._require_restored("predict"), decoder, img_size, device, api=True)
        return self._predictors[key]

    def _field_layout(self, predictor: Predictor, outcome: Any, image_hw: tuple[int, int],
                      conf: float) -> dict[str, FieldLayout]:
        """The task's field layout, learnt from its first non-empty answer.

        An image with no row above ``conf`` before any layout is known asks the hook again at
        lower thresholds, so an empty result still has its fields, each ``(0, ...)``.
        """
        from lucidyolo.api.prediction import layout_of

        if self._layout is None:
            rows, lower = outcome.rows, conf
            while not rows and lower > 1e-6:
                lower /= 4
                rows = predictor.rows(outcome.decoded, image_hw, outcome.letterbox, lower)
            if not rows:
                return {}
            self._layout = layout_of(rows)
        return self._layout

    # ------------------------------------------------------------------ deployment

    def export(self, format: str = "onnx", *, output: str | Path | None = None, img_size: int | None = None,
               dynamic_batch: bool = False, check: bool = False, half: bool = False, ema: bool = True,
               keep_raw: bool = False) -> ExportResult:
        """Write the model for deployment or sharing, as ``lucid export``.

        Args:
            format: ``"onnx"``, ``"torchscript"`` or ``"openvino"`` (the deployed graph with the task's named
                outputs; OpenVINO writes ``.xml`` + ``.bin``) or ``"weights"`` (a slim weights file that
                :meth:`load`, ``--model.weights`` and every command read).
            output: the file to write (default: beside the checkpoint, ``.onnx`` / ``.weights.pt``).
            img_size: ONNX input size (default: the training size).
            dynamic_batch: ONNX with a dynamic batch dimension.
            check: compare onnxruntime with PyTorch (the task's parity check); a failure raises.
            half: weights: store float tensors as float16.
            ema: export the EMA weights when the checkpoint has them.
            keep_raw: weights: keep both the raw and the EMA weights.

        Raises:
            UserError: an untrained model, an unknown format, a failed parity check.
            NotAvailableError: the task declares no export.
        """
        from lucidyolo.engine.weights.export import run_export

        checkpoint = self._require_checkpoint("export")
        out = run_export(checkpoint, fmt=format, img_size=img_size, dynamic_batch=dynamic_batch, check=check,
                         output=Path(output) if output is not None else None, ema=ema, half=half, keep_raw=keep_raw)
        written = out.get("path") or out.get("onnx") or out.get("weights")
        return ExportResult(path=Path(str(written)), format=format, details=out)

    # ------------------------------------------------------------------ helpers

    def _require_checkpoint(self, what: str) -> Path:
        if self._checkpoint is None:
            raise UserError(
                f"Model.{what}() needs a trained model; this {self.task!r} model has no weights yet.",
                why="Model.new describes an untrained model.",
                fix="Call .fit(...) first, or start from Model.load(checkpoint_or_run_dir).",
            )
        return self._checkpoint

    def _require_restored(self, what: str) -> Restored:
        checkpoint = self._require_checkpoint(what)
        if self._restored is None:
            from lucidyolo.engine.weights.restore import restore

            self._restored = restore(checkpoint)
        return self._restored

    def _use_checkpoint(self, path: Path) -> None:
        """Point the model at ``path`` (after a fit): reloaded on next use, cached predictors dropped."""
        self._checkpoint = path
        self._restored = None
        self._predictors.clear()
        self._layout = None
        self._restored = self._require_restored("fit")


def stop_message(stop: RunInterrupted) -> str:
    """The one line ``lucid`` prints when a signal stops a command: ``Stopped by Ctrl-C (SIGINT). Fix: ...``."""
    name = {2: "Ctrl-C (SIGINT)", 15: "SIGTERM"}.get(stop.signum, f"signal {stop.signum}")
    fix = stop.fix or (f"Continue from the last finished epoch with `{stop.resume}`." if stop.resume else
                       "Run the command again: the files it had finished are whole (each is written to a "
                       "temporary file and renamed), the rest were not started.")
    return f"Stopped by {name}. Fix: {fix}"


def _stdout(line: str) -> None:
    print(line, flush=True)  # flushed: a script's output piped to a file or a notebook shows each epoch as it ends


def _plain(log: Callable[[str], None]) -> Callable[[str], None]:
    """``log`` fed the engine's lines without their console markup (``[bold]...[/bold]``)."""

    def plain(message: str) -> None:
        from rich.errors import MarkupError
        from rich.text import Text

        try:
            text = Text.from_markup(message).plain
        except MarkupError:  # brackets that are not markup (a path): the line as it is
            text = message
        log(text)

    return plain


BARE_KEY_SECTIONS = ("model", "optim", "ema", "augment")
"""Where :meth:`Model.new` looks for a bare option name, in order (the first section with the key takes it)."""


def _by_section(spec: TaskSpec, options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{section: {key: value}}`` of :meth:`Model.new`'s bare options; a name no section has stays in ``model``
    (where the config's check names it as unknown, with the closest key)."""
    from pydantic import BaseModel

    fields = spec.run_config.model_fields
    out: dict[str, dict[str, Any]] = {}
    for key, value in options.items():
        section = next((s for s in BARE_KEY_SECTIONS if s in fields and isinstance(fields[s].annotation, type)
                        and issubclass(fields[s].annotation, BaseModel) and key in fields[s].annotation.model_fields),
                       "model")
        out.setdefault(section, {})[key] = value
    return out

