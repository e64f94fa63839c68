"""Which other processes have a Sibyl store open, before `pull --discard-local` moves it.

Moving a store aside under an open SQLite connection is not safe in WAL mode: the other
process keeps writing into the moved-aside files, and when its last connection closes,
SQLite checkpoints and deletes the WAL *by its path*, which by then is the restored
store's WAL. The restored rows vanish for every later reader. So the move happens only
when no other process holds the store (its file, -wal or -shm) open.

Read from /proc on Linux; elsewhere (macOS) from `lsof`, when it is installed. Where
neither is there, the list is empty and the move goes ahead (the README says so). Only
processes this user may inspect are seen, which are the ones that can hold a store in
this user's home.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from kint.proc_stat import read_stat


LSOF_TIMEOUT_S = 10.0


def other_holders(db: str, named: str | None = None) -> list[int]:
    """Pids of processes other than this one with the store or its -wal/-shm open. With
    `named`, only processes of that name (/proc/PID/comm) are looked at, and only their
    open files read: a look for kint's workers (store_sharers, every minute in each worker)
    then costs a read per process, not a read of every process's every open file. Linux
    only; `lsof` (macOS) lists every holder."""
    return _holders({os.path.realpath(db + suffix) for suffix in ("", "-wal", "-shm")}, named)


def _holders(targets: set[str], named: str | None = None) -> list[int]:
    if os.path.isdir("/proc/self/fd"):
        return _from_proc(targets, named)
    return _from_lsof(targets)


def _from_lsof(targets: set[str]) -> list[int]:
    """`lsof -t FILE...`: the pids with any of the files open (exit 1 when none)."""
    tool = shutil.which("lsof")
    existing = sorted(t for t in targets if os.path.exists(t))
    if tool is None or not existing:
        return []
    try:
        done = subprocess.run([tool, "-t", "--", *existing], capture_output=True, text=True,
                              timeout=LSOF_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
    me = os.getpid()
    return sorted({int(line) for line in done.stdout.split() if line.isdigit()} - {me})


def _from_proc(targets: set[str], named: str | None = None) -> list[int]:
    me = os.getpid()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        if named is not None and _comm(name) != named:
            continue
        fd_dir = f"/proc/{name}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or another user's process
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") in targets:
                    found.append(int(name))
                    break
            except OSError:
                continue
    return sorted(found)


def _comm(pid: str) -> str | None:
    """The process's name (what kint.proc_name sets), None when it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().rstrip("\n")
    except OSError:
        return None


def same_parent(pids: list[int]) -> list[int]:
    """Those of `pids` whose parent is this process's parent: in a worker, kint's workers
    for other spaces (the supervisor's forkserver forks them all). Linux only (/proc)."""
    parent = os.getppid()
    found = []
    for pid in pids:
        stat = read_stat(pid)
        if stat is not None and stat.ppid == parent:
            found.append(pid)
    return found


def describe(pids: list[int]) -> str:
    """`1234 (kint-server), 5678 (python)`: what a refusal names (kint's own processes name
    themselves: kint.proc_name)."""
    parts = []
    for pid in pids[:5]:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                parts.append(f"{pid} ({fh.read().strip()})")
        except OSError:
            parts.append(str(pid))
    more = f" and {len(pids) - 5} more" if len(pids) > 5 else ""
    return ", ".join(parts) + more
