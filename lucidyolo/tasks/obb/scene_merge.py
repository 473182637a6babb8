"""Map tile detections and ground truth back to whole scenes (DOTA-style tiling).

A tiled scene is cut into windows ``[x0, y0, x1, y1]`` (scene pixels, ``x1``
and ``y1`` exclusive) that overlap their neighbours; every tile carries its
``source_image`` (the scene's file name) and ``window``. An object in an
overlap band is seen, and usually detected, by two (or four) tiles. To count
it once, every tile *owns* the core of its window and keeps only what has its
centre in that core; the cores of a scene partition it.

Cores (:func:`tile_cores`), per axis and per scene: the windows form a grid, so
the distinct window starts ``s_0 < s_1 < ... < s_{K-1}`` name its columns and
column ``k`` ends at ``e_k`` (the largest ``x1`` of the windows starting at
``s_k``; with a regular grid, the ``k``-th smallest distinct end). The boundary
between columns ``k`` and ``k + 1`` is the midpoint of their overlap band
``[s_{k+1}, e_k)``, ``b_k = (s_{k+1} + e_k) / 2`` (the shared edge for abutting
windows). Column ``k`` owns ``[b_{k-1}, b_k)``; the outer scene edges belong to
the edge columns, whose cores reach the window edge (``s_0`` and
``e_{K-1}``). Rows likewise.

Membership is half-open, ``c0 <= x < c1``, so a centre exactly on an inner
boundary goes to exactly one tile (the one after it). On the scene-edge sides
the edge tile's core is unbounded: a centre on the far edge (the last core is
closed there) or a fraction of a pixel outside the scene (a box hugging the
border) still belongs to the edge tile, rather than vanishing from the scene
while the per-tile metric counts it.

Detections (:func:`merge_to_scenes`): survivors are shifted by ``(x0, y0)``
into scene pixels (``w, h, theta`` unchanged); there is no per-scene cap.

Ground truth (:func:`scene_ground_truth`): the tiler clips every object to
each window that sees it, so an object in an overlap band has several copies:
a full one in each window that contains it and clipped ones (re-fitted, and
flagged difficult when less than 70 % survived) in the windows that cut it.
Keeping, per tile, the GTs whose centre lies in the tile's core keeps one copy
per object, the full one, whenever some window contains the object whole.
Along an axis (the upright picture; a re-fitted rotated copy is centred close
to it), with windows ``A = [.., e)`` and ``B = [s, ..)`` and boundary
``b = (s + e) / 2``, an object ``[u, v)`` inside ``B`` (``u >= s``) and cut by
``e`` has its clipped copy in ``A`` centred at ``(u + e) / 2 >= b`` (outside
``A``'s core) and its full copy in ``B`` centred at ``(u + v) / 2 > b``
(on ``B``'s side of ``b``); symmetrically on the other side. Limitation: an object
that no window contains whole (longer than the overlap band across a
boundary) leaves a clipped piece in each window that cuts it, and each piece
whose centre lies in its tile's core is kept: the scene then has the object as
two (or four) clipped GTs, difficult where the tiler flagged them, and a
detection of the whole object matches at most one. Exact whole-scene ground
truth needs the scene's own annotation file.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TileInfo = Sequence[tuple[str, Sequence[float]]]
"""Per tile ``(source_image, window [x0, y0, x1, y1])``."""


def _axis_cores(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One axis of :func:`tile_cores`: ``(T,)`` window starts/ends -> core starts, ends, is-first, is-last."""
    starts = np.unique(lo)  # (K,) sorted distinct
    col = np.searchsorted(starts, lo)  # (T,) column of each window
    ends = np.full(starts.size, -np.inf)
    np.maximum.at(ends, col, hi)  # (K,) end of each column
    inner = (starts[1:] + ends[:-1]) / 2.0  # (K - 1,) midpoints of the overlap bands
    c0 = np.concatenate([starts[:1], inner])  # (K,)
    c1 = np.concatenate([inner, ends[-1:]])
    return c0[col], c1[col], col == 0, col == starts.size - 1


def tile_cores(windows: np.ndarray) -> np.ndarray:
    """The core each tile of one scene owns (see the module docstring).

    Args:
        windows: ``(T, 4)`` ``x0, y0, x1, y1`` of one scene's tiles, scene pixels.

    Returns:
        ``(T, 4)`` float64 core ``cx0, cy0, cx1, cy1``; membership is
        ``cx0 <= x < cx1`` (edge tiles: unbounded towards the scene edge).
    """
    w = np.asarray(windows, dtype=np.float64).reshape(-1, 4)
    if w.shape[0] == 0:
        return np.zeros((0, 4))
    x0, x1, _, _ = _axis_cores(w[:, 0], w[:, 2])
    y0, y1, _, _ = _axis_cores(w[:, 1], w[:, 3])
    return np.stack([x0, y0, x1, y1], axis=1)


def _scenes(tile_info: TileInfo) -> tuple[list[str], list[np.ndarray], np.ndarray, np.ndarray]:
    """Scene names (sorted), each scene's tile indices, and per tile: offset ``(T, 2)`` and core bounds ``(T, 4)``.

    The bounds are the cores with ``-inf`` / ``inf`` on the scene-edge sides.
    """
    names = [str(s) for s, _ in tile_info]
    windows = np.array([np.asarray(w, dtype=np.float64).reshape(4) for _, w in tile_info]).reshape(-1, 4)
    scene_names = sorted(set(names))
    of_scene = {n: i for i, n in enumerate(scene_names)}
    scene_of = np.array([of_scene[n] for n in names], dtype=np.int64)
    bounds = np.zeros((len(names), 4))
    members = []
    for s in range(len(scene_names)):
        idx = np.flatnonzero(scene_of == s)
        members.append(idx)
        w = windows[idx]
        x0, x1, fx, lx = _axis_cores(w[:, 0], w[:, 2])
        y0, y1, fy, ly = _axis_cores(w[:, 1], w[:, 3])
        bounds[idx] = np.stack([
            np.where(fx, -np.inf, x0), np.where(fy, -np.inf, y0),
            np.where(lx, np.inf, x1), np.where(ly, np.inf, y1),
        ], axis=1)  # fmt: skip
    return scene_names, members, windows[:, :2], bounds


def _in_core(rboxes: np.ndarray, offset: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shift ``(N, 5)`` tile-local boxes to the scene; keep mask of centres in the core."""
    rb = np.asarray(rboxes, dtype=np.float64).reshape(-1, 5).copy()
    rb[:, :2] += offset
    cx, cy = rb[:, 0], rb[:, 1]
    keep = (cx >= bounds[0]) & (cx < bounds[2]) & (cy >= bounds[1]) & (cy < bounds[3])
    return rb, keep


def merge_to_scenes(
    tile_dets: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], tile_info: TileInfo
) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Whole-scene detections from tile detections (core rule, no cap).

    Args:
        tile_dets: per tile ``(rboxes (N, 5) tile-local px, scores (N,), labels (N,))``.
        tile_info: per tile ``(source_image, window [x0, y0, x1, y1])``, same order.

    Returns:
        ``scene_names`` (sorted) and, per scene, ``(rboxes (N', 5) float64
        scene px, scores (N',), labels (N',) int64)``: the survivors of its
        tiles in tile order, each tile's rows in their own order.
    """
    if len(tile_dets) != len(tile_info):
        raise ValueError(f"{len(tile_dets)} tile detection sets but {len(tile_info)} tile infos")
    names, members, offsets, bounds = _scenes(tile_info)
    out = []
    for idx in members:
        rbs, scs, lbs = [np.zeros((0, 5))], [np.zeros(0)], [np.zeros(0, np.int64)]
        for t in idx.tolist():
            rboxes, scores, labels = tile_dets[t]
            rb, keep = _in_core(rboxes, offsets[t], bounds[t])
            rbs.append(rb[keep])
            scs.append(np.asarray(scores, dtype=np.float64).reshape(-1)[keep])
            lbs.append(np.asarray(labels).reshape(-1).astype(np.int64)[keep])
        out.append((np.concatenate(rbs), np.concatenate(scs), np.concatenate(lbs)))
    return names, out


def scene_ground_truth(
    tile_gts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], tile_info: TileInfo
) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Whole-scene ground truth rebuilt from the tiles, one copy per object (see the module docstring).

    Args:
        tile_gts: per tile ``(rboxes (M, 5) tile-local px, labels (M,), difficult (M,) bool)``.
        tile_info: per tile ``(source_image, window)``, same order.

    Returns:
        ``scene_names`` (sorted, the same list :func:`merge_to_scenes` gives for
        the same ``tile_info``) and, per scene, ``(rboxes (M', 5) float64 scene
        px, labels (M',) int64, difficult (M',) bool)``.
    """
    if len(tile_gts) != len(tile_info):
        raise ValueError(f"{len(tile_gts)} tile ground truths but {len(tile_info)} tile infos")
    names, members, offsets, bounds = _scenes(tile_info)
    out = []
    for idx in members:
        rbs, lbs, dfs = [np.zeros((0, 5))], [np.zeros(0, np.int64)], [np.zeros(0, bool)]
        for t in idx.tolist():
            rboxes, labels, difficult = tile_gts[t]
            rb, keep = _in_core(rboxes, offsets[t], bounds[t])
            lab = np.asarray(labels).reshape(-1).astype(np.int64)
            dif = np.zeros(lab.shape, bool) if difficult is None else np.asarray(difficult, dtype=bool).reshape(-1)
            rbs.append(rb[keep])
            lbs.append(lab[keep])
            dfs.append(dif[keep])
        out.append((np.concatenate(rbs), np.concatenate(lbs), np.concatenate(dfs)))
    return names, out
