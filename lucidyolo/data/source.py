"""One split of one dataset, stored as compact arrays.

Every reader (COCO JSON, YOLO root, DOTA labelTxt, synthetic) ends in an
:class:`ImageSource`. After setup it holds only a handful of numpy arrays
(concatenated instance fields plus per-image offsets) and no per-sample Python
objects: a list of dicts per sample grows every loader worker's memory through
copy-on-write of reference counts.

Numpy only: this module must import without torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lucidyolo.data.image_io import read_image
from lucidyolo.structures.targets import Polygons, Targets

TASKS = ("det", "seg", "obb", "pose")
TASK_ALIASES = {
    "det": "det",
    "detect": "det",
    "seg": "seg",
    "segment": "seg",
    "obb": "obb",
    "oriented": "obb",
    "pose": "pose",
    "keypoints": "pose",
}


def canonical_task(task: str) -> str:
    """Map a task name or alias (``detect``, ``segment``, ...) to ``det|seg|obb|pose``."""
    from lucidyolo.errors import ConfigError

    try:
        return TASK_ALIASES[task]
    except KeyError:
        raise ConfigError(
            f"Unknown task {task!r}.",
            fix=f"Use one of {', '.join(sorted(TASK_ALIASES))}.",
        ) from None


class ImageSource:
    """One split of one dataset: image paths, sizes and per-image targets.

    Attributes:
        task: ``"det" | "seg" | "obb" | "pose"``.
        class_names: class names in contiguous label order.
        category_ids: the dataset's own category id of each contiguous label
            (COCO ids; ``0..C-1`` for YOLO and DOTA roots).
        num_keypoints: K for pose, else ``None``.
        flip_idx: pose horizontal-flip permutation of the K keypoints;
            ``None`` means flipping is not allowed.
        ann_file: the COCO JSON this split was read from, if any (evaluation
            reuses it so crowd and RLE annotations count as in pycocotools).
        name: short human-readable description (root and split).
        layout: the resolved layout name (``coco-2017``, ``yolo``, ``dota`` ...).
    """

    def __init__(
        self,
        *,
        task: str,
        class_names: list[str],
        category_ids: list[int],
        root: Path,
        rel_paths: np.ndarray,
        image_ids: np.ndarray,
        hw: np.ndarray,
        inst_offsets: np.ndarray,
        boxes: np.ndarray,
        labels: np.ndarray,
        difficult: np.ndarray,
        polygons: Polygons | None = None,
        rboxes: np.ndarray | None = None,
        keypoints: np.ndarray | None = None,
        visibility: np.ndarray | None = None,
        num_keypoints: int | None = None,
        flip_idx: list[int] | None = None,
        ann_file: Path | None = None,
        name: str = "",
        layout: str = "",
    ) -> None:
        self.task = task
        self.class_names = list(class_names)
        self.category_ids = [int(c) for c in category_ids]
        self.num_keypoints = num_keypoints
        self.flip_idx = None if flip_idx is None else [int(i) for i in flip_idx]
        self.ann_file = ann_file
        self.name = name
        self.layout = layout
        self._root = Path(root)
        # utf-8 bytes in one fixed-width buffer: no per-path Python object.
        self._rel_paths = np.asarray(rel_paths, dtype=np.bytes_)
        self._image_ids = np.asarray(image_ids, dtype=np.int64)
        self._hw = np.asarray(hw, dtype=np.int32).reshape(-1, 2)
        self._inst_offsets = np.asarray(inst_offsets, dtype=np.int64)
        self._boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
        self._labels = np.asarray(labels, dtype=np.int64)
        self._difficult = np.asarray(difficult, dtype=bool)
        self._polygons = polygons
        self._rboxes = rboxes
        self._keypoints = keypoints
        self._visibility = visibility
        n = len(self._image_ids)
        if self._rel_paths.shape[0] != n or self._hw.shape[0] != n or self._inst_offsets.shape[0] != n + 1:
            raise ValueError("ImageSource arrays disagree on the image count")
        if len(self.category_ids) != len(self.class_names):
            raise ValueError("category_ids and class_names differ in length")

    # ------------------------------------------------------------- per image
    def __len__(self) -> int:
        return int(self._image_ids.shape[0])

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def num_instances(self) -> int:
        return int(self._labels.shape[0])

    @property
    def root(self) -> Path:
        return self._root

    def image_path(self, i: int) -> Path:
        """Absolute path of image ``i``."""
        return self._root / self._rel_paths[i].decode("utf-8")

    def image_id(self, i: int) -> int:
        """COCO image id of image ``i`` (YOLO / DOTA roots: its index)."""
        return int(self._image_ids[i])

    def image_hw(self, i: int) -> tuple[int, int]:
        """Original ``(height, width)`` of image ``i`` (from the JSON or file header)."""
        h, w = self._hw[i]
        return int(h), int(w)

    def load_image(self, i: int) -> np.ndarray:
        """Decode image ``i``: ``(H, W, 3)`` uint8 RGB."""
        return read_image(self.image_path(i))

    def targets(self, i: int) -> Targets:
        """Ground truth of image ``i`` in original pixels, crowd excluded.

        Returns fresh arrays: the caller may mutate them in place.
        """
        s, e = int(self._inst_offsets[i]), int(self._inst_offsets[i + 1])
        polys = None
        if self._polygons is not None:
            p = self._polygons
            r0, r1 = np.searchsorted(p.ring_owner, [s, e], side="left")
            p0, p1 = p.ring_offsets[r0], p.ring_offsets[r1]
            polys = Polygons(
                p.points[p0:p1].copy(),
                p.ring_offsets[r0 : r1 + 1] - p0,
                p.ring_owner[r0:r1] - s,
            )
        return Targets(
            boxes=self._boxes[s:e].copy(),
            labels=self._labels[s:e].copy(),
            difficult=self._difficult[s:e].copy(),
            polygons=polys,
            rboxes=None if self._rboxes is None else self._rboxes[s:e].copy(),
            keypoints=None if self._keypoints is None else self._keypoints[s:e].copy(),
            visibility=None if self._visibility is None else self._visibility[s:e].copy(),
        )

    # ------------------------------------------------------------ whole split
    def instance_counts(self) -> np.ndarray:
        """``(C,)`` int64 number of instances of each class."""
        return np.bincount(self._labels, minlength=self.num_classes).astype(np.int64)

    def instances_per_image(self) -> np.ndarray:
        """``(N_images,)`` int64 instance count of every image."""
        return np.diff(self._inst_offsets)

    def polygon_sizes_per_image(self) -> tuple[np.ndarray, np.ndarray]:
        """``(points, rings)``: two ``(N_images,)`` int64 arrays, polygon points and rings of every image (zeros without polygons)."""
        if self._polygons is None:
            zeros = np.zeros(len(self), np.int64)
            return zeros, zeros.copy()
        p = self._polygons
        # rings are stored in owner order (see targets()), so each image's rings are one contiguous run
        bounds = np.searchsorted(p.ring_owner, self._inst_offsets, side="left")
        return np.diff(p.ring_offsets[bounds]).astype(np.int64), np.diff(bounds).astype(np.int64)

    def all_labels(self) -> np.ndarray:
        """``(M,)`` int64 labels of every instance of the split (read-only view)."""
        v = self._labels.view()
        v.flags.writeable = False
        return v

    def all_hw(self) -> np.ndarray:
        """``(N_images, 2)`` int32 ``(h, w)`` of every image (read-only view)."""
        v = self._hw.view()
        v.flags.writeable = False
        return v

    def label_of_category(self) -> dict[int, int]:
        """Dataset category id -> contiguous label."""
        return {c: i for i, c in enumerate(self.category_ids)}

    def __repr__(self) -> str:
        return (
            f"ImageSource({self.name!r}, task={self.task}, images={len(self)}, "
            f"instances={self.num_instances}, classes={self.num_classes})"
        )


@dataclass
class SourceBuilder:
    """Accumulates images during reader setup, then packs them into an :class:`ImageSource`.

    The per-image :class:`Targets` kept here are temporary: :meth:`build`
    concatenates them into flat arrays and the builder is dropped.
    """

    task: str
    num_keypoints: int | None = None
    _paths: list[bytes] = field(default_factory=list)
    _ids: list[int] = field(default_factory=list)
    _hw: list[tuple[int, int]] = field(default_factory=list)
    _targets: list[Targets] = field(default_factory=list)

    def add(self, rel_path: str, image_id: int, hw: tuple[int, int], targets: Targets | None = None) -> None:
        """Register one image; ``targets=None`` means a background image."""
        if targets is None:
            targets = Targets.empty_for_task(self.task, self.num_keypoints)
        self._paths.append(rel_path.encode("utf-8"))
        self._ids.append(int(image_id))
        self._hw.append((int(hw[0]), int(hw[1])))
        self._targets.append(targets)

    def __len__(self) -> int:
        return len(self._ids)

    def build(
        self,
        *,
        root: Path,
        class_names: list[str],
        category_ids: list[int],
        flip_idx: list[int] | None = None,
        ann_file: Path | None = None,
        name: str = "",
        layout: str = "",
    ) -> ImageSource:
        """Pack everything added so far into an :class:`ImageSource`."""
        template = Targets.empty_for_task(self.task, self.num_keypoints)
        parts = self._targets or [template]
        joined = Targets.concat(parts) if self._targets else template
        counts = np.array([len(t) for t in self._targets], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        paths = np.array(self._paths, dtype=np.bytes_) if self._paths else np.zeros(0, dtype="S1")
        return ImageSource(
            task=self.task,
            class_names=class_names,
            category_ids=category_ids,
            root=root,
            rel_paths=paths,
            image_ids=np.array(self._ids, dtype=np.int64),
            hw=np.array(self._hw, dtype=np.int32).reshape(-1, 2),
            inst_offsets=offsets,
            boxes=joined.boxes,
            labels=joined.labels,
            difficult=joined.difficult,
            polygons=joined.polygons,
            rboxes=joined.rboxes,
            keypoints=joined.keypoints,
            visibility=joined.visibility,
            num_keypoints=self.num_keypoints if self.task == "pose" else None,
            flip_idx=flip_idx,
            ann_file=ann_file,
            name=name,
            layout=layout,
        )


def open_source(
    data_root: Path | str | None,
    split: str,
    task: str,
    layout: str | None = None,
    **explicit_paths: Path | str | None,
) -> ImageSource:
    """Resolve a dataset root (or explicit paths) and read one split.

    Args:
        data_root: dataset root (COCO container, YOLO root or DOTA root);
            ``None`` when explicit paths are given.
        split: ``"train"`` or ``"val"`` (any name the layout has).
        task: ``det | seg | obb | pose`` or an alias.
        layout: force a layout (``coco``, ``coco-2017``, ``coco-split``,
            ``coco-images``, ``coco-export``, ``yolo``, ``dota``) when a root
            matches several; ``None`` = detect.
        **explicit_paths: ``train_images``, ``train_ann_file``, ``val_images``,
            ``val_ann_file`` overrides (COCO JSON + image folder).

    Returns:
        The split as an :class:`ImageSource`.

    Raises:
        DataError: the root matches no layout, several layouts, or its files
            are malformed (message names ``file:line``).
    """
    from lucidyolo.data.layouts import read_split

    return read_split(
        None if data_root is None else Path(data_root),
        split,
        canonical_task(task),
        layout=layout,
        explicit_paths={k: v for k, v in explicit_paths.items() if v is not None},
    )
