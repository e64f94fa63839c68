"""A real Worker over a real Sibyl store, not serving: its context's ops and its loop's
own steps called directly, where a supervisor would cost more than the case. For
tests/test_locked_store.py and tests/test_status_beats.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import write_store


@contextmanager
def worker_over(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A real Worker over a real store (tenant `t`), not serving, and the store's path."""
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = write_store(tmp_path / "memory.db", tenant="t")
    cfg = WorkerConfig(space_id="ef" * 32, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused",
                       supervisor_pid=1, idle_beat_s=2.5)
    worker = Worker(cfg, b"\x03" * 32)
    try:
        yield worker, db
    finally:
        worker.close()
