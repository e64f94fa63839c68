"""The front socket bound again beside its old listener, and the door closed for want of
open files whose moved socket was removed (`lost`), at the edges review30f found untested:
a stop beginning while lost, the stop's end then, a rebind whose rename fails, and the
unbind with no monitor to count connections. And, as review30i found untested, the lost
door's stop under a real pid lock (kint/supervisor/pidlock.py): its pid file removed with
nobody else holding the home, another holding it, and a note that cannot be written.

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
from kint.socket_paths import FRONT_SOCKET
from kint.supervisor.front_door import FrontDoor
from kint.supervisor.front_listeners import FrontListeners
from kint.supervisor.ownership import Ownership, file_id
from kint.supervisor.pidlock import PID_FILE, hold_pid_lock


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


def _lost_door(sock: zmq.Socket, path: Path,
               ownership: Ownership | None = None) -> FrontDoor:
    """A door closed for want of open files whose moved socket was then removed: lost,
    its note still on disk, not bound again yet."""
    door = FrontDoor(sock, ownership=ownership)
    door.prepare()
    FrontListeners(sock).bind(path)
    if ownership is not None:  # as the supervisor records its bind (sockets.py)
        ownership.bound(path)
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


@pytest.fixture
def pid_lock(tmp_path) -> Iterator[tuple[Path, Ownership]]:
    """A home whose pid lock this process took as a supervisor does (`hold_pid_lock`), and
    the Ownership the supervisor builds over it; the home apart from the socket folder."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True, mode=0o700)
    fd = hold_pid_lock(home)
    try:
        yield home, Ownership(home / "run" / PID_FILE, fd)
    finally:
        os.close(fd)


def test_a_lost_door_whose_pid_file_was_removed_still_notes_its_stop_and_ends_it(front,
                                                                                 pid_lock):
    """Its pid file removed and nobody started since, the supervisor is still the one its
    clients reach: the stop's note is written, and removed at its end. Checked by whether
    the pid lock is still its own (`_holds`), its end left a note naming a supervisor gone,
    and its stop wrote none."""
    _, sock, path = front
    home, ownership = pid_lock
    door = _lost_door(sock, path, ownership)
    (home / "run" / PID_FILE).unlink()
    try:
        door.close_for_stop(path)
        on_disk = read_note(path.parent, os.getpid())
        assert on_disk is not None and on_disk.stopping, on_disk
    finally:
        door.shut(path)
    assert not (path.parent / NOTE).exists()


def test_a_lost_door_whose_home_another_holds_touches_no_note(front, pid_lock):
    """Its pid file removed and another supervisor holding a fresh lock there: the files in
    the socket folder may be that one's, so the stop marks itself stopping in memory only,
    and its end removes nothing. The other's lock is the real flock, taken on a file of
    its own as another process takes it (flock counts each open file apart, in one process
    or two)."""
    _, sock, path = front
    home, ownership = pid_lock
    door = _lost_door(sock, path, ownership)
    (home / "run" / PID_FILE).unlink()
    before = (path.parent / NOTE).read_bytes()
    other = hold_pid_lock(home)
    try:
        door.close_for_stop(path)
        assert door.closed is not None and door.closed.stopping
        assert (path.parent / NOTE).read_bytes() == before
    finally:
        door.shut(path)  # its monitor closed too, for the context to end
        os.close(other)
    assert (path.parent / NOTE).read_bytes() == before


def test_a_lost_door_whose_stop_note_cannot_be_written_marks_its_stop_in_memory(front,
                                                                                caplog):
    """The note cannot be written (here its aside file is a folder): logged, the door
    marked stopping in memory, the note it knows still the one on disk; its end removes
    that one."""
    _, sock, path = front
    door = _lost_door(sock, path)
    on_disk = read_note(path.parent, os.getpid())
    (path.parent / (NOTE + ".tmp")).mkdir()
    try:
        door.close_for_stop(path)
        assert "could not note that the supervisor stops" in caplog.text
        assert on_disk is not None and door.closed == on_disk._replace(stopping=True)
        assert read_note(path.parent, os.getpid()) == on_disk
    finally:
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


def test_a_door_closing_for_want_of_files_leaves_a_socket_file_bound_after_its_look(
        front, pid_lock, monkeypatch, caplog):
    """The door's look found the front socket file its supervisor's (`_ours`); before its
    move, another supervisor took the home and bound its own file at the path (binding an
    ipc path replaces the file there): the moment between the note's write and the move,
    made here by the write itself. The door leaves that file where it is, its note
    removed, and stays open (the ownership check steps its supervisor down). Before, it
    moved the other's file aside, as the stop's door did before `_move_aside`: the other's
    new clients found no socket."""
    from kint.supervisor import front_door

    ctx, sock, path = front
    _, ownership = pid_lock
    door = FrontDoor(sock, ownership=ownership)
    door.prepare()
    FrontListeners(sock).bind(path)
    ownership.bound(path)
    other = ctx.socket(zmq.ROUTER)
    other.setsockopt(zmq.LINGER, 0)
    written, taken = front_door.write_note, []

    def written_then_taken(folder: Path, closed) -> None:
        written(folder, closed)
        other.bind(f"ipc://{path}")
        taken.append(file_id(path))

    monkeypatch.setattr(front_door, "write_note", written_then_taken)
    try:
        with caplog.at_level("WARNING", logger="kint.supervisor"):
            door._close(path, OpenFiles(60, 64))
        assert taken and file_id(path) == taken[0] is not None
        assert door.closed is None and not (path.parent / CLOSED_SOCKET).exists()
        assert not (path.parent / NOTE).exists()
        assert "another supervisor's socket file now" in caplog.text, caplog.text
    finally:
        door.shut(path)
        other.close(linger=0)
