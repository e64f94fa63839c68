"""`status` lists a space's files as they are at the call, but asks the disk for each
only when KINT_HOME's or the epochs folder's entries may have changed (their inode and
mtime, kernel/tenant_worker/file_presence.py). These tests change the folders between two
readings, including the one change a folder's mtime cannot show: a second change within
the kernel's timestamp tick, played here by putting the mtime back by hand."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kint.paths import space_files
from kint.tenant_worker import file_presence
from kint.tenant_worker.file_presence import SpaceFilePresence
from kint.tenant_worker.status import status
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader

SPACE16 = "0123456789abcdef"


def _presence(home: Path) -> tuple[SpaceFilePresence, dict[str, Path]]:
    files = space_files(home, SPACE16)
    return SpaceFilePresence(str(home), {n: str(p) for n, p in files.items()}), files


def _age(path: Path, seconds: float) -> tuple[int, int]:
    """Set the folder's mtime `seconds` in the past; returns (atime, mtime) in ns."""
    then = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(then, then))
    return then, then


def test_a_file_made_or_removed_shows_at_the_next_reading(tmp_path):
    presence, files = _presence(tmp_path)
    first = presence.current()
    assert set(first) == set(files) and not any(v for k, v in first.items() if k != "epochs")
    assert first["epochs"] == 0
    _age(tmp_path, 10)
    assert presence.current() == first  # settled: kept
    files["enrol"].write_text("{}")
    assert presence.current()["enrol"] is True
    _age(tmp_path, 10)
    assert presence.current()["enrol"] is True
    files["enrol"].unlink()
    assert presence.current()["enrol"] is False


def test_epochs_are_counted_as_the_folder_is_made_and_filled(tmp_path):
    presence, files = _presence(tmp_path)
    assert presence.current()["epochs"] == 0
    files["epochs"].mkdir(parents=True)
    (files["epochs"] / "1.meta.json").write_text("{}")
    (files["epochs"] / "1.bin").write_bytes(b"x")
    assert presence.current()["epochs"] == 1
    _age(files["epochs"], 10)
    _age(tmp_path, 10)
    assert presence.current()["epochs"] == 1
    (files["epochs"] / "2.meta.json").write_text("{}")
    assert presence.current()["epochs"] == 2


def test_a_change_within_one_timestamp_tick_is_not_missed(tmp_path):
    """A reading of a folder changed less than SETTLED_NS before is not kept: a second
    change that leaves the same mtime (two changes in one coarse tick) is still seen."""
    presence, files = _presence(tmp_path)
    stamp = _age(tmp_path, 0.1)  # changed "just now"
    assert presence.current()["pending"] is False
    files["pending"].write_text("{}")
    os.utime(tmp_path, ns=stamp)  # the same mtime as at the reading
    assert presence.current()["pending"] is True


def test_a_settled_reading_is_kept_until_the_folder_changes(tmp_path, monkeypatch):
    """The reading of a settled folder is reused: no file is asked for again (this is
    what saves the system calls)."""
    presence, files = _presence(tmp_path)
    _age(tmp_path, 10)
    presence.current()
    asked = []
    monkeypatch.setattr(file_presence.os, "access", lambda *a: asked.append(a) or False)
    presence.current()
    assert asked == []
    files["wraps"].write_text("{}")
    presence.current()
    assert len(asked) == len(files) - 1


def test_paths_outside_the_home_are_refused(tmp_path):
    with pytest.raises(ValueError):
        SpaceFilePresence(str(tmp_path), {"epochs": str(tmp_path / "e"),
                                          "enrol": str(tmp_path / "sub" / "enrol.json")})


def _context(home: Path, db: Path) -> SpaceContext:
    """A space's context as its worker holds it, for calling the status op in-process."""
    cfg = WorkerConfig(space_id=SPACE16 * 4, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    return SpaceContext(config=cfg, store=StoreReader(str(db), "t"))


def test_status_reports_the_files_as_they_are_at_each_call(tmp_path):
    """Through the status op itself, in a settled KINT_HOME."""
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = tmp_path / "memory.db"
    ctx = _context(home, db)
    files = space_files(home, SPACE16)
    _age(home, 10)
    assert status(ctx, {})["files"]["mirror"] is False
    files["mirror"].write_bytes(b"x")
    assert status(ctx, {})["files"]["mirror"] is True
    assert status(ctx, {})["worker"]["pid"] == os.getpid()


def test_status_asks_a_disk_holding_store_and_home_once(tmp_path, monkeypatch):
    """The store and KINT_HOME on one device: one statvfs a status, not two."""
    from kint.tenant_worker import disk_space

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = tmp_path / "memory.db"
    db.write_bytes(b"")
    ctx = _context(home, db)
    asked: list[str] = []
    real = os.statvfs
    monkeypatch.setattr(disk_space.os, "statvfs", lambda p: asked.append(str(p)) or real(p))
    assert status(ctx, {})["disk_problems"] == []
    assert asked == [str(db)]


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_status_asks_each_disk_when_kint_home_is_on_another_or_missing(tmp_path, monkeypatch):
    """KINT_HOME on another device than the store (a tmpfs here), then removed: each
    disk is asked for its own room, so with the "full" line drawn between the two disks'
    free room exactly the fuller one is named. Taking the store's disk for KINT_HOME's
    would name both or neither."""
    import shutil
    import tempfile

    from kint.tenant_worker import disk_space

    other = Path("/dev/shm")
    if not other.is_dir() or other.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second device to put KINT_HOME on")
    db = tmp_path / "memory.db"
    db.write_bytes(b"")
    home = Path(tempfile.mkdtemp(prefix="kint-test-home-", dir=other))
    try:
        store_free, home_free = _free(tmp_path), _free(other)
        if abs(store_free - home_free) < (1 << 30):  # others write to both meanwhile
            pytest.skip("the two disks have about the same room free")
        monkeypatch.setattr(disk_space, "LOW_BYTES", (store_free + home_free) // 2)
        fuller = "Sibyl's store" if store_free < home_free else "kint's state"
        ctx = _context(home, db)
        assert ctx.state.presence.reading()[1] == home.stat().st_dev
        lines = status(ctx, {})["disk_problems"]
        assert len(lines) == 1 and lines[0].startswith(f"the disk holding {fuller} "), lines
        home.rmdir()  # missing: its room is its nearest folder's, still the other disk's
        assert ctx.state.presence.reading()[1] is None
        lines = status(ctx, {})["disk_problems"]
        assert len(lines) == 1 and lines[0].startswith(f"the disk holding {fuller} "), lines
    finally:
        shutil.rmtree(home, ignore_errors=True)
