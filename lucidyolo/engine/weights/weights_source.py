"""``--model.weights SOURCE``: a checkpoint file, a run directory or a URL, resolved to one local file.

URLs (``http://``, ``https://``, ``file://``) download once into the user cache
(``<cache>/weights/<hash of the URL>/<file name>``) through the dataset
downloader (:func:`lucidyolo.data.download.fetch`: a ``.part`` file resumed
with an HTTP ``Range`` request after an interruption). A SHA-256 given with
``--model.weights_sha256`` or as a ``#sha256=HEX`` suffix is checked on every
use; a mismatch deletes a downloaded file (a local file is never deleted) and
stops the command. Nothing here unpickles: the caller reads the file through
:func:`lucidyolo.engine.weights.checkpoint.load_checkpoint`.
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from lucidyolo.errors import ConfigError, UserError

URL_SCHEMES = ("http", "https", "file")
_SHA_SUFFIX = re.compile(r"#sha256=([0-9a-fA-F]{64})$")


def split_digest(source: str, sha256: str | None) -> tuple[str, str | None]:
    """``(source without a #sha256= suffix, expected digest or None)``; two different digests are refused."""
    found = _SHA_SUFFIX.search(source)
    if found is None:
        return source, sha256
    digest = found.group(1).lower()
    if sha256 is not None and sha256.lower() != digest:
        raise ConfigError(
            "Two different SHA-256 digests were given for `model.weights`.",
            why=f"the `#sha256=` suffix says {digest}, `--model.weights_sha256` says {sha256.lower()}.",
            fix="Give the digest once.",
        )
    return source[: found.start()], digest


def is_url(source: str) -> bool:
    return urllib.parse.urlsplit(source).scheme.lower() in URL_SCHEMES


def cached_path(url: str, cache: Path) -> Path:
    """Where ``url`` lives in the cache: one folder per URL, the URL's own file name inside."""
    parts = urllib.parse.urlsplit(url)
    name = Path(urllib.parse.unquote(parts.path)).name or "weights.ckpt"
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    return cache / "weights" / key / name


def resolve_weights(
    source: str, sha256: str | None = None, cache: Path | None = None,
    progress: Callable[[int, int | None], None] | None = None, log: Callable[[str], None] | None = None,
) -> Path:
    """The local file ``source`` names, downloaded and verified as needed.

    Args:
        source: a file, a run directory (``checkpoints/best.ckpt``, else ``last.ckpt``), or a URL,
            optionally ending in ``#sha256=HEX``.
        sha256: expected digest (hex), or None.
        cache: cache root (default: :func:`lucidyolo.data.user_cache.cache_dir`).
        progress: ``progress(bytes_done, bytes_total_or_None)`` while downloading.
        log: receives one line when a download starts.

    Raises:
        UserError: the file or folder does not exist, the folder holds no checkpoint, a download
            fails (the partial file is kept for a resume), or the digest differs.
    """
    source, digest = split_digest(source.strip(), sha256)
    scheme = urllib.parse.urlsplit(source).scheme.lower()
    if scheme == "file":
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(source).path))
    elif scheme in ("http", "https"):
        if cache is None:
            from lucidyolo.data.user_cache import cache_dir

            cache = cache_dir()
        path = cached_path(source, cache)
        if not path.is_file():
            from lucidyolo.data.download import fetch

            if log is not None:
                log(f"weights: downloading {source} -> {path}")
            fetch(source, path, progress)
        if digest is not None:
            _verify(path, digest, downloaded_from=source)
        return path
    else:
        path = Path(source).expanduser()
    path = checkpoint_in(path)
    if digest is not None:
        _verify(path, digest, downloaded_from=None)
    return path


def checkpoint_file(path: str | Path) -> Path:
    """``--checkpoint`` of eval, predict, export and restore: a run directory's checkpoint, else ``path`` unchanged.

    Anything but a directory goes on as given, so a missing file gets the checkpoint loader's own message.
    """
    path = Path(path)
    return checkpoint_in(path, "--checkpoint") if path.is_dir() else path


def checkpoint_in(path: Path, option: str = "`model.weights`") -> Path:
    """``path`` itself, or the checkpoint a run directory holds (``best.ckpt``, else ``last.ckpt``).

    ``option`` names the option in the error for a folder without one (``--checkpoint`` for eval, ...).
    """
    if path.is_file():
        return path
    if path.is_dir():
        for name in ("best.ckpt", "last.ckpt"):
            for candidate in (path / "checkpoints" / name, path / name):
                if candidate.is_file():
                    return candidate
        raise UserError(
            f"{option} names the folder {path}, which holds no checkpoint.",
            why="a run directory keeps its weights in checkpoints/best.ckpt (or last.ckpt).",
            fix="Pass a run directory (runs/<task>/version_N), a checkpoint or weights file, or a URL.",
        )
    raise UserError(
        f"`model.weights` file not found: {path}.",
        fix="Pass a checkpoint (.ckpt), a weights file from `lucid export --format weights`, a run directory, "
        "or an http(s):// / file:// URL.",
    )


def _verify(path: Path, digest: str, downloaded_from: str | None) -> None:
    from lucidyolo.data.download import file_digest

    got = file_digest(path, "sha256")
    if got == digest:
        return
    if downloaded_from is not None:
        path.unlink(missing_ok=True)
        raise UserError(
            f"The weights downloaded from {downloaded_from} have SHA-256 {got}, not the expected {digest}.",
            why="the file is not the one the digest describes (changed on the server, or corrupted on the way); "
            "it was deleted.",
            fix="Check the URL and the digest; the next run downloads the file again.",
        )
    raise UserError(
        f"{path} has SHA-256 {got}, not the expected {digest}.",
        why="the file is not the one the digest describes.",
        fix="Check the path and the digest (a local file is never deleted).",
    )
