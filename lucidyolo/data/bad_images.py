"""``--data.skip_bad_images``: train on what is left of a split whose image files cannot be used.

Off by default: a bad file usually means a broken copy, and the user should see
it before hours of training. When on, every file the readers could not open and
every file :func:`~lucidyolo.data.check.scan_bad_images` refuses (unreadable
header, truncated, float pixels, size differs from the annotations) is left
out, with its reason, before training starts. Corruption inside the pixel data
of a file with an intact header and end marker is only found by a full decode
(``lucid data check --decode``); such a file still stops the run where it is read,
and :func:`mid_run_image_error` says why the start-up check missed it.
No torch.
"""

from __future__ import annotations

from pathlib import Path

from lucidyolo.data.image_io import DECODE_FAILED
from lucidyolo.data.source import ImageSource
from lucidyolo.errors import DataError


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


def mid_run_image_error(exc: BaseException, resume: str | None) -> DataError | None:
    """The error for an image file that failed to decode during training, or ``None`` if ``exc`` is not one.

    Training's start-up check reads image headers only (with ``--data.skip_bad_images``, also each file's
    last 4 KiB), so a file damaged inside its data is not in its count of bad files; the message says so
    and names the two ways on. A :class:`DataError` raised in a loader worker reaches the main process
    with torch's traceback text as its message: the original message is its last line.

    Args:
        exc: what ``trainer.fit`` raised.
        resume: the command that continues the run from its last finished epoch, ``None`` before one.
    """
    if not isinstance(exc, DataError):
        return None
    what = exc.what
    if "in DataLoader worker process" in what:
        last = what.strip().splitlines()[-1]
        what = last.split(": ", 1)[-1].split(" Why: ", 1)[0]  # "lucidyolo.errors.DataError: Image file ..."
    if not what.startswith("Image file ") or DECODE_FAILED not in what:
        return None
    return DataError(
        f"{what} Found while training: the check before training reads only each image's header, so it did not count "
        "this file among the bad ones.",
        why="a file damaged inside its data (a cut-off download or copy, a bad disk block) still has a readable "
        "header; only a full decode finds it.",
        fix="List every such file with `lucid data check --data-root ROOT --decode` (decodes each image: slow) and "
        "remove or replace them; or rerun with `--data.skip_bad_images true`, which leaves out every file whose header "
        "or end is unreadable and trains on the rest. "
        + (f"The last finished epoch is saved: continue with `{resume}`." if resume else "No epoch had finished yet."),
    )
