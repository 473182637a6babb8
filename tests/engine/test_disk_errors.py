"""The words of a write fault: a full disk reports its free space, a read-only or forbidden one says what is wrong."""

from __future__ import annotations

import errno
import os

from lucidyolo.engine.process.disk_errors import disk_error, write_fault_error


def _fault(code: int, path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


def test_a_full_disk_names_its_free_space(tmp_path):
    err = write_fault_error(_fault(errno.ENOSPC, tmp_path / "out" / "a.jpg"))
    assert err is not None and "the filesystem is full" in err.what
    assert err.why.endswith("MB on its filesystem.") and " MB free of " in err.why
    assert err.fix.startswith("Free space or choose another location")


def test_a_read_only_filesystem_is_not_blamed_on_space(tmp_path):
    err = write_fault_error(_fault(errno.EROFS, tmp_path / "a.jpg"))
    assert err is not None and "MB free" not in err.why and "mounted read-only" in err.why
    assert err.fix.startswith(f"Make {tmp_path} writable or choose another location")


def test_a_forbidden_write_names_the_folders_owner_and_mode(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir(mode=0o555)
    os.chmod(folder, 0o555)  # mkdir's mode is masked by the umask
    err = disk_error(_fault(errno.EACCES, folder / "version_0"), None, "det")
    assert err is not None and "permission denied" in err.what and "MB free" not in err.why
    assert f"{folder} belongs to user {os.stat(folder).st_uid} with mode 0555" in err.why
    assert f"this process runs as user {os.geteuid()}" in err.why
    assert f"make {folder} writable (or choose another --trainer.default_root_dir)" in err.fix
