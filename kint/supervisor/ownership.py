"""What a supervisor owns in its KINT_HOME, so that it never breaks another supervisor.

A supervisor can outlive its claim on the home: `run/` cleaned under it, or its pid file
removed, lets a second supervisor start and bind the same socket paths (binding an ipc
path replaces whatever file is there). If the first then stopped and unlinked "its"
socket paths, it would unlink the second one's, and leave the home unusable.

So a supervisor remembers the identity (device, inode) of the pid lock it holds and of
each socket file it bound, and touches a socket path only while both are still its own:
the lock file at `run/supervisor.pid` is the one it holds, and the file at the path is the
one it bound. The same two facts tell it, while it runs, that it lost its claim (another
supervisor may run: it steps down) or that its sockets went missing (it binds them again).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileId:
    dev: int
    ino: int


def file_id(path: Path) -> FileId | None:
    """The identity of the file at `path` itself (a symlink is not followed), or None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return FileId(st.st_dev, st.st_ino)


class Ownership:
    """The pid lock a supervisor holds and the socket files it bound.

    `lock_fd` is the open, flock'ed pid file; None when the caller holds no lock (code that
    embeds a Supervisor without `run_foreground`): then only the socket identities count.
    """

    def __init__(self, lock_path: Path | None = None, lock_fd: int | None = None) -> None:
        self.lock_path = lock_path
        self._lock_id: FileId | None = None
        if lock_fd is not None:
            st = os.fstat(lock_fd)
            self._lock_id = FileId(st.st_dev, st.st_ino)
        self._sockets: dict[Path, FileId] = {}

    def holds_lock(self) -> bool:
        """Whether `run/supervisor.pid` is still the very file whose lock this supervisor
        holds. A removed or replaced pid file means a second supervisor can start."""
        if self.lock_path is None or self._lock_id is None:
            return True
        return file_id(self.lock_path) == self._lock_id

    def nobody_else_holds(self) -> bool:
        """Whether no other supervisor holds the home's pid lock: this one still does, or
        its pid file was removed and nobody has taken the lock since. A socket file's
        identity alone is no proof once another may have bound there: its inode number
        can be the one this supervisor's unlinked file had."""
        if self.holds_lock() or self.lock_path is None:
            return True
        from kint.supervisor.pidlock import held_bytes

        try:
            fd = os.open(self.lock_path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            return held_bytes(fd) is None
        finally:
            os.close(fd)

    def bound(self, path: Path, at: Path | None = None) -> None:
        """Record the socket file just bound at `path` (found at `at` for now: the front
        socket bound again under its moved-aside name, kint/supervisor/front_door.py)."""
        ident = file_id(at if at is not None else path)
        if ident is not None:
            self._sockets[path] = ident

    def forget(self, path: Path) -> None:
        self._sockets.pop(path, None)

    def socket_is_ours(self, path: Path, at: Path | None = None) -> bool:
        """Whether the file at `path` is the socket file this supervisor bound there; with
        `at`, the file at `at` (moved there from `path`: kint/supervisor/front_door_stop.py
        checks the file it moved aside)."""
        ident = self._sockets.get(path)
        return ident is not None and file_id(at if at is not None else path) == ident

    def release(self) -> list[Path]:
        """Unlink the socket files that are still this supervisor's, and only while it
        still holds its lock. Returns the paths left alone (someone else's now)."""
        left: list[Path] = []
        holds = self.holds_lock()
        for path in list(self._sockets):
            if holds and self.socket_is_ours(path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            elif file_id(path) is not None:
                left.append(path)
            self._sockets.pop(path, None)
        return left
