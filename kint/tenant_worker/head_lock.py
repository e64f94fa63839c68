"""The head lock (seed 001, "The head lock"): an exclusive flock on `head-<space>.lock`
that push, pull, compact and rekey hold, so two processes on one machine take turns on a
space's head instead of racing. Between machines, the chain head decides."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kint.paths import ensure_private_dir

RETRY_S = 0.2
WAIT_S = 30.0
MESSAGE = "another kint process holds the head lock for this space"


class HeadLockBusy(Exception):
    def __init__(self) -> None:
        super().__init__(MESSAGE)


@contextmanager
def head_lock(path: Path, wait_s: float = WAIT_S) -> Iterator[None]:
    ensure_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise HeadLockBusy() from None
                time.sleep(RETRY_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
