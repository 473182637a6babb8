"""`download_coco` against a local Range-capable HTTP server: fresh, resume, bad checksum, skip."""

from __future__ import annotations

import hashlib
import http.server
import io
import threading
import zipfile
from pathlib import Path

import pytest

from lucidyolo.data.download import Archive, download_coco
from lucidyolo.errors import DataError


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buf.getvalue()


class _Server:
    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.requests: list[tuple[str, str | None]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                rng = self.headers.get("Range")
                outer.requests.append((self.path, rng))
                data = outer.files.get(self.path.lstrip("/"))
                if data is None:
                    self.send_error(404)
                    return
                start = int(rng.split("=")[1].rstrip("-")) if rng else 0
                body = data[start:]
                self.send_response(206 if rng else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    imgs = _zip({"val2017/000001.jpg": b"x" * 5000, "val2017/000002.jpg": b"y" * 3000})
    anns = _zip({"annotations/instances_val2017.json": b"{}"})
    s = _Server({"zips/val2017.zip": imgs, "annotations/ann.zip": anns})
    s.manifest = (
        Archive("zips/val2017.zip", ("val2017",), ("val",), sha256=hashlib.sha256(imgs).hexdigest()),
        Archive("annotations/ann.zip", ("annotations",), ("val",), sha256=hashlib.sha256(anns).hexdigest()),
    )
    yield s
    s.httpd.shutdown()


def test_fresh_download_extracts_and_second_run_skips(tmp_path: Path, server):
    status = download_coco(tmp_path, ["val"], base_url=server.url, manifest=server.manifest)
    assert all("downloaded" in s for s in status)
    assert (tmp_path / "val2017" / "000001.jpg").read_bytes() == b"x" * 5000
    assert (tmp_path / "annotations" / "instances_val2017.json").is_file()
    assert not list(tmp_path.glob(".extract-*"))
    n = len(server.requests)
    status = download_coco(tmp_path, ["val"], base_url=server.url, manifest=server.manifest)
    assert all("skipped" in s for s in status)
    assert len(server.requests) == n  # nothing fetched again


def test_partial_download_resumes_with_range(tmp_path: Path, server):
    data = server.files["zips/val2017.zip"]
    part = tmp_path / ".downloads" / "val2017.zip.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:1000])
    download_coco(tmp_path, ["val"], base_url=server.url, manifest=server.manifest[:1])
    assert ("/zips/val2017.zip", "bytes=1000-") in server.requests
    assert (tmp_path / "val2017" / "000002.jpg").read_bytes() == b"y" * 3000


def test_bad_checksum_is_refused_and_nothing_extracted(tmp_path: Path, server):
    bad = (Archive("zips/val2017.zip", ("val2017",), ("val",), sha256="0" * 64),)
    with pytest.raises(DataError, match="does not match"):
        download_coco(tmp_path, ["val"], base_url=server.url, manifest=bad)
    assert not (tmp_path / "val2017").exists()
    assert not (tmp_path / ".downloads" / "val2017.zip").exists()  # removed so a rerun refetches


def test_unknown_split_is_a_user_error(tmp_path: Path, server):
    with pytest.raises(Exception, match="Unknown split"):
        download_coco(tmp_path, ["test"], base_url=server.url, manifest=server.manifest)


def test_a_failed_download_leaves_no_empty_folders(tmp_path: Path, server):
    root = tmp_path / "coco"
    bad = (Archive("zips/val2017.zip", ("val2017",), ("val",), sha256="0" * 64),)
    with pytest.raises(DataError, match="does not match"):
        download_coco(root, ["val"], base_url=server.url, manifest=bad)
    assert not root.exists()  # neither the root this call made nor an empty .downloads/
    missing = (Archive("zips/nothing.zip", ("val2017",), ("val",), sha256="0" * 64),)
    root.mkdir()
    with pytest.raises(DataError, match="HTTP 404"):
        download_coco(root, ["val"], base_url=server.url, manifest=missing)
    assert root.is_dir() and list(root.iterdir()) == []  # a root the user made stays


def test_a_partial_download_keeps_its_folder(tmp_path: Path):
    import contextlib

    from lucidyolo.data.download import fetch

    class Stalls(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"x" * 5000)
            self.wfile.flush()
            with contextlib.suppress(OSError):
                self.rfile.read(1)  # until the client gives up and closes

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stalls)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    dest = tmp_path / "a" / "b.zip"
    try:
        with pytest.raises(DataError, match=r"stalled: no data for 0.5 s after 5000 bytes.*LUCIDYOLO_DOWNLOAD_TIMEOUT"):
            fetch(f"http://127.0.0.1:{httpd.server_address[1]}/b.zip", dest, timeout=0.5)
    finally:
        httpd.shutdown()
    assert dest.with_name("b.zip.part").stat().st_size == 5000  # kept for the resume
