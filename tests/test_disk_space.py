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
