"""One split of one dataset, stored as compact arrays.

Every reader (COCO JSON, YOLO root, DOTA labelTxt, synthetic) ends in an
:class:`ImageSource`. After setup it holds only a handful of numpy arrays
(concatenated instance fields plus per-image offsets) and no per-sample Python
objects: a list of dicts per sample grows every loader worker's memory through
copy-on-write of reference counts.

Numpy only: this module must import without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lucidyolo.data.image_io import read_image
from lucidyolo.errors import DataError
from lucidyolo.structures.fields import attr_spec, field_specs
from lucidyolo.structures.polygons import Polygons
from lucidyolo.structures.targets import Targets

#: A reader's fit-time check of a training split: ``check(source, img_size)``, raising DataError to refuse it.
FitCheck = Callable[["ImageSource", int], None]


class ImageSource:
    """One split of one dataset: image paths, sizes and per-image targets.

    Attributes:
        fields: the instance fields read beyond boxes/labels/difficult
            (the task's ``TaskSpec.fields``: ``polygons``, ``rboxes``,
            ``keypoints``); they pick the label format of YOLO rows.
        class_names: class names in contiguous label order.
        category_ids: the dataset's own category id of each contiguous label
            (COCO ids; ``0..C-1`` for YOLO and DOTA roots).
        meta: the dataset meta the reader found for the fields' rules and the
            task (:meth:`meta`): e.g. ``num_keypoints`` (K), ``flip_idx`` (the
            mirror permutation of the K points; ``None``: flipping is not
            allowed) and ``skeleton`` (0-based limbs, drawing only) for
            keypoints. Each field rule reads the keys it declares.
        ann_file: the COCO JSON this split was read from, if any (evaluation
            reuses it so crowd and RLE annotations count as in pycocotools).
        name: short human-readable description (root and split).
        layout: the resolved layout name (``coco-2017``, ``yolo``, ``dota`` ...).
        labels_from: where the reader looked for labels when that is not
            ``ann_file`` (a YOLO split: the ``labels/`` folder common to its
            images); ``None`` otherwise. Messages about missing labels name it.
        images_without_label_file: images whose label file does not exist
            (YOLO); ``None`` for layouts that have no file per image.
        unreadable_images: ``(path, reason)`` of image files the reader left
            out because it could not read them (only with
            ``--data.skip_bad_images``; otherwise it refuses the split).
        fit_checks: the reader's checks of a training split, each called as
            ``check(source, img_size)`` by :meth:`run_fit_checks` and raising
            :class:`~lucidyolo.errors.DataError` on a split that must not be
            trained on as it is (a DOTA split of whole scenes); empty for a
            reader without such a rule.
    """

    def __init__(
        self,
        *,
        fields: tuple[str, ...],
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
        extra: dict[str, Any] | None = None,
        image_extra: dict[str, np.ndarray] | None = None,
        meta: dict[str, Any] | None = None,
        ann_file: Path | None = None,
        name: str = "",
        layout: str = "",
    ) -> None:
        self.fields = tuple(fields)
        self.class_names = list(class_names)
        self.category_ids = [int(c) for c in category_ids]
        self._meta = dict(meta or {})
        self.ann_file = ann_file
        self.name = name
        self.layout = layout
        # set by the reader after build (see the class docstring)
        self.labels_from: Path | None = None
        self.images_without_label_file: int | None = None
        self.unreadable_images: list[tuple[Path, str]] = []
        self.fit_checks: tuple[FitCheck, ...] = ()
        self._root = Path(root)
        # utf-8 bytes in one fixed-width buffer: no per-path Python object.
        self._rel_paths = np.asarray(rel_paths, dtype=np.bytes_)
        self._image_ids = np.asarray(image_ids, dtype=np.int64)
        self._hw = np.asarray(hw, dtype=np.int32).reshape(-1, 2)
        self._inst_offsets = np.asarray(inst_offsets, dtype=np.int64)
        self._boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
        self._labels = np.asarray(labels, dtype=np.int64)
        self._difficult = np.asarray(difficult, dtype=bool)
        # every instance of the split as one Targets; targets(i) slices image i's range out of it
        self._all = Targets(self._boxes, self._labels, self._difficult, **dict(extra or {}))
        # rows flagged by an ignore-region attribute (crowd) are not counted as instances
        ignore = [v for k, v in (extra or {}).items() if (a := attr_spec(k)) is not None and a.ignore_region]
        self._counted = ~np.any(np.stack(ignore), axis=0) if ignore else np.ones(len(self._labels), bool)
        # per-image targets (a class label): one row per image, attached by targets(i)
        self._image_extra = {k: np.asarray(v) for k, v in (image_extra or {}).items()}
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
        """Instances of the split (ignore regions such as COCO crowds are not instances)."""
        return int(self._counted.sum())

    @property
    def num_ignore_regions(self) -> int:
        """Rows flagged as ignore regions (COCO ``iscrowd``), carried beside the instances."""
        return int((~self._counted).sum())

    @property
    def root(self) -> Path:
        return self._root

    def image_path(self, i: int) -> Path:
        """Absolute path of image ``i``."""
        return self._root / self._rel_paths[i].decode("utf-8")

    def image_id(self, i: int) -> int:
        """COCO image id of image ``i`` (YOLO / DOTA roots: its index)."""
        return int(self._image_ids[i])

    def all_rel_paths(self) -> np.ndarray:
        """``(N_images,)`` bytes: every image's utf-8 path relative to :attr:`root` (read-only view)."""
        v = self._rel_paths.view()
        v.flags.writeable = False
        return v

    def all_image_ids(self) -> np.ndarray:
        """``(N_images,)`` int64 image id of every image (read-only view)."""
        v = self._image_ids.view()
        v.flags.writeable = False
        return v

    def image_hw(self, i: int) -> tuple[int, int]:
        """Original ``(height, width)`` of image ``i`` (from the JSON or file header)."""
        h, w = self._hw[i]
        return int(h), int(w)

    def load_image(self, i: int) -> np.ndarray:
        """Decode image ``i``: ``(H, W, 3)`` uint8 RGB."""
        return read_image(self.image_path(i))

    def meta(self) -> dict[str, Any]:
        """The dataset meta field rules and tasks read (a copy; keypoints: ``num_keypoints``, ``flip_idx``, ``skeleton``)."""
        return dict(self._meta)

    def targets(self, i: int) -> Targets:
        """Ground truth of image ``i`` in original pixels (crowd regions flagged when the task reads them).

        Returns fresh arrays: the caller may mutate them in place.
        """
        t = self._all.slice(int(self._inst_offsets[i]), int(self._inst_offsets[i + 1]))
        for name, rows in self._image_extra.items():
            setattr(t, name, rows[i].copy())
        return t

    def image_class_counts(self) -> np.ndarray | None:
        """``(C,)`` images per class when the split carries a per-image class target, else ``None``.

        A per-image integer target whose values all index the class list is the
        image's class (classification); unknown values (< 0) are not counted.
        """
        for values in self._image_extra.values():
            if values.ndim == 1 and np.issubdtype(values.dtype, np.integer) and (values < self.num_classes).all():
                known = values[values >= 0]
                return np.bincount(known, minlength=self.num_classes).astype(np.int64)
        return None

    def image_values(self, name: str) -> np.ndarray:
        """``(N_images, ...)`` a per-image target of every image (read-only view)."""
        v = self._image_extra[name].view()
        v.flags.writeable = False
        return v

    def without(self, drop: Sequence[int]) -> ImageSource:
        """The split less the images at indices ``drop`` (their instances go with them); ``self`` if none.

        ``lucid fit --data.skip_bad_images`` trains on what is left of a split with unreadable files.
        """
        keep = np.ones(len(self), bool)
        keep[np.asarray(list(drop), dtype=np.int64)] = False
        if keep.all():
            return self
        counts = np.diff(self._inst_offsets)
        instance_keep = np.repeat(keep, counts)
        kept = self._all.filter(instance_keep)
        out = ImageSource(
            fields=self.fields, class_names=self.class_names, category_ids=self.category_ids, root=self._root,
            rel_paths=self._rel_paths[keep], image_ids=self._image_ids[keep], hw=self._hw[keep],
            inst_offsets=np.concatenate([[0], np.cumsum(counts[keep])]).astype(np.int64),
            boxes=kept.boxes, labels=kept.labels, difficult=kept.difficult, extra=kept.extra,
            image_extra={k: v[keep] for k, v in self._image_extra.items()}, meta=self._meta,
            ann_file=self.ann_file, name=self.name, layout=self.layout,
        )
        out.labels_from, out.images_without_label_file = self.labels_from, self.images_without_label_file
        out.fit_checks = self.fit_checks
        return out

    def take(self, images: np.ndarray, image_ids: np.ndarray | None = None) -> ImageSource:
        """The images at the int indices ``images``, in that order, with their instances (one vectorised gather).

        ``image_ids``: the ids the taken images get (default: their own). The
        label index splices a split from its kept and its re-read files with it.
        """
        images = np.asarray(images, dtype=np.int64).reshape(-1)
        starts, counts = self._inst_offsets[images], np.diff(self._inst_offsets)[images]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        # instance k of taken image j sits at starts[j] + k
        inst = np.repeat(starts - offsets[:-1], counts) + np.arange(int(offsets[-1]), dtype=np.int64)
        kept = self._all.filter(inst)
        out = ImageSource(
            fields=self.fields, class_names=self.class_names, category_ids=self.category_ids, root=self._root,
            rel_paths=self._rel_paths[images], image_ids=self._image_ids[images] if image_ids is None else image_ids,
            hw=self._hw[images], inst_offsets=offsets, boxes=kept.boxes, labels=kept.labels,
            difficult=kept.difficult, extra=kept.extra,
            image_extra={k: v[images] for k, v in self._image_extra.items()}, meta=self._meta,
            ann_file=self.ann_file, name=self.name, layout=self.layout,
        )
        out.labels_from, out.images_without_label_file = self.labels_from, self.images_without_label_file
        out.fit_checks = self.fit_checks
        return out

    @classmethod
    def concat(cls, parts: Sequence[ImageSource]) -> ImageSource:
        """The images of ``parts`` one after another (the first part gives names, classes and meta)."""
        first = parts[0]
        joined = Targets.concat([p._all for p in parts])
        counts = np.concatenate([np.diff(p._inst_offsets) for p in parts])
        return cls(
            fields=first.fields, class_names=first.class_names, category_ids=first.category_ids, root=first._root,
            rel_paths=np.concatenate([p._rel_paths for p in parts]),
            image_ids=np.concatenate([p._image_ids for p in parts]),
            hw=np.concatenate([p._hw for p in parts]),
            inst_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            boxes=joined.boxes, labels=joined.labels, difficult=joined.difficult, extra=joined.extra,
            image_extra={k: np.concatenate([p._image_extra[k] for p in parts]) for k in first._image_extra},
            meta=first._meta, ann_file=first.ann_file, name=first.name, layout=first.layout,
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The split as named numpy arrays (no object arrays: ``np.savez`` writes them without pickle).

        Names: ``rel_paths image_ids hw inst_offsets boxes labels difficult``,
        ``x.<attr>`` per instance attribute (a ragged one as ``x.<attr>.points``,
        ``.ring_offsets``, ``.ring_owner``) and ``i.<attr>`` per image attribute.
        :meth:`from_arrays` reads them back.
        """
        out = {"rel_paths": self._rel_paths, "image_ids": self._image_ids, "hw": self._hw,
               "inst_offsets": self._inst_offsets, "boxes": self._boxes, "labels": self._labels,
               "difficult": self._difficult}
        for name, value in self._all.extra.items():
            if isinstance(value, Polygons):
                out.update({f"x.{name}.points": value.points, f"x.{name}.ring_offsets": value.ring_offsets,
                            f"x.{name}.ring_owner": value.ring_owner})
            else:
                out[f"x.{name}"] = value
        out.update({f"i.{name}": v for name, v in self._image_extra.items()})
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], **kwargs: Any) -> ImageSource:
        """The split :meth:`to_arrays` wrote; ``kwargs``: the constructor's other arguments (``fields``, ``root`` ...)."""
        extra: dict[str, Any] = {}
        image_extra: dict[str, np.ndarray] = {}
        for key in arrays:
            kind, _, rest = key.partition(".")
            if kind == "i":
                image_extra[rest] = np.asarray(arrays[key])
            elif kind == "x" and rest.endswith(".points"):
                name = rest.removesuffix(".points")
                extra[name] = Polygons(arrays[key], arrays[f"x.{name}.ring_offsets"], arrays[f"x.{name}.ring_owner"])
            elif kind == "x" and not rest.endswith((".ring_offsets", ".ring_owner")):
                extra[rest] = np.asarray(arrays[key])
        return cls(rel_paths=arrays["rel_paths"], image_ids=arrays["image_ids"], hw=arrays["hw"],
                   inst_offsets=arrays["inst_offsets"], boxes=arrays["boxes"], labels=arrays["labels"],
                   difficult=arrays["difficult"], extra=extra, image_extra=image_extra, **kwargs)

    def run_fit_checks(self, img_size: int) -> None:
        """Run the reader's :attr:`fit_checks` on this split before training at ``img_size`` px.

        Raises:
            DataError: from the first check that refuses the split.
        """
        for check in self.fit_checks:
            check(self, img_size)

    # ------------------------------------------------------------ whole split
    def instance_counts(self) -> np.ndarray:
        """``(C,)`` int64 number of instances of each class (ignore regions excluded)."""
        return np.bincount(self._labels[self._counted], minlength=self.num_classes).astype(np.int64)

    def instances_per_image(self) -> np.ndarray:
        """``(N_images,)`` int64 instance count of every image (ignore regions excluded)."""
        counted = np.concatenate([[0], np.cumsum(self._counted)]).astype(np.int64)
        return counted[self._inst_offsets[1:]] - counted[self._inst_offsets[:-1]]

    def all_instances(self) -> tuple[Targets, np.ndarray]:
        """Every counted instance of the split at once, read from the labels alone (no image is decoded).

        Returns:
            ``(targets, image_index)``: ``targets`` joins the ``M`` instances of all
            images in original pixels with the split's instance fields (``boxes (M,
            4)``, ``labels (M,)``, ``rboxes (M, 5)``, ``keypoints (M, K, 2)`` +
            ``visibility (M, K)``, ``polygons`` with owners in ``0..M-1``; ignore
            regions such as COCO crowds left out); ``image_index (M,)`` int64 is the
            image each instance belongs to. Fresh arrays: the caller may mutate them.
        """
        image_index = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self._inst_offsets))
        if self._counted.all():
            return self._all.clone(), image_index
        return self._all.filter(self._counted), image_index[self._counted]

    def ragged_sizes_per_image(self) -> tuple[np.ndarray, np.ndarray]:
        """``(points, rings)``: two ``(N_images,)`` int64 arrays, the points and rings every image's ragged
        attributes hold (outline rings; zeros for a source without ragged attributes)."""
        points, rings = np.zeros(len(self), np.int64), np.zeros(len(self), np.int64)
        for spec in self._all.present_fields():
            for attr in spec.attrs:
                p = getattr(self._all, attr.name) if attr.ragged else None
                if p is None:
                    continue
                # rings are stored in owner order (see targets()), so each image's rings are one contiguous run
                bounds = np.searchsorted(p.ring_owner, self._inst_offsets, side="left")
                points += np.diff(p.ring_offsets[bounds]).astype(np.int64)
                rings += np.diff(bounds).astype(np.int64)
        return points, rings

    def all_hw(self) -> np.ndarray:
        """``(N_images, 2)`` int32 ``(h, w)`` of every image (read-only view)."""
        v = self._hw.view()
        v.flags.writeable = False
        return v

    def __repr__(self) -> str:
        return (
            f"ImageSource({self.name!r}, fields={self.fields}, images={len(self)}, "
            f"instances={self.num_instances}, classes={self.num_classes})"
        )


@dataclass
class SourceBuilder:
    """Accumulates images during reader setup, then packs them into an :class:`ImageSource`.

    The per-image :class:`Targets` kept here are temporary: :meth:`build`
    concatenates them into flat arrays and the builder is dropped.
    """

    fields: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    _paths: list[bytes] = field(default_factory=list)
    _ids: list[int] = field(default_factory=list)
    _hw: list[tuple[int, int]] = field(default_factory=list)
    _targets: list[Targets] = field(default_factory=list)

    def add(self, rel_path: str, image_id: int, hw: tuple[int, int], targets: Targets | None = None) -> None:
        """Register one image; ``targets=None`` means a background image.

        Declared field attributes the reader has no notion of (``fill_missing``,
        e.g. crowd flags in a YOLO root) are filled, so every image carries the
        same attributes.

        Raises:
            DataError: a declared attribute the reader did not fill and that has
                no default: it would otherwise travel as zeros and train silently
                wrong.
        """
        if targets is None:
            targets = Targets.empty_for_fields(self.fields, meta=self.meta)
        for spec in field_specs(self.fields):
            for a in spec.attrs:
                if getattr(targets, a.name) is not None:
                    continue
                if not a.fill_missing:
                    raise DataError(
                        f"{rel_path}: the task's field {spec.name!r} ({a.name}) was not read from this dataset.",
                        why="the reader has no rule that fills it, and training it on zeros would be silently wrong.",
                        fix=f"Use a dataset layout whose labels hold {spec.name!r}, or give the field a rule for this "
                            "format (FieldSpec.yolo for YOLO rows), or a default (AttrSpec.fill_missing).",
                    )
                setattr(targets, a.name, a.filled(len(targets), self.meta))
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
        ann_file: Path | None = None,
        name: str = "",
        layout: str = "",
    ) -> ImageSource:
        """Pack everything added so far into an :class:`ImageSource` carrying :attr:`meta`."""
        template, _ = Targets.empty_for_fields(self.fields, meta=self.meta).split_image_targets()
        split = [t.split_image_targets() for t in self._targets]
        joined = Targets.concat([t for t, _ in split]) if split else template
        image_names = {name for _, image in split for name in image}
        image_extra = {name: np.stack([image[name] for _, image in split]) for name in image_names}
        counts = np.array([len(t) for t in self._targets], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        paths = np.array(self._paths, dtype=np.bytes_) if self._paths else np.zeros(0, dtype="S1")
        return ImageSource(
            fields=tuple(self.fields),
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
            extra=joined.extra,
            image_extra=image_extra,
            meta=self.meta,
            ann_file=ann_file,
            name=name,
            layout=layout,
        )
