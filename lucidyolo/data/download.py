"""``lucid data download coco``: resumable, verified, atomic dataset download.

Each archive streams to ``{root}/.downloads/{file}.part`` and resumes with an
HTTP ``Range`` request after an interruption. A finished archive is checked
against the manifest checksum (SHA-256, or MD5 where only that is published),
extracted into a temporary folder inside the root and only then renamed into
place, so a half-extracted split never looks complete. Work already done is
skipped. urllib only (no extra dependency).

The base URL and the manifest are overridable (arguments, or the environment
variables ``LUCIDYOLO_COCO_MIRROR`` and ``LUCIDYOLO_COCO_MANIFEST`` naming a
JSON manifest file) for mirrors and tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lucidyolo.errors import DataError, UserError

COCO_BASE_URL = "http://images.cocodataset.org/"
_CHUNK = 1 << 20
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Archive:
    """One downloadable archive.

    Attributes:
        url_path: path under the base URL.
        provides: top-level entries the archive extracts to (e.g. ``train2017``).
        splits: splits that need this archive.
        sha256: expected SHA-256 hex digest, or ``None``.
        md5: expected MD5 hex digest (used when no SHA-256 is known), or ``None``.
    """

    url_path: str
    provides: tuple[str, ...]
    splits: tuple[str, ...]
    sha256: str | None = None
    md5: str | None = None

    @property
    def file_name(self) -> str:
        return self.url_path.rsplit("/", 1)[-1]


# The COCO site publishes MD5 sums only; these are the widely mirrored values
# for the 2017 archives. A mirror manifest may give SHA-256 instead.
COCO_MANIFEST: tuple[Archive, ...] = (
    Archive("zips/train2017.zip", ("train2017",), ("train",), md5="cced6f7f71b7629ddf16f17bbcfab6b2"),
    Archive("zips/val2017.zip", ("val2017",), ("val",), md5="442b8da7639aecaf257c1dceb8ba8c80"),
    Archive("annotations/annotations_trainval2017.zip", ("annotations",), ("train", "val"), md5="f4bbac642086de4f52a3fdda2de5fa2c"),
)


def load_manifest(path: Path) -> tuple[Archive, ...]:
    """Read a JSON manifest: a list of ``{url_path, provides, splits, sha256|md5}``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return tuple(
            Archive(
                str(e["url_path"]),
                tuple(e["provides"]),
                tuple(e["splits"]),
                e.get("sha256"),
                e.get("md5"),
            )
            for e in raw
        )
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"Download manifest {path} is unreadable ({exc}).", fix="Give a JSON list of {url_path, provides, splits, sha256}.") from None


def file_digest(path: Path, algo: str) -> str:
    """Hex digest of a file, streamed."""
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def download_timeout() -> float:
    """Seconds a download waits for the server's next bytes: ``LUCIDYOLO_DOWNLOAD_TIMEOUT``, default 60."""
    text = os.environ.get("LUCIDYOLO_DOWNLOAD_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise UserError(f"LUCIDYOLO_DOWNLOAD_TIMEOUT={text!r} is not a number of seconds above 0.",
                        fix=f"Set it to e.g. 120, or unset it for the default {DEFAULT_TIMEOUT_S:g} s.")
    return value


def fetch(url: str, dest: Path, progress: Callable[[int, int | None], None] | None = None,
          timeout: float | None = None) -> Path:
    """Download ``url`` to ``dest`` via ``dest.part``, resuming a partial file.

    ``timeout``: seconds to wait for the server's next bytes (default :func:`download_timeout`); a server
    that stalls longer ends the download with the partial file kept.

    Returns:
        ``dest`` once complete (the ``.part`` is renamed).

    Raises:
        DataError: network or HTTP failure (the ``.part`` stays for a resume; a folder this call made
            for it is removed again when nothing arrived).
    """
    timeout = download_timeout() if timeout is None else timeout
    part = dest.with_name(dest.name + ".part")
    made = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _fetch(url, dest, part, progress, timeout)
    except DataError:
        if part.exists() and part.stat().st_size == 0:
            part.unlink()
        for folder in made:  # innermost first: only the folders this call made, and only while empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _fetch(url: str, dest: Path, part: Path, progress: Callable[[int, int | None], None] | None,
           timeout: float) -> Path:
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url)
    if have:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the partial file is already complete
            os.replace(part, dest)
            return dest
        raise DataError(f"Download of {url} failed: HTTP {exc.code} {exc.reason}.", fix="Check the mirror URL and retry.") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DataError(
            f"Download of {url} failed ({getattr(exc, 'reason', exc)}).",
            why="the network or the server is unreachable.",
            fix="Retry later; the partial file is kept and the download resumes.",
        ) from None
    with resp:
        resumed = resp.status == 206
        mode = "ab" if resumed else "wb"
        if not resumed:
            have = 0
        length = resp.headers.get("Content-Length")
        total = (have + int(length)) if length is not None else None
        try:
            with open(part, mode) as f:
                for chunk in iter(lambda: resp.read1(_CHUNK), b""):  # read1: what arrived is kept on a stall
                    f.write(chunk)
                    have += len(chunk)
                    if progress is not None:
                        progress(have, total)
        except TimeoutError:
            raise DataError(
                f"Download of {url} stalled: no data for {timeout:g} s after {have} bytes.",
                why="the server stopped sending.",
                fix="Run the same command again to resume (the bytes received are kept); set "
                "LUCIDYOLO_DOWNLOAD_TIMEOUT (seconds) to wait longer.",
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise DataError(f"Download of {url} was interrupted ({exc}).", fix="Run the same command again to resume.") from None
    if total is not None and have != total:
        raise DataError(f"Download of {url} ended at {have} of {total} bytes.", fix="Run the same command again to resume.")
    os.replace(part, dest)
    return dest


def verify_archive(path: Path, archive: Archive) -> None:
    """Compare the archive's digest with the manifest; delete it on mismatch.

    Raises:
        DataError: the digest differs (the file is removed so a rerun refetches).
    """
    algo, want = ("sha256", archive.sha256) if archive.sha256 else ("md5", archive.md5)
    if not want:
        return
    got = file_digest(path, algo)
    if got.lower() != want.lower():
        path.unlink(missing_ok=True)
        raise DataError(
            f"{archive.file_name}: {algo} {got} does not match the manifest ({want}).",
            why="the download is corrupt or the mirror serves a different file.",
            fix="Run the command again to refetch, or fix the mirror/manifest.",
        )


def extract_atomically(archive_path: Path, root: Path, provides: tuple[str, ...]) -> None:
    """Extract into a temp folder inside ``root``, then rename each provided entry into place."""
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=root))
    try:
        try:
            with zipfile.ZipFile(archive_path) as z:
                for m in z.namelist():
                    # Refuse members that would land outside the temp folder.
                    target = (tmp / m).resolve()
                    if not str(target).startswith(str(tmp.resolve()) + os.sep) and target != tmp.resolve():
                        raise DataError(f"{archive_path}: member {m!r} escapes the extraction folder.")
                z.extractall(tmp)
        except zipfile.BadZipFile as exc:
            archive_path.unlink(missing_ok=True)
            raise DataError(f"{archive_path} is not a valid zip ({exc}).", fix="Run the command again to refetch.") from None
        for name in provides:
            src = tmp / name
            if not src.exists():
                raise DataError(f"{archive_path.name} does not contain {name}/.", fix="Check the manifest's 'provides' entries.")
        for name in provides:
            dst = root / name
            if dst.exists() and dst.is_dir() and name == "annotations":
                # Merge (another archive may have written other annotation files).
                for item in (tmp / name).iterdir():
                    os.replace(item, dst / item.name)
            else:
                if dst.exists():
                    shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
                os.replace(tmp / name, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _done_marker(root: Path, archive: Archive) -> Path:
    return root / ".downloads" / f"{archive.file_name}.done"


def download_coco(
    data_root: Path | str,
    splits: tuple[str, ...] | list[str] = ("train", "val"),
    verify: bool = True,
    base_url: str | None = None,
    manifest: tuple[Archive, ...] | None = None,
    keep_archives: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[str]:
    """Download and extract the COCO 2017 archives needed for ``splits``.

    Args:
        data_root: target root (becomes a layout-1 COCO container).
        splits: any of ``train``, ``val``.
        verify: check each fresh archive's checksum before extracting.
        base_url: mirror base URL (default env ``LUCIDYOLO_COCO_MIRROR`` or
            the official site).
        manifest: archives to use (default env ``LUCIDYOLO_COCO_MANIFEST`` or
            :data:`COCO_MANIFEST`).
        keep_archives: keep the zip files after extraction.
        log: receives one line per step.

    Returns:
        One status line per archive (``downloaded``/``skipped``).

    Raises:
        DataError: unknown split, network failure, checksum mismatch, bad zip.
    """
    root = Path(data_root)
    say = log or (lambda _m: None)
    base = base_url or os.environ.get("LUCIDYOLO_COCO_MIRROR") or COCO_BASE_URL
    if not base.endswith("/"):
        base += "/"
    if manifest is None:
        env = os.environ.get("LUCIDYOLO_COCO_MANIFEST")
        manifest = load_manifest(Path(env)) if env else COCO_MANIFEST
    known = sorted({s for a in manifest for s in a.splits})
    bad = [s for s in splits if s not in known]
    if bad or not splits:
        raise UserError(f"Unknown split(s) {bad or splits} for COCO download.", fix=f"Use a comma list of {', '.join(known)}.")
    made = [p for p in (root, *root.parents) if not p.exists()]
    root.mkdir(parents=True, exist_ok=True)
    try:
        return _download(root, manifest, splits, verify, base, keep_archives, say)
    except UserError:
        # a failed download leaves no empty folder behind (rmdir refuses a folder that holds anything)
        for folder in (root / ".downloads", *made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _download(root: Path, manifest: tuple[Archive, ...], splits: tuple[str, ...] | list[str], verify: bool,
              base: str, keep_archives: bool, say: Callable[[str], None]) -> list[str]:
    status: list[str] = []
    for archive in manifest:
        if not set(archive.splits) & set(splits):
            continue
        marker = _done_marker(root, archive)
        if marker.is_file() and all((root / p).exists() for p in archive.provides):
            status.append(f"{archive.file_name}: skipped (already extracted)")
            say(status[-1])
            continue
        dest = root / ".downloads" / archive.file_name
        if not dest.exists():
            say(f"{archive.file_name}: downloading from {base}{archive.url_path}")
            fetch(base + archive.url_path, dest)
        if verify:
            say(f"{archive.file_name}: verifying checksum")
            verify_archive(dest, archive)
        say(f"{archive.file_name}: extracting")
        extract_atomically(dest, root, archive.provides)
        marker.write_text(json.dumps({"provides": list(archive.provides)}))
        if not keep_archives:
            dest.unlink(missing_ok=True)
        status.append(f"{archive.file_name}: downloaded and extracted")
        say(status[-1])
    return status
