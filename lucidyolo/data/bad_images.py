"""``--data.skip_bad_images``: train on what is left of a split whose image files cannot be used.

Off by default: a bad file usually means a broken copy, and the user should see
it before hours of training. When on, every file the readers could not open and
every file :func:`~lucidyolo.data.check.scan_bad_images` refuses (unreadable
header, truncated, float pixels, size differs from the annotations) is left
out, with its reason, before training starts. Corruption inside the pixel data
of a file with an intact header and end marker is only found by a full decode
(``lucid data check --decode``); such a file still stops the run where it is read.
No torch.
"""

from __future__ import annotations

from pathlib import Path

from lucidyolo.data.source import ImageSource


def drop_bad_images(src: ImageSource) -> tuple[ImageSource, list[tuple[Path, str]]]:
    """``(the split without its bad files, [(path, reason)] of every file left out)``.

    Files the reader already left out (``src.unreadable_images``) come first.
    """
    from lucidyolo.data.check import scan_bad_images

    bad = scan_bad_images(src, decode=False)
    index = {src.image_path(i): i for i in range(len(src))} if bad else {}
    rest = src.without([index[p] for p, _ in bad if p in index])
    return rest, [*src.unreadable_images, *bad]


def bad_images_report(skipped: dict[str, list[tuple[Path, str]]]) -> str:
    """The ``bad_images.txt`` of a run: one ``split<TAB>path<TAB>reason`` line per file left out."""
    return "".join(f"{split}\t{path}\t{reason}\n" for split, rows in skipped.items() for path, reason in rows)
