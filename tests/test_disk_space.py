"""`status` asks for the free room under the store and KINT_HOME on every call: one
statvfs when the path exists, and only a path not created yet (a store Sibyl has not
written) walks up to the nearest folder that is there."""

from __future__ import annotations

import os

from kint.tenant_worker.disk_space import _free_bytes, full_disks

# Other processes write to the same disk between two readings: close enough is equal.
SLACK = 256 << 20


def _free(path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_free_room_of_a_path_there_and_of_one_not_created_yet(tmp_path):
    store = tmp_path / "memory.db"
    store.write_bytes(b"")
    assert abs(_free_bytes(str(store)) - _free(tmp_path)) < SLACK
    missing = tmp_path / "not" / "yet" / "memory.db"
    assert abs(_free_bytes(str(missing)) - _free(tmp_path)) < SLACK
    under_a_file = store / "memory.db"  # a component that is a file, not a folder
    assert abs(_free_bytes(str(under_a_file)) - _free(tmp_path)) < SLACK
    assert full_disks(str(missing), str(tmp_path)) == []


def test_a_disk_holding_both_is_asked_once_and_named_for_both(tmp_path, monkeypatch):
    """`status` sees the store and KINT_HOME on one device (their st_dev): it asks that
    disk for its free room once, and a full one is still named for both."""
    from kint.tenant_worker import disk_space

    store = tmp_path / "memory.db"
    store.write_bytes(b"")
    asked: list[str] = []
    real = os.statvfs
    monkeypatch.setattr(disk_space.os, "statvfs", lambda p: asked.append(str(p)) or real(p))
    assert full_disks(str(store), str(tmp_path), same_disk=True) == []
    assert asked == [str(store)]
    asked.clear()
    assert full_disks(str(store), str(tmp_path)) == []
    assert asked == [str(store), str(tmp_path)]
    monkeypatch.setattr(disk_space, "LOW_BYTES", 1 << 62)  # every disk counts as full
    lines = full_disks(str(store), str(tmp_path), same_disk=True)
    assert len(lines) == 2 and "Sibyl's store" in lines[0] and "kint's state" in lines[1]
