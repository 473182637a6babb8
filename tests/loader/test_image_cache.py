"""Decoded-image cache: identical pixels, one decode per distinct file, read-only, budgeted."""

from __future__ import annotations

import numpy as np
import pytest

from lucidyolo.data.cache import DecodedImageCache, cache_bytes
from lucidyolo.data.datasets import TrainDataset
from lucidyolo.data.source import SourceBuilder
from tests.augment.scenes import rect_scene, rect_source, rect_targets, write_source


def test_cache_returns_the_decoded_pixels_read_only(tmp_path):
    source = rect_source(tmp_path, "det", n=4)
    cache = DecodedImageCache(source)
    for i in range(len(source)):
        img = cache.get(i)
        assert (img == source.load_image(i)).all()
        with pytest.raises(ValueError):
            img[0, 0, 0] = 1
    assert cache.nbytes == cache_bytes(source) == sum(3 * h * w for h, w in source.all_hw())


def test_one_decode_per_distinct_file(tmp_path):
    write_source(tmp_path, "det", [(rect_scene(20, 30, (2, 2, 10, 10)), rect_targets((2, 2, 10, 10), "det"))])
    b = SourceBuilder(fields=())
    for k in range(3):  # three samples, one file
        b.add("img0.png", k, (20, 30), rect_targets((2, 2, 10, 10), "det"))
    source = b.build(root=tmp_path, class_names=["a", "b"], category_ids=[0, 1])
    calls = []
    cache = DecodedImageCache(source, lambda i: calls.append(i) or source.load_image(i))
    assert len(calls) == 1 and cache.num_files == 1 and cache.nbytes == 3 * 20 * 30
    assert (cache.get(2) == cache.get(0)).all()


def test_cached_training_samples_equal_uncached_ones(tmp_path):
    source = rect_source(tmp_path, "det", n=5, seed=2)
    plain = TrainDataset(source, 64, "s", seed=1)
    cached = TrainDataset(source, 64, "s", seed=1, cache_images=True)
    for i in range(5):
        a, b = plain[(0, i)], cached[(0, i)]
        assert (a.image == b.image).all()
        np.testing.assert_array_equal(a.targets.boxes, b.targets.boxes)
