"""The front socket bound again beside its old listener, and the door closed for want of
open files whose moved socket was removed (`lost`), at the edges review30f found untested:
a stop beginning while lost, the stop's end then, a rebind whose rename fails, and the
unbind with no monitor to count connections.

A real ROUTER and DEALERs of this process, the door and listeners as the supervisor builds
them (kint/supervisor/daemon.py), no supervisor process: each edge is one call away here,
and a moment's window in a real one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest
import zmq

from kint.front_closed import CLOSED_SOCKET, NOTE, read_note
from kint.open_files import OpenFiles
from kint.paths import FRONT_SOCKET
from kint.supervisor.front_door import FrontDoor
from kint.supervisor.front_listeners import FrontListeners


@pytest.fixture
def front(tmp_path) -> Iterator[tuple[zmq.Context, zmq.Socket, Path]]:
    """A ROUTER for the front socket, and its path in a private folder."""
    os.chmod(tmp_path, 0o700)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        yield ctx, sock, tmp_path / FRONT_SOCKET
    finally:
        sock.close(linger=0)
        ctx.term()


def _lost_door(sock: zmq.Socket, path: Path) -> FrontDoor:
    """A door closed for want of open files whose moved socket was then removed: lost,
    its note still on disk, not bound again yet."""
    door = FrontDoor(sock)
    door.prepare()
    FrontListeners(sock).bind(path)
    door._close(path, OpenFiles(60, 64))
    (path.parent / CLOSED_SOCKET).unlink()
    door.look(path)
    assert door.lost and (path.parent / NOTE).exists()
    return door


def test_a_stop_beginning_while_the_door_is_lost_says_so_in_its_note(front):
    """The stop began after the moved socket was removed and before it was bound again
    (no rebind during a stop). Before, the stop marked itself in memory only: for the
    whole stop its note said "closed for want of open files", new clients were told to
    raise `ulimit -n`, and `kint supervisor start` beside it was refused BUSY where it
    should wait. Now the note says the stop; its end removes it."""
    _, sock, path = front
    door = _lost_door(sock, path)
    try:
        door.close_for_stop(path)
        on_disk = read_note(path.parent, os.getpid())
        assert on_disk is not None and on_disk.stopping, on_disk
        assert door.closed is not None and door.closed.stopping
    finally:
        door.shut(path)
    assert not (path.parent / NOTE).exists()


def test_a_lost_door_s_note_goes_with_its_supervisor(front):
    """Stopped (or stepped down with its home still its own) while lost, before the rebind
    adopted it: no moved socket to remove, but its note goes, else a note naming a
    supervisor gone is left in the folder."""
    _, sock, path = front
    door = _lost_door(sock, path)
    door.shut(path)
    assert not (path.parent / NOTE).exists()


def test_a_rebind_whose_rename_fails_changes_nothing(front, tmp_path):
    """The new listener bound, its rename fails (here: the target's folder is gone): it is
    unbound, its file removed, the old listener still the one in use and none retired,
    for the next check to retry."""
    ctx, sock, path = front
    listeners = FrontListeners(sock)
    listeners.bind(path)
    old = listeners.endpoint
    with pytest.raises(OSError):
        listeners.bind_again(tmp_path, tmp_path / "gone" / FRONT_SOCKET)
    assert listeners.endpoint == old and listeners.retired == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [FRONT_SOCKET]
    client = ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    try:  # the new listener is unbound: only the old one listens, and it serves
        client.connect(f"ipc://{path}")
        client.send(b"still")
        assert sock.poll(10_000) and sock.recv_multipart()[1] == b"still"
    finally:
        client.close(linger=0)


def test_with_no_monitor_a_retired_listener_is_unbound_at_once(front, tmp_path):
    """No open-file limit to count against, so no monitor tells a listener's connections
    apart: the old listener is unbound at the first chance, as before listeners were kept,
    and the new one's file, now at the socket's path, survives that unbind."""
    ctx, sock, path = front
    listeners = FrontListeners(sock)
    listeners.bind(path)
    path.unlink()
    listeners.bind_again(tmp_path, path)
    assert len(listeners.retired) == 1
    listeners.unbind_idle(None)
    assert listeners.retired == [] and path.exists()
    client = ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    try:
        client.connect(f"ipc://{path}")
        client.send(b"new")
        assert sock.poll(10_000) and sock.recv_multipart()[1] == b"new"
    finally:
        client.close(linger=0)
