"""The processes on this machine as tests look for them: each one's pid, argv and
environment, read from /proc (Linux). Tests find the processes a sandbox started by a path
in their environment or argv (its KINT_HOME) and check what they carry; whether one still
runs (`pid_alive`), and one a test stopped let go on (`let_go_on`)."""

from __future__ import annotations

import os
import signal
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


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # reaped before, or between open and read
        return False


def let_go_on(pid: int | None) -> None:
    """SIGCONT a process the test stopped, unless it is gone (the supervisor may have
    ended it), so that nothing is left stopped past the test."""
    if pid is not None and pid_alive(pid):
        os.kill(pid, signal.SIGCONT)


def signal_pending(pid: int, sig: signal.Signals) -> bool:
    """Whether `sig`, sent to the process `pid`, waits there untaken (as it does while the
    process is stopped): its shared pending set, /proc/<pid>/status's ShdPnd."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("ShdPnd:"):
                    return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    except (FileNotFoundError, ProcessLookupError):
        pass  # gone
    return False
