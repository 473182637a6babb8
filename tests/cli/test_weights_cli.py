"""`lucid fit --model.weights` through the console script: sources, URLs, refusals, the fine-tune run."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import shutil
import sys
import threading
import types
from pathlib import Path

import pytest
import torch

from tests.conftest import run_lucid
from tests.faults import fast_fit_args, tiny_root
from tests.faults.matrix import record


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.files[path]`` with HTTP Range support and records each request's Range header."""

    def do_GET(self) -> None:
        body = self.server.files.get(self.path)  # type: ignore[attr-defined]
        self.server.ranges.append(self.headers.get("Range"))  # type: ignore[attr-defined]
        if body is None:
            self.send_error(404)
            return
        start = 0
        if (rng := self.headers.get("Range")) is not None:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = self.server.cut.get(self.path)  # type: ignore[attr-defined]
        if cut is None:
            self.wfile.write(body[start:])
            return
        how, at = cut  # a connection that drops (truncate) or stalls (stall) after ``at`` bytes
        self.wfile.write(body[start:at])
        self.wfile.flush()
        if how == "stall":
            with contextlib.suppress(OSError):
                self.rfile.read(1)  # until the client gives up
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    httpd.files, httpd.ranges, httpd.cut = {}, [], {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _fake_lucid_file(path: Path, variant: str = "n") -> bytes:
    """A tiny file with a lucid checkpoint's layout (only a config and one tensor)."""
    torch.save({"lucid": {"config": {"model": {"task": "det", "variant": variant}}, "class_names": ["a"]},
                "state_dict": {"model.x": torch.zeros(2)}}, path)
    return path.read_bytes()


def test_url_weights_resume_a_partial_download_and_verify_the_digest(server, tmp_path):
    from lucidyolo.engine.weights.weights_source import cached_path, resolve_weights

    body = _fake_lucid_file(tmp_path / "w.ckpt")
    server.files["/w.ckpt"] = body
    url = f"http://127.0.0.1:{server.server_port}/w.ckpt"
    cache = tmp_path / "cache"
    dest = cached_path(url, cache)
    dest.parent.mkdir(parents=True)
    dest.with_name(dest.name + ".part").write_bytes(body[:100])  # an interrupted earlier download
    digest = hashlib.sha256(body).hexdigest()
    seen: list[tuple[int, int | None]] = []
    got = resolve_weights(f"{url}#sha256={digest}", cache=cache, progress=lambda d, t: seen.append((d, t)))
    assert got == dest and got.read_bytes() == body
    assert server.ranges == ["bytes=100-"] and seen[-1] == (len(body), len(body))
    resolve_weights(url, sha256=digest, cache=cache)  # downloaded once: the cached file is used
    assert len(server.ranges) == 1


def test_a_sha256_mismatch_deletes_the_download_and_exits_2(server, tmp_path):
    server.files["/w.ckpt"] = _fake_lucid_file(tmp_path / "w.ckpt")
    root = tiny_root("det", tmp_path / "data")
    url = f"http://127.0.0.1:{server.server_port}/w.ckpt"
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", url,
                  "--model.weights_sha256", "0" * 64, env={"LUCIDYOLO_CACHE_DIR": str(tmp_path / "cache")})
    ok = (r.returncode == 2 and "not the expected 0000" in r.stderr and "it was deleted" in r.stderr
          and "Traceback" not in r.stderr)
    record("fit det --model.weights URL", "a SHA-256 mismatch", r.returncode, ok, "the download is deleted")
    assert ok, r.stderr
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("how", ["truncate", "stall"])
def test_a_dropped_or_stalled_download_exits_2_and_the_rerun_resumes_it(server, tmp_path, how):
    body = _fake_lucid_file(tmp_path / "w.ckpt")
    server.files["/w.ckpt"] = body
    server.cut["/w.ckpt"] = (how, 700)
    root = tiny_root("det", tmp_path / "data")
    url = f"http://127.0.0.1:{server.server_port}/w.ckpt"
    env = {"LUCIDYOLO_CACHE_DIR": str(tmp_path / "cache"), "LUCIDYOLO_DOWNLOAD_TIMEOUT": "3"}
    args = (*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", url)
    r = run_lucid(*args, env=env, timeout=120)
    text = " ".join(r.stderr.split())
    said = "ended at 700 of" if how == "truncate" else "stalled: no data for 3 s after 700 bytes"
    ok = r.returncode == 2 and said in text and "Run the same command again to resume" in text and "Traceback" not in text
    fault = "a download cut short" if how == "truncate" else "a server that stops sending"
    parts = [p for p in (tmp_path / "cache").rglob("*.part")]
    ok = ok and [p.stat().st_size for p in parts] == [700] and not (tmp_path / "runs").exists()
    if ok:  # the same command again: the download resumes at byte 700 and the run starts from the weights
        server.cut.clear()
        # the rerun keeps the default timeout: 1 s would be too tight for a loaded machine's local server
        again = run_lucid(*args, env={"LUCIDYOLO_CACHE_DIR": env["LUCIDYOLO_CACHE_DIR"]}, timeout=300)
        # the fake file holds no tensor of the model, so the run refuses it, once the resumed download is whole
        whole = parts[0].with_name(parts[0].name.removesuffix(".part"))
        ok = (server.ranges[-1] == "bytes=700-" and not parts[0].exists() and whole.read_bytes() == body
              and again.returncode == 2 and "fits this model" in again.stderr and "Traceback" not in again.stderr)
    record("fit det --model.weights URL", fault, r.returncode, ok, "the rerun resumes the download")
    assert ok, r.stderr[-3000:]


def test_a_refused_download_is_removed_from_the_cache(server, tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"lucid": {}, "x": Payload()}, tmp_path / "evil.ckpt")
    server.files["/evil.ckpt"] = (tmp_path / "evil.ckpt").read_bytes()
    root = tiny_root("det", tmp_path / "data")
    url = f"http://127.0.0.1:{server.server_port}/evil.ckpt"
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", url,
                  env={"LUCIDYOLO_CACHE_DIR": str(tmp_path / "cache")})
    text = " ".join(r.stderr.split())
    ok = r.returncode == 2 and "Refused checkpoint" in text and "deleted from the cache" in text and not marker.exists()
    record("fit det --model.weights URL", "an unsafe file", r.returncode, ok, "refused unrun; removed from the cache")
    assert ok, r.stderr[-3000:]
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_a_missing_weights_file_is_named_before_the_dataset_is_read(tmp_path):
    (tmp_path / "empty").mkdir()  # not a dataset: a scan first would refuse it and never reach the weights
    r = run_lucid("fit", "det", "--data-root", str(tmp_path / "empty"), "--model.weights", str(tmp_path / "nope.pt"),
                  "--trainer.default_root_dir", str(tmp_path / "runs"))
    assert r.returncode == 2 and f"`model.weights` file not found: {tmp_path / 'nope.pt'}" in r.stderr, r.stderr


def test_a_crafted_checkpoint_is_refused_on_the_weights_path_before_it_runs(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"lucid": {}, "x": Payload()}, tmp_path / "evil.ckpt")
    root = tiny_root("det", tmp_path / "data")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", str(tmp_path / "evil.ckpt"))
    assert r.returncode == 2 and "Refused checkpoint" in r.stderr and "arbitrary code" in r.stderr, r.stderr
    assert not marker.exists()


def test_a_poisoned_publisher_checkpoint_is_refused_on_the_weights_path_before_it_runs(tmp_path):
    # the publisher's release layout (whole model records) with an os.system reducer beside the model
    from tests.engine.test_published_checkpoint import (
        SystemPayload,
        tiny_publisher_model,
        write_publisher_file,
    )

    marker = tmp_path / "ran"
    path = write_publisher_file(tmp_path / "yolo26n.pt", tiny_publisher_model(), stopper=SystemPayload(marker))
    root = tiny_root("det", tmp_path / "data")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", str(path))
    assert r.returncode == 2 and "Refused checkpoint" in r.stderr and "arbitrary code" in r.stderr, r.stderr
    assert f"{os.system.__module__}.system" in r.stderr
    assert not marker.exists()


def test_another_trainers_checkpoint_is_named_as_such(tmp_path, monkeypatch):
    # What such files hold, in general terms: a whole pickled model object under 'model'.
    package = types.ModuleType("othertrainer")
    module = types.ModuleType("othertrainer.nets")

    class DetectionModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 1)

    DetectionModel.__module__ = "othertrainer.nets"
    DetectionModel.__qualname__ = "DetectionModel"
    module.DetectionModel = DetectionModel
    monkeypatch.setitem(sys.modules, "othertrainer", package)
    monkeypatch.setitem(sys.modules, "othertrainer.nets", module)
    torch.save({"epoch": 3, "model": DetectionModel(), "optimizer": None}, tmp_path / "other.pt")
    root = tiny_root("det", tmp_path / "data")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", str(tmp_path / "other.pt"))
    assert r.returncode == 2, r.stderr
    assert "checkpoint of another training program" in r.stderr and "othertrainer.nets.DetectionModel" in r.stderr
    assert "lucid cannot load this file" in r.stderr


def test_weights_of_another_variant_are_refused_before_a_run_folder_exists(tmp_path):
    _fake_lucid_file(tmp_path / "s.ckpt", variant="s")
    root = tiny_root("det", tmp_path / "data")
    r = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"), "--model.weights", str(tmp_path / "s.ckpt"))
    assert r.returncode == 2 and "holds a 's' model; this run builds 'n'" in r.stderr, r.stderr
    assert "--model.variant s" in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def _permuted_superset(src: Path, dst: Path) -> list[str]:
    """``src`` (circle, square, triangle, hexagon) relabelled as hexagon, kite, circle, square, triangle."""
    shutil.copytree(src, dst)
    new_id = {1: 3, 2: 4, 3: 5, 4: 1}
    names = ["hexagon", "kite", "circle", "square", "triangle"]
    for ann in (dst / "annotations").glob("*.json"):
        data = json.loads(ann.read_text())
        assert [c["name"] for c in data["categories"]] == ["circle", "square", "triangle", "hexagon"]
        data["categories"] = [{"id": i + 1, "name": n, "supercategory": "shape"} for i, n in enumerate(names)]
        for a in data["annotations"]:
            a["category_id"] = new_id[a["category_id"]]
        ann.write_text(json.dumps(data))
    return names


@pytest.mark.slow
def test_fit_from_a_run_directory_on_a_permuted_superset_maps_classes_by_name(tmp_path):
    root = tiny_root("det", tmp_path / "a")
    first = run_lucid(*fast_fit_args("det", root, tmp_path / "runs"))
    assert first.returncode == 0, first.stderr
    _permuted_superset(root, tmp_path / "b")
    r = run_lucid(*fast_fit_args("det", tmp_path / "b", tmp_path / "runs"), "--model.weights",
                  str(tmp_path / "runs" / "version_0"), "--model.freeze", "backbone")
    assert r.returncode == 0, r.stderr
    assert ("classes: 4 of 5 matched by name (hexagon, circle, square, triangle); new: kite" in r.stdout), r.stdout
    assert "frozen: backbone (11 modules" in r.stdout
    report = json.loads((tmp_path / "runs" / "version_1" / "transfer.json").read_text())
    assert [m["from_name"] for m in report["classes"]["mapping"]] == ["hexagon", None, "circle", "square", "triangle"]
    assert report["tensors"]["kept_fresh"] == 0 and len(report["tensors"]["class_rows_mapped"]) == 12
    old = torch.load(tmp_path / "runs" / "version_0" / "checkpoints" / "best.ckpt", weights_only=True)
    new = torch.load(tmp_path / "runs" / "version_1" / "checkpoints" / "last.ckpt", weights_only=True)
    start = old["lucid_ema"]["shadow"]  # what the fine-tune started from
    frozen = [k for k in start if k.startswith("backbone.")]
    assert all(torch.equal(start[k], new["state_dict"]["model." + k]) for k in frozen)
    assert all(torch.equal(start[k], new["lucid_ema"]["shadow"][k]) for k in frozen)


def test_file_urls_run_folders_and_conflicting_digests(tmp_path):
    from lucidyolo.engine.weights.weights_source import resolve_weights
    from lucidyolo.errors import ConfigError, UserError

    run = tmp_path / "runs" / "version_3"
    (run / "checkpoints").mkdir(parents=True)
    body = _fake_lucid_file(run / "checkpoints" / "last.ckpt")
    assert resolve_weights(str(run)) == run / "checkpoints" / "last.ckpt"  # no best.ckpt: the last one
    _fake_lucid_file(run / "checkpoints" / "best.ckpt")
    assert resolve_weights(str(run)) == run / "checkpoints" / "best.ckpt"
    url = (run / "checkpoints" / "last.ckpt").as_uri()
    digest = hashlib.sha256(body).hexdigest()
    assert resolve_weights(f"{url}#sha256={digest}") == run / "checkpoints" / "last.ckpt"
    with pytest.raises(UserError, match="not the expected"):
        resolve_weights(url, sha256="f" * 64)
    assert (run / "checkpoints" / "last.ckpt").is_file()  # a local file is never deleted
    with pytest.raises(ConfigError, match="Two different SHA-256"):
        resolve_weights(f"{url}#sha256={digest}", sha256="f" * 64)
    with pytest.raises(UserError, match="holds no checkpoint"):
        resolve_weights(str(tmp_path / "runs"))


def test_a_raw_pickle_is_refused_without_torchs_warning(tmp_path):
    import pickle

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (tmp_path / "raw.pt").write_bytes(pickle.dumps({"x": Payload()}, protocol=4))  # not torch's zip format
    r = run_lucid("eval", "--checkpoint", str(tmp_path / "raw.pt"), cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: Cannot read checkpoint"), r.stderr
    assert "Warning" not in r.stderr and "site-packages" not in r.stderr and not marker.exists()
