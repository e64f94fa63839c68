"""The processes on this machine as tests look for them: each one's pid, argv and
environment, read from /proc (Linux). Tests find the processes a sandbox started by a path
in their environment or argv (its KINT_HOME) and check what they carry."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def processes() -> Iterator[tuple[int, bytes, bytes]]:
    """(pid, argv NUL-separated, environment NUL-separated) of every process this user can
    read; one that ends while it is read is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        yield int(entry), argv, env
