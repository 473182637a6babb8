"""The label index: a later scan reads only the files that changed, and gives exactly what a full scan gives."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

import lucidyolo.data.core_shares as core_shares
import lucidyolo.data.label_index as label_index
from lucidyolo.data.image_io import BadImagesError
from lucidyolo.data.yolo import list_split, parse_yolo_yaml, read_yolo
from lucidyolo.errors import DataError
from tests.task_fields import fields_of

from .conftest import run_data_cli

PAST_NS = 1_600_000_000 * 10**9
"""A file time well before any scan here: such files are not "racily" recent (label_index.RACY_NS)."""


def _age(root: Path) -> None:
    """Set every file's times into the past, as a dataset copied in yesterday has."""
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, ns=(PAST_NS, PAST_NS))


@pytest.fixture
def root(synth, tmp_path) -> Path:
    out = tmp_path / "root"
    shutil.copytree(synth("seg", "yolo", n=12), out)
    _age(out)
    return out


@pytest.fixture
def index_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "index"
    monkeypatch.setenv(label_index.INDEX_DIR_ENV, str(folder))
    monkeypatch.delenv(label_index.INDEX_ENV, raising=False)
    return folder


@pytest.fixture
def reads(monkeypatch) -> list[list[str]]:
    """The image paths of every :func:`label_index.read_files` call, in order."""
    calls: list[list[str]] = []
    real = label_index.read_files

    def spy(reader, images, labels, rels, positions):
        calls.append(list(images))
        return real(reader, images, labels, rels, positions)

    monkeypatch.setattr(label_index, "read_files", spy)
    return calls


def _unindexed(yaml: Path, split: str, fields, monkeypatch) -> object:
    with monkeypatch.context() as m:
        m.setenv(label_index.INDEX_ENV, "off")
        return read_yolo(yaml, split, fields)


def assert_same(a, b) -> None:
    """Two splits are equal array for array (and in what the reader records beside them)."""
    x, y = a.to_arrays(), b.to_arrays()
    assert sorted(x) == sorted(y)
    for k in x:
        assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]), k
    assert (a.labels_from, a.images_without_label_file, a.name, a.layout) == (
        b.labels_from, b.images_without_label_file, b.name, b.layout)


@pytest.mark.parametrize("task", ["det", "seg", "obb", "keypoints"])
def test_cold_and_warm_scans_equal_an_unindexed_read(synth, tmp_path, index_dir, reads, monkeypatch, task):
    root = tmp_path / "root"
    shutil.copytree(synth(task, "yolo", n=12), root)
    _age(root)
    (root / "labels" / "train" / sorted(os.listdir(root / "labels" / "train"))[0]).unlink()  # a background image
    yaml, fields = root / "data.yaml", fields_of(task)
    plain = _unindexed(yaml, "train", fields, monkeypatch)
    cold = read_yolo(yaml, "train", fields)
    warm = read_yolo(yaml, "train", fields)
    assert [len(c) for c in reads] == [len(plain), len(plain), 0], "the warm scan read files"
    assert plain.images_without_label_file == 1
    assert_same(cold, plain)
    assert_same(warm, plain)
    assert len(list(index_dir.iterdir())) == 1


def test_editing_one_label_file_rereads_exactly_that_file(root, index_dir, reads):
    yaml, fields = root / "data.yaml", fields_of("seg")
    read_yolo(yaml, "train", fields)
    labels = sorted((root / "labels" / "train").iterdir())
    edited = labels[5]
    rows = edited.read_text().splitlines()
    edited.write_text("\n".join(rows[:1]) + "\n")  # keep its first instance only
    os.utime(edited, ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    after = read_yolo(yaml, "train", fields)
    image = next(p for p in list_split(parse_yolo_yaml(yaml), "train").files if Path(p).stem == edited.stem)
    assert reads[1] == [image]
    assert after.instances_per_image()[5] == 1
    reads.clear()
    read_yolo(yaml, "train", fields)
    assert reads == [[]], "the spliced index was not written"


def test_removed_and_added_images_leave_and_join_in_listing_order(root, index_dir, reads, monkeypatch):
    yaml, fields = root / "data.yaml", fields_of("seg")
    read_yolo(yaml, "train", fields)
    images = sorted((root / "images" / "train").iterdir())
    images[2].unlink()
    added = images[7].with_name("0a_new" + images[7].suffix)  # sorts first
    shutil.copy(images[7], added)
    shutil.copy(root / "labels" / "train" / (images[7].stem + ".txt"), root / "labels" / "train" / "0a_new.txt")
    _age(root)
    spliced = read_yolo(yaml, "train", fields)
    assert reads[1] == [str(added)]
    assert_same(spliced, _unindexed(yaml, "train", fields, monkeypatch))


def test_a_file_changed_during_the_scan_is_read_again_next_time(root, index_dir, reads):
    # file times tick coarsely: a rewrite of the same size in the same tick would keep its key
    yaml, fields = root / "data.yaml", fields_of("seg")
    fresh = sorted((root / "labels" / "train").iterdir())[3]
    os.utime(fresh, ns=(time.time_ns(), time.time_ns()))
    read_yolo(yaml, "train", fields)
    read_yolo(yaml, "train", fields)
    assert [Path(p).stem for p in reads[1]] == [fresh.stem]


def test_bad_images_are_remembered_with_their_reasons(root, index_dir, reads):
    yaml, fields = root / "data.yaml", fields_of("seg")
    broken = sorted((root / "images" / "train").iterdir())[4]
    broken.write_bytes(b"not an image")
    os.utime(broken, ns=(PAST_NS, PAST_NS))
    with pytest.raises(BadImagesError) as first:
        read_yolo(yaml, "train", fields)
    with pytest.raises(BadImagesError) as second:
        read_yolo(yaml, "train", fields)
    assert reads[1] == []
    assert second.value.bad == first.value.bad and first.value.bad[0][0] == broken
    assert_same(second.value.rest, first.value.rest)


def test_another_yaml_or_pixel_limit_rescans_everything(root, index_dir, reads, monkeypatch):
    yaml, fields = root / "data.yaml", fields_of("seg")
    read_yolo(yaml, "train", fields)
    yaml.write_text(yaml.read_text() + "\n# edited\n")
    read_yolo(yaml, "train", fields)
    from lucidyolo.data import pixel_limit

    # the limit in force (an in-process fit earlier in this worker may have set it, over the environment)
    monkeypatch.setattr(pixel_limit, "_limit", pixel_limit.max_image_pixels() - 1)
    read_yolo(yaml, "train", fields)
    n = len(reads[0])
    assert [len(c) for c in reads] == [n, n, n]
    assert len(list(index_dir.iterdir())) == 1, "a stale index is replaced, not kept beside"


def test_a_corrupt_index_is_refused_with_a_warning_and_rebuilt(root, index_dir, reads, monkeypatch):
    yaml, fields = root / "data.yaml", fields_of("seg")
    read_yolo(yaml, "train", fields)
    (index,) = index_dir.iterdir()
    index.write_bytes(index.read_bytes()[:200])
    with pytest.warns(UserWarning, match="cannot be read.*scanned again"):
        rebuilt = read_yolo(yaml, "train", fields)
    assert_same(rebuilt, _unindexed(yaml, "train", fields, monkeypatch))
    read_yolo(yaml, "train", fields)
    assert len(reads[-1]) == 0


def test_index_off_writes_nothing(root, index_dir, monkeypatch):
    monkeypatch.setenv(label_index.INDEX_ENV, "off")
    read_yolo(root / "data.yaml", "train", fields_of("seg"))
    assert not index_dir.exists()


def test_every_core_reads_a_share_and_the_result_is_the_one_process_result(root, index_dir, monkeypatch):
    yaml, fields = root / "data.yaml", fields_of("seg")
    broken = sorted((root / "images" / "train").iterdir())[6]
    broken.write_bytes(b"")
    with pytest.raises(BadImagesError) as alone:  # 12 files: below PARALLEL_MIN, one process reads them
        _unindexed(yaml, "train", fields, monkeypatch)
    monkeypatch.setattr(label_index, "PARALLEL_MIN", 2)
    monkeypatch.setattr(core_shares, "available_cores", lambda: 2)
    with pytest.raises(BadImagesError) as shared:
        read_yolo(yaml, "train", fields)
    assert [p for p, _ in shared.value.bad] == [p for p, _ in alone.value.bad] == [broken]
    assert_same(shared.value.rest, alone.value.rest)


def test_the_first_malformed_label_in_listing_order_is_named_when_shares_read_in_parallel(root, index_dir, monkeypatch):
    yaml, fields = root / "data.yaml", fields_of("seg")
    labels = sorted((root / "labels" / "train").iterdir())
    labels[9].write_text("0 0.1 0.1 0.2\n")
    labels[2].write_text("7 0.1 0.1 0.2 0.2 0.3 0.1\n")
    monkeypatch.setattr(label_index, "PARALLEL_MIN", 2)
    monkeypatch.setattr(core_shares, "available_cores", lambda: 2)
    with pytest.raises(DataError, match=rf"{labels[2].name}:1: class id 7"):
        read_yolo(yaml, "train", fields)
    assert not index_dir.exists() or not list(index_dir.iterdir()), "a failed scan wrote an index"


def test_listing_keeps_path_order_where_string_order_differs(tmp_path, synth, index_dir):
    root = tmp_path / "root"
    shutil.copytree(synth("det", "yolo", n=6), root)
    imgs = root / "images" / "train"
    lbls = root / "labels" / "train"
    files = sorted(imgs.iterdir())
    for sub, img in (("a", files[0]), ("a-b", files[1])):
        for folder, f, suffix in ((imgs, img, img.suffix), (lbls, lbls / (img.stem + ".txt"), ".txt")):
            (folder / sub).mkdir(exist_ok=True)
            f.rename(folder / sub / ("x" + suffix))
    listed = list_split(parse_yolo_yaml(root / "data.yaml"), "train").files
    assert listed == [str(p) for p in sorted(Path(p) for p in listed)]
    assert listed.index(str(imgs / "a" / f"x{files[0].suffix}")) < listed.index(str(imgs / "a-b" / f"x{files[1].suffix}"))
    assert str(imgs / "a-b" / "x") < str(imgs / "a" / "x"), "the case this test is about"


def test_data_check_reports_the_same_counts_warm(root, index_dir):
    first = run_data_cli("check", "--data-root", str(root), "--task", "seg", "--json")
    second = run_data_cli("check", "--data-root", str(root), "--task", "seg", "--json")
    assert first.returncode == 0 and second.returncode == 0, first.stdout + first.stderr
    assert first.stdout == second.stdout
    assert list(index_dir.iterdir()), "data check wrote no index"


def test_label_paths_of_a_listing_are_label_path_for_each_image():
    from lucidyolo.data.yolo import _label_paths, label_path_for

    images = ["/d/images/train/a.jpg", "/d/images/train/x.tar.png", "/d/images/v.1/noext", "/d/images/t/.hidden",
              "/d/images/t/name.", "/d/images/t/images/b.jpeg", "/d/other/c.jpg", "/d/images.x/images/e.webp"]
    assert _label_paths(images) == [str(label_path_for(Path(p))) for p in images]


def test_an_index_unused_for_months_is_removed_and_a_used_one_kept(root, index_dir):
    yaml, fields = root / "data.yaml", fields_of("seg")
    read_yolo(yaml, "train", fields)
    (index,) = index_dir.glob("*.npz")
    stale = index_dir / "0123456789abcdef01234567.npz"
    stale.write_bytes(b"an index of a dataset that moved")
    months_ago = time.time() - (label_index.UNUSED_DAYS + 1) * 86400
    os.utime(stale, (months_ago, months_ago))
    os.utime(index, (months_ago, months_ago))
    read_yolo(yaml, "train", fields)  # a hit: the index is used, so it is kept
    assert index.stat().st_mtime > months_ago
    read_yolo(yaml, "val", fields)  # a scan that writes prunes the folder
    assert not stale.exists() and index.exists()
