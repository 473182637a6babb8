"""Decoded-image cache: identical pixels, one decode per distinct file, read-only, budgeted."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from lucidyolo.data import cache as cache_mod
from lucidyolo.data.cache import (
    DecodedImageCache,
    cache_bytes,
    host_available_bytes,
    want_auto_cache,
)
from lucidyolo.data.datasets import TrainDataset
from lucidyolo.data.source import SourceBuilder
from lucidyolo.errors import ConfigError, DataError
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


def test_cache_over_the_available_memory_is_refused_before_any_decode(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    source = rect_source(tmp_path, "det", n=4)
    need = sum(3 * h * w for h, w in source.all_hw())  # the documented budget, from the recorded sizes
    calls: list[int] = []

    def decode(i):
        calls.append(i)
        return source.load_image(i)

    with pytest.raises(ConfigError) as exc:
        DecodedImageCache(source, decode, available_bytes=need - 1)
    assert calls == []  # refused up front, not after minutes of decoding
    assert "data.cache_train_images" in exc.value.what and "4 distinct images" in exc.value.what
    assert "--data.cache_train_images false" in (exc.value.fix or "")
    assert DecodedImageCache(source, decode, available_bytes=need).nbytes == need  # exactly fits


def test_budget_counts_every_training_process_on_the_host(tmp_path, monkeypatch):
    source = rect_source(tmp_path, "det", n=3)
    need = sum(3 * h * w for h, w in source.all_hw())
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two DDP ranks, one cache each
    with pytest.raises(ConfigError, match="x 2 training processes"):
        DecodedImageCache(source, available_bytes=2 * need - 1)
    assert DecodedImageCache(source, available_bytes=2 * need).nbytes == need


def test_available_memory_is_memavailable_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384000 kB\nMemFree:          100000 kB\nMemAvailable:    1234567 kB\n")
    assert host_available_bytes(str(meminfo)) == 1234567 * 1024


def test_fill_keeps_no_decoded_image_alive_beyond_its_slot(tmp_path):
    # A list of decoded arrays first would hold every image twice at the end of the fill.
    source = rect_source(tmp_path, "det", n=5, seed=3)
    alive: list[weakref.ref] = []

    def decode(i):
        gc.collect()
        assert all(r() is None for r in alive), "an earlier decoded image is still referenced"
        image = source.load_image(i)
        alive.append(weakref.ref(image))
        return image

    cache = DecodedImageCache(source, decode, available_bytes=None)
    assert len(alive) == 5
    for i in range(5):
        assert (cache.get(i) == source.load_image(i)).all()


def test_file_whose_size_disagrees_with_its_record_is_named(tmp_path):
    write_source(tmp_path, "det", [(rect_scene(20, 30, (2, 2, 10, 10)), rect_targets((2, 2, 10, 10), "det"))])
    b = SourceBuilder(fields=())
    b.add("img0.png", 0, (24, 30), rect_targets((2, 2, 10, 10), "det"))  # the record is wrong
    source = b.build(root=tmp_path, class_names=["a", "b"], category_ids=[0, 1])
    with pytest.raises(DataError, match=r"img0\.png: file decodes to 20x30 but the annotations say 24x30"):
        DecodedImageCache(source, available_bytes=None)


def test_auto_cache_takes_small_splits_within_a_quarter_of_free_memory():
    gib = 1 << 30
    assert want_auto_cache(100 << 20, available=8 * gib)
    assert want_auto_cache(gib, available=4 * gib)  # at both limits
    assert not want_auto_cache(gib + 1, available=64 * gib)  # over the byte cap, however much RAM
    assert not want_auto_cache(100 << 20, available=(400 << 20) - 1)  # more than a quarter of what is free
    assert not want_auto_cache(600 << 20, available=64 * gib, ranks=2)  # two ranks on the host: 1.2 GB
    assert want_auto_cache(100 << 20, available=None)  # unknown memory: the cap alone


def test_training_dataset_auto_cache_follows_the_rule(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    source = rect_source(tmp_path, "det", n=3)
    assert TrainDataset(source, 64, "n", cache_images="auto").cache is not None
    monkeypatch.setattr(cache_mod, "AUTO_CACHE_MAX_BYTES", cache_bytes(source) - 1)
    assert TrainDataset(source, 64, "n", cache_images="auto").cache is None
