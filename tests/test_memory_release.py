"""A worker hands back what a push, pull, connect or rekey freed (kint/tenant_worker/
memory_release.py): glibc keeps freed pages in the allocating thread's arena, and one
worker per space would keep them for its whole life."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kint.tenant_worker import handlers, memory_release, sessions


def _private_dirty_mib() -> float:
    for line in Path(f"/proc/{os.getpid()}/smaps_rollup").read_text().splitlines():
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no Private_Dirty in smaps_rollup")


def _on_a_thread(fn) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


_kept: list[bytes] = []


def _heavy() -> int:
    """What an epoch op does on a pool thread: ~20 MB in small buffers, freed when it
    ends, and a few things that live on (a module imported on first use, a cache entry)
    allocated after them, so the freed pages sit below live ones and the arena cannot
    simply shrink from the top."""
    junk = [os.urandom(16) + bytes(3000) for _ in range(7000)]
    _kept.append(os.urandom(16) + bytes(3000))
    return len(junk)


@pytest.mark.skipif(memory_release._TRIM is None or not Path("/proc/self/smaps_rollup").exists(),
                    reason="glibc's malloc_trim and /proc are Linux/glibc only")
def test_what_a_heavy_op_freed_goes_back_to_the_system():
    memory_release.release_freed_memory()  # what the test process freed before: gone
    before = _private_dirty_mib()
    _on_a_thread(_heavy)
    kept = _private_dirty_mib()
    assert kept - before > 10, (before, kept)  # freed, but still this process's pages
    _on_a_thread(memory_release.releasing(_heavy))
    assert _private_dirty_mib() < kept - 10, (before, kept, _private_dirty_mib())


def test_the_epoch_ops_release_and_the_light_ones_do_not():
    released = {name for name in ("connect", "push", "pull", "rekey", "verify", "status",
                                  "history", "doctor")
                if getattr(getattr(handlers, name), "__wrapped__", None) is not None}
    assert released == {"connect", "push", "pull", "rekey"}
    assert sessions.server_push.__wrapped__ is not None  # the watcher's and exit pushes
