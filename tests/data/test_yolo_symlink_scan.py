"""The YOLO folder scan and symbolic links (issue 45, defect 2).

``images/train/loopdir -> ..`` made the scan walk ``images/`` and take the val
images into training as unlabelled backgrounds; broken and self links were
dropped without a word. Links that lead back above the split, or into another
split, are now skipped and reported; a shared store reached through a link is
still read.
"""

from __future__ import annotations

from pathlib import Path

from lucidyolo.data.yolo import _image_files, list_split, parse_yolo_yaml, skipped_links_warning


def _files(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_bytes(b"")  # the scan looks at names only; no image is decoded


def _tree(tmp_path: Path) -> Path:
    """``root/images/{train,val}`` with two images each, and a store outside the root."""
    root = tmp_path / "root"
    _files(root / "images" / "train", "t0.jpg", "t1.jpg")
    _files(root / "images" / "val", "v0.jpg", "v1.jpg")
    _files(tmp_path / "store" / "sub", "s0.jpg")
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [a]\n")
    return root


def test_loops_links_into_val_and_dead_links_are_skipped_with_their_reason(tmp_path):
    root = _tree(tmp_path)
    train, val = root / "images" / "train", root / "images" / "val"
    (train / "up").symlink_to("..")  # images/: holds val
    (train / "here").symlink_to(".")  # the split folder itself
    (train / "top").symlink_to(root)  # the root, by an absolute path
    (train / "peek").symlink_to("../val")
    (train / "v0.jpg").symlink_to("../val/v0.jpg")  # a single file of val
    (train / "gone.jpg").symlink_to("nowhere.jpg")
    (train / "self").symlink_to("self")
    found, followed, skipped = _image_files(train, {"val": [val]})
    assert [p.name for p in map(Path, found)] == ["t0.jpg", "t1.jpg"]
    assert not followed
    assert [(p.name, why) for p, why in skipped] == [
        ("gone.jpg", "broken link"), ("here", "loop"), ("peek", "into split 'val'"), ("self", "loop"),
        ("top", "loop"), ("up", "loop"), ("v0.jpg", "into split 'val'"),
    ]


def test_a_shared_store_behind_a_link_is_read_and_a_ring_inside_it_is_cut(tmp_path):
    root = _tree(tmp_path)
    train = root / "images" / "train"
    (train / "shared").symlink_to(tmp_path / "store")
    (train / "again").symlink_to(tmp_path / "store")  # the same store twice: listed once
    (tmp_path / "store" / "sub" / "back").symlink_to("..")  # a ring inside the store
    found, followed, skipped = _image_files(train, {"val": [root / "images" / "val"]})
    assert followed
    assert sorted(p.name for p in map(Path, found)) == ["s0.jpg", "t0.jpg", "t1.jpg"]
    assert [(p.name, why) for p, why in skipped] == [("back", "loop")]


def test_a_ring_through_two_folders_outside_the_root_is_a_loop(tmp_path):
    root = _tree(tmp_path)
    train = root / "images" / "train"
    _files(tmp_path / "one", "o.jpg")
    _files(tmp_path / "two", "w.jpg")
    (train / "one").symlink_to(tmp_path / "one")
    (tmp_path / "one" / "two").symlink_to(tmp_path / "two")
    (tmp_path / "two" / "one").symlink_to(tmp_path / "one")  # back to where the walk came from
    found, _, skipped = _image_files(train, {})
    assert sorted(p.name for p in map(Path, found)) == ["o.jpg", "t0.jpg", "t1.jpg", "w.jpg"]
    assert [(p.relative_to(train).as_posix(), why) for p, why in skipped] == [("one/two/one", "loop")]


def test_a_link_to_a_folder_of_this_split_is_followed_once(tmp_path):
    root = _tree(tmp_path)
    train = root / "images" / "train"
    _files(train / "part", "p0.jpg")
    (train / "alias").symlink_to("part")
    found, _, skipped = _image_files(train, {"val": [root / "images" / "val"]})
    assert sorted(p.name for p in map(Path, found)) == ["p0.jpg", "t0.jpg", "t1.jpg"] and skipped == []


def test_list_split_knows_the_other_splits_and_the_warning_names_the_links(tmp_path):
    root = _tree(tmp_path)
    train = root / "images" / "train"
    (train / "loopdir").symlink_to("..")
    (train / "gone.jpg").symlink_to("nowhere.jpg")
    files = list_split(parse_yolo_yaml(root / "data.yaml"), "train")
    assert [p.name for p in files.images] == ["t0.jpg", "t1.jpg"]
    assert files.skipped_links == [(train / "gone.jpg", "broken link"), (train / "loopdir", "loop")]
    message = skipped_links_warning("train", files.skipped_links)
    assert message is not None
    assert message.startswith(f"2 symbolic link(s) below the train split's folder were skipped: {train / 'gone.jpg'} "
                              f"(broken link), {train / 'loopdir'} (loop).")
    assert skipped_links_warning("train", []) is None
    many = [(train / f"l{i}", "loop") for i in range(8)]
    assert f"{train / 'l4'} (loop) and 3 more." in skipped_links_warning("train", many)
