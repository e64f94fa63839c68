"""The front door of a held supervisor closed from a test, as the door closes it (its note
written, its socket file moved aside), for tests that need it closed at one exact moment:
tests/test_front_door.py, tests/test_front_door_stop.py."""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from kint.front_closed import CLOSED_SOCKET, NOTE, FrontClosed, write_note
from kint.socket_paths import FRONT_SOCKET


@contextmanager
def closed_by_hand(pid: int, folder: Path, note: FrontClosed) -> Iterator[None]:
    """The supervisor `pid` held (SIGSTOP), its door in `folder` closed with `note`; at the
    block's end its socket file is back, the note gone, and it is continued."""
    os.kill(pid, signal.SIGSTOP)
    try:
        close_by_hand(folder, note)
        yield
    finally:
        open_by_hand(folder)
        os.kill(pid, signal.SIGCONT)


def close_by_hand(folder: Path, note: FrontClosed) -> None:
    """The door in `folder` closed with `note`, as a door closes it."""
    write_note(folder, note)
    os.rename(folder / FRONT_SOCKET, folder / CLOSED_SOCKET)


def open_by_hand(folder: Path) -> None:
    """The door in `folder` open again: its socket file back, the note gone."""
    if (folder / CLOSED_SOCKET).exists():
        os.rename(folder / CLOSED_SOCKET, folder / FRONT_SOCKET)
    (folder / NOTE).unlink(missing_ok=True)
