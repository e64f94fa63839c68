"""The supervisor's front door (kint/supervisor/front_door.py, kint/front_closed.py): when
it opens again, what a client connected before it closed is owed, the note a killed
supervisor left, and how a client reads a note.

The door closes for want of open files under a low `ulimit -n`; tests/test_many_clients.py
closes it with a crowd of real clients. Here the workers fill the supervisor's room first
(tests/support/limited_box.py), and the tests that need the door closed at one exact
moment close it as the door does (the note written, the socket file moved aside) from the
test: that moment cannot be had from outside otherwise. Each says so.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import orjson
import pytest
import zmq

from conftest import SUPPORT, make_sandbox, pid_alive
from kint.client import KintError
from kint.client_closed_door import CONNECT_SLACK_S
from kint.front_closed import (CLOSED_SOCKET, NOTE, NOTE_MAX_BYTES, FrontClosed, read_note,
                               write_note)
from kint.open_files import WARM_UP_FDS, OpenFiles
from kint.socket_paths import BACK_SOCKET, FRONT_SOCKET, front_address, socket_dir
from kint.supervisor.front_door import RECOUNT_S, FrontDoor, margin_for, reopen_at
from kint.supervisor.pidlock import holder, running_pid
from support.closed_by_hand import closed_by_hand
from support.limited_box import fill_with_sessions, in_thread, profile_stores, start_limited

LIMIT = 64


def test_the_door_opens_again_below_the_reserve_the_workers_leave_at_every_limit():
    """The workers may take every descriptor but the reserve (kint/open_files.py): a door
    that waited for more than that free stayed closed for good once they had."""
    for limit in range(32, 70_000):
        files = OpenFiles(0, limit)
        margin = margin_for(limit)
        assert margin < reopen_at(files) <= files.reserve, (limit, margin, files.reserve)
        # While the forkserver warms up (no worker yet), no sooner than it would close.
        assert margin_for(limit, WARM_UP_FDS) < reopen_at(files, WARM_UP_FDS), limit


def test_the_door_opens_again_when_the_workers_fill_their_room_and_the_clients_leave(tmp_path):
    sb = make_sandbox(tmp_path)
    try:
        dbs = profile_stores(sb, list(range(1, 13)))
        start_limited(sb, LIMIT)
        pid = running_pid(sb.kint_home)
        # Workers with agent sessions, none to spare, until no room is left for another.
        fill_with_sessions(sb, dbs, 2)
        note = socket_dir(sb.kint_home) / NOTE
        ctx = zmq.Context()
        socks: list[zmq.Socket] = []
        try:
            while not note.exists() and len(socks) < 100:
                sock = ctx.socket(zmq.DEALER)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(front_address(sb.kint_home))
                socks.append(sock)
                sock.send(orjson.dumps({"v": 1, "id": "x", "op": "sup.ping",
                                        "timeout_ms": 5000}))
                assert sock.poll(10_000), "a client connected before the door closed unserved"
                sock.recv()
            assert note.exists(), f"{len(socks)} clients and the door never closed"
        finally:
            for sock in socks:
                sock.close(linger=0)
            ctx.term()
        # Its clients gone, only the workers' descriptors are left: it takes new ones.
        sb.wait_for(lambda: sb.client().ping(1.0), timeout=30, what="the door open again")
        assert not note.exists() and running_pid(sb.kint_home) == pid and pid_alive(pid)
        assert sb.call("sup.status")["supervisor"]["front"]["episodes"] == 1
    finally:
        sb.shutdown()


def test_a_client_accepted_as_the_socket_binds_is_counted(tmp_path):
    """The door's monitor is on before its socket binds (`prepare`): a client waiting to
    connect (as `kint supervisor start`'s own wait for the answer does) is accepted the
    moment the socket listens, and counted in as it is later counted out. Started after
    the bind, the monitor missed such an accept, and told only its disconnect: the count
    stayed one short for the supervisor's life. A real ROUTER and DEALER of this process,
    the door as the supervisor builds it."""
    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    door = FrontDoor(front)
    client = ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    path = tmp_path / FRONT_SOCKET
    try:
        client.connect(f"ipc://{path}")
        client.send(b"hello")
        door.prepare()
        front.bind(f"ipc://{path}")
        assert front.poll(10_000) and front.recv_multipart()[1] == b"hello"
        assert door.monitor is not None and door.monitor.poll(10_000)
        door.on_events(None)
        assert door.clients == 1
        client.close(linger=0)
        deadline = time.monotonic() + 10
        while door.clients and time.monotonic() < deadline:
            if door.monitor.poll(100):
                door.on_events(None)
        assert door.clients == 0
    finally:
        client.close(linger=0)
        door.shut(None)
        front.close(linger=0)
        ctx.term()


def test_far_from_the_limit_a_client_costs_the_door_no_listing(tmp_path):
    """The door lists this process's descriptors only when the count it listed last,
    moved by the clients its monitor told since, nears the margin, or once RECOUNT_S old,
    or once told of descriptors no event tells (`recount`: a worker spawned). Before, it
    listed at every connect and every disconnect, two listings per CLI command on the
    supervisor's loop (bench/bench_front_door.py). A real ROUTER and DEALERs of this
    process, far from its limit, the door as the supervisor builds it."""
    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    door = FrontDoor(front)
    path = tmp_path / FRONT_SOCKET
    rounds = 20
    try:
        door.prepare()
        assert door.monitor is not None, "no open-file limit here"
        front.bind(f"ipc://{path}")
        began = time.monotonic()

        def told(count: int) -> None:
            deadline = time.monotonic() + 10
            while door.clients != count and time.monotonic() < deadline:
                if door.monitor.poll(100):
                    door.on_events(path)
            assert door.clients == count

        clients = []
        for n in range(rounds):  # clients that connect one by one, then leave one by one
            client = ctx.socket(zmq.DEALER)
            client.setsockopt(zmq.LINGER, 0)
            client.connect(f"ipc://{path}")
            clients.append(client)
            told(n + 1)
        for n, client in enumerate(clients):
            client.close(linger=0)
            told(rounds - n - 1)
        took = time.monotonic() - began
        # One listing at the first look, and at most one a RECOUNT_S since: never one for
        # each of the 2 * rounds events.
        assert door.listings <= 2 + took / RECOUNT_S < 2 * rounds, (door.listings, took)
        listed = door.listings
        door.recount()
        door.look(path)
        assert door.listings == listed + 1
    finally:
        door.shut(None)
        front.close(linger=0)
        ctx.term()


def test_a_successor_with_the_same_pid_is_not_taken_for_the_supervisor_that_answered(
        tmp_path):
    """A client answered by one supervisor; the next one, with its pid (as in a container),
    has closed its door since. The client's connection was made before that one took the
    home: no proof it was let in, so it is refused BUSY at once, its request not sent.
    Before, the client named supervisors by pid alone, took the answer as this one's,
    sent its request on a connection nobody serves and waited out its deadline. The
    successor is the supervisor itself, held (SIGSTOP), its door closed by the test as a
    successor's would be (its note, with its pid and a later start; the socket moved):
    a process with a given pid cannot be had otherwise."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        folder = socket_dir(sb.kint_home)
        with sb.client() as client:
            client.call("sup.ping", timeout_s=10)
            time.sleep(0.01)
            started = time.time()
            with closed_by_hand(pid, folder, FrontClosed(pid, 60, LIMIT, 40, started + 1,
                                                         started)):
                asked = time.monotonic()
                with pytest.raises(KintError) as refused:
                    client.call("sup.ping", timeout_s=8)
                waited = time.monotonic() - asked
        err = refused.value
        assert err.code == "BUSY" and "takes no new clients" in err.message, (err, waited)
    finally:
        sb.shutdown()


def _queued(path) -> int:
    """The connections waiting in the listen queue of the socket file `path` (its Recv-Q,
    as `ss` reads it from the kernel): made, not yet accepted by ZeroMQ."""
    out = subprocess.run(["ss", "-xlnH"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return sum(int(row[2]) for row in rows if len(row) > 4 and row[4] == str(path))


def _stopped(pid: int) -> bool:
    """Whether every thread of `pid` is stopped (SIGSTOP lands on each in its turn)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat") as fh:
            states.append(fh.read().rsplit(")", 1)[-1].split()[0])
    return all(state == "T" for state in states)


@contextmanager
def _held_call_as_the_door_closes(tmp_path, timeout_s: float) -> Iterator[tuple]:
    """A client's sup.ping (by `timeout_s`) to a supervisor held (SIGSTOP) so it stays
    unanswered, and the door closed by the test, as the door closes it (its note, its
    socket file moved), while the client's connection waits in the socket's listen queue
    (past the client's slack for a connect): (pid, socket folder, client, the call's
    thread, what it said). The supervisor is continued, then shut, at the block's end."""
    if shutil.which("ss") is None:
        pytest.skip("no `ss` here to see the connection queued (iproute2)")
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        folder = socket_dir(sb.kint_home)
        front = folder / FRONT_SOCKET
        client = sb.client()
        os.kill(pid, signal.SIGSTOP)
        try:
            sb.wait_for(lambda: _stopped(pid), timeout=10, what="every thread stopped")
            thread, said = in_thread(lambda: client.call("sup.ping", timeout_s=timeout_s))
            sb.wait_for(lambda: _queued(front) > 0, timeout=10,
                        what="the client's connection in the listen queue")
            time.sleep(CONNECT_SLACK_S + 0.1)
            write_note(folder, FrontClosed(pid, 60, LIMIT, 40, time.time()))
            os.rename(front, folder / CLOSED_SOCKET)
            yield pid, folder, client, thread, said
        finally:
            os.kill(pid, signal.SIGCONT)
        client.close()
        _opened_again(folder)
    finally:
        sb.shutdown()


def _opened_again(folder) -> None:
    """The door the test closed by hand opened again as the door opens it (the socket file
    back, the note gone), if the test left it closed: `sb.shutdown`'s `sup.stop` is then let
    in, where a closed door refused it and the shutdown waited its whole deadline out before
    it killed the supervisor."""
    if (folder / CLOSED_SOCKET).exists():
        os.rename(folder / CLOSED_SOCKET, folder / FRONT_SOCKET)
    (folder / NOTE).unlink(missing_ok=True)


def test_a_client_connected_before_the_door_closed_waits_for_its_first_answer(tmp_path):
    """Its first request outlasting a liveness look (a second) while the door closes is
    still answered: it was accepted. Before, it was refused BUSY ("whether sup.ping reached
    it is unknown")."""
    with _held_call_as_the_door_closes(tmp_path, 30) as (pid, folder, client, thread, said):
        thread.join(2.5)  # past two liveness looks, with the door closed
        assert not said, said
        os.rename(folder / CLOSED_SOCKET, folder / FRONT_SOCKET)
        (folder / NOTE).unlink()
        os.kill(pid, signal.SIGCONT)
        thread.join(30)
        assert said.get("answer") is not None, said


def test_a_request_unanswered_behind_a_closed_door_is_not_left_queued(tmp_path):
    """A client let in (connected before the door closed) whose request gets no answer by
    its deadline while the door stays closed: the refusal names the door, and its socket
    is closed at once, so the request queued on it is not run once the door reopens (a
    retried write would run twice). Before, the socket was kept with the request on it."""
    with _held_call_as_the_door_closes(tmp_path, 4) as (pid, folder, client, thread, said):
        thread.join(30)
        err = said.get("error")
        assert err is not None and "takes no new clients" in err.message, said
        assert client._sock is None


@pytest.mark.parametrize("autostart", ["autostart", "no-autostart"])
def test_a_connection_another_supervisor_accepted_is_refused_busy_by_a_closed_door(
        tmp_path, autostart):
    """A long-lived client (a kint-server's) answered by one supervisor, that one killed, the
    next one's door closed before ZeroMQ reconnected the client's socket to it (the client
    is held stopped meanwhile, as a herd's last comer meets it): its socket dates from the
    dead one, no proof it was let in. BUSY within a liveness look or two, and its request,
    queued on a socket with no connection, is never delivered once the door reopens.
    Before, it waited out its whole deadline, ended "no answer" without naming the door,
    and the reopened door ran its request (a retried write would run twice)."""
    sb = make_sandbox(tmp_path)
    pid_b = None
    proc = None
    try:
        pid_a = sb.start()
        proc = subprocess.Popen(
            [sys.executable, str(SUPPORT / "kept_client.py"), str(sb.kint_home), "15",
             autostart], env=sb.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(pid_a, signal.SIGKILL)
        sb.wait_for(lambda: running_pid(sb.kint_home) is None, timeout=30,
                    what="the first supervisor gone")
        pid_b = sb.start()
        folder = socket_dir(sb.kint_home)
        os.kill(pid_b, signal.SIGSTOP)  # its door stays as the test leaves it
        write_note(folder, FrontClosed(pid_b, 60, LIMIT, 40, time.time()))
        os.rename(folder / FRONT_SOCKET, folder / CLOSED_SOCKET)
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("\n")
        proc.stdin.flush()
        said = json.loads(proc.stdout.readline())
        os.rename(folder / CLOSED_SOCKET, folder / FRONT_SOCKET)
        (folder / NOTE).unlink()
        os.kill(pid_b, signal.SIGCONT)
        proc.stdin.write("\n")
        proc.stdin.flush()
        after = json.loads(proc.stdout.readline())
        assert said["code"] == "BUSY", said
        assert after["late"] == 0 and not after["kept"], after
    finally:
        if pid_b is not None and pid_alive(pid_b):
            os.kill(pid_b, signal.SIGCONT)
        if proc is not None:
            proc.kill()
            proc.wait(30)
        sb.shutdown()


def test_a_note_a_killed_supervisor_left_is_gone_once_the_next_holds_the_home(tmp_path):
    """A note names its supervisor by pid alone; in a container the next supervisor often
    has the dead one's pid. It is removed as soon as the next one holds the pid lock,
    before its clients could read it as this one's (before, only once it had bound)."""
    sb = make_sandbox(tmp_path)
    sb.kint_home.mkdir(mode=0o700, exist_ok=True)
    (sb.kint_home / "run").mkdir(mode=0o700, exist_ok=True)
    folder = socket_dir(sb.kint_home)
    proc = subprocess.Popen(
        [sys.executable, str(SUPPORT / "run_kint.py"), "supervisor", "start", "--foreground"],
        env=sb.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        # The dead supervisor's, under the pid the new one has: written before it starts.
        write_note(folder, FrontClosed(proc.pid, 60, LIMIT, 40, time.time() - 60))
        (folder / CLOSED_SOCKET).write_bytes(b"")
        read_as_its = []
        deadline = time.monotonic() + 60
        while not (folder / FRONT_SOCKET).exists() and time.monotonic() < deadline:
            found = holder(sb.kint_home)
            if found is not None and found.pid == proc.pid:
                closed = read_note(folder, proc.pid)
                if closed is not None:
                    read_as_its.append(closed)
            time.sleep(0.001)
        assert (folder / FRONT_SOCKET).exists(), "the supervisor never bound"
        assert read_as_its == [], read_as_its[:1]
        assert not (folder / NOTE).exists() and not (folder / CLOSED_SOCKET).exists()
        assert sb.client().ping(5.0)
    finally:
        sb.shutdown()
        proc.wait(30)


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return folder


def test_a_note_is_read_only_from_a_private_folder_never_through_a_link_and_whole(folder):
    pid = os.getpid()
    closed = FrontClosed(pid, 60, LIMIT, 40, 1.5)
    write_note(folder, closed)
    assert read_note(folder, pid) == closed
    folder.chmod(0o755)  # anyone's folder: anyone's note
    assert read_note(folder, pid) is None
    folder.chmod(0o700)
    os.rename(folder / NOTE, folder / "elsewhere.json")
    (folder / NOTE).symlink_to(folder / "elsewhere.json")
    assert read_note(folder, pid) is None
    (folder / NOTE).unlink()
    os.mkfifo(folder / NOTE, 0o600)  # no writer: a blocking read would wait for good
    assert read_note(folder, pid) is None
    (folder / NOTE).unlink()
    (folder / NOTE).write_text(orjson.dumps(closed._asdict()).decode()
                               + " " * NOTE_MAX_BYTES)
    assert read_note(folder, pid) is None


def test_the_warm_up_is_counted_from_the_clients_told_before_the_listing(tmp_path,
                                                                         monkeypatch):
    """`before_warm_up` tells the monitor's clients first, then lists: a client accepted
    in between is in the listing and counted the supervisor's own, which keeps more room
    for the warm-up. Before (review27g 3), it listed first: a client accepted after the
    listing, told after it, was taken off a count that never had it, and the warm-up
    looked further along than it was (less room kept). A real ROUTER and DEALER of this
    process; the client connects just after the real listing (a wrapper around it), the
    one moment that tells the orders apart."""
    from kint.supervisor import front_door

    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    door = FrontDoor(front)
    path = tmp_path / FRONT_SOCKET
    client = ctx.socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    listed: dict = {}
    listing = front_door.open_files

    def a_client_right_after_the_listing():
        files = listing()
        listed["files"], listed["clients"] = files, door.clients
        client.connect(f"ipc://{path}")
        assert door.monitor is not None and door.monitor.poll(10_000)  # accepted, told
        return files

    try:
        door.prepare()
        assert door.monitor is not None, "no open-file limit here"
        front.bind(f"ipc://{path}")
        monkeypatch.setattr(front_door, "open_files", a_client_right_after_the_listing)
        door.before_warm_up()
        assert door._warm_base == listed["files"].open - listed["clients"]
    finally:
        client.close(linger=0)
        door.shut(None)
        front.close(linger=0)
        ctx.term()


@contextmanager
def _door_with_listeners(tmp_path) -> Iterator[tuple]:
    """A real ROUTER with the door and the listeners as the supervisor builds them, and
    the front socket's path: (ctx, front, door, listeners, path); shut and closed after."""
    from kint.supervisor.front_listeners import FrontListeners

    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    door = FrontDoor(front)
    try:
        yield ctx, front, door, FrontListeners(front), tmp_path / FRONT_SOCKET
    finally:
        door.shut(None)
        front.close(linger=0)
        ctx.term()


def test_a_door_whose_moved_socket_was_never_known_is_lost_not_closed_for_good(
        tmp_path, monkeypatch):
    """The moved socket removed between the door's move and its look at it (a folder
    cleaned): the door knows no moved file. Before (review27g 3), a later look took "none
    there" for "the one it moved", never found it its own to open again, and stayed
    closed for good; then (session 27) it forgot the door and the socket was bound again
    at its path, every client the unbind ended coming back at once. Now it is lost: still
    closed, its note kept, for the supervisor to bind a listener under the moved-aside
    name (front_listeners.py), which the door takes as its own and opens the usual way. A
    real ROUTER; the removal at that one moment is had by the look answering None once."""
    from kint.supervisor import front_door_stop  # where the move looks (`_move_aside`)

    with _door_with_listeners(tmp_path) as (_, _, door, listeners, path):
        door.prepare()
        assert door.monitor is not None, "no open-file limit here"
        listeners.bind(path)
        looks = [None]
        real_file_id = front_door_stop.file_id
        monkeypatch.setattr(front_door_stop, "file_id",
                            lambda p: looks.pop() if looks else real_file_id(p))
        door._close(path, OpenFiles(10, 64))
        (tmp_path / CLOSED_SOCKET).unlink()
        assert door.closed is not None and door._moved is None
        door.look(path)
        assert door.lost and (tmp_path / NOTE).exists()
        listeners.bind_again(tmp_path, tmp_path / CLOSED_SOCKET)
        door.adopt(path)
        assert not door.lost and (tmp_path / CLOSED_SOCKET).exists()
        door._open(path, OpenFiles(10, 64))
        assert door.closed is None and path.exists() and not (tmp_path / NOTE).exists()


def test_clients_of_a_listener_bound_again_stay_until_they_leave(tmp_path):
    """The supervisor binds its front socket again once its file was removed: beside the
    old listener, whose clients stay connected and counted, the new one's clients counted
    apart (the monitor names each connection's listener); the old one is unbound once its
    clients left, and the count stays right. Before, the old listener was unbound at once,
    every connection it had ended at the same moment: those clients came back all together,
    a burst faster than the supervisor's loop (tests/test_many_clients.py). A real ROUTER
    and DEALERs of this process, the door and listeners as the supervisor builds them."""
    with _door_with_listeners(tmp_path) as (ctx, front, door, listeners, path):
        clients: list[zmq.Socket] = []

        def settled() -> int:
            """The count once the monitor has been quiet for half a second."""
            while door.monitor is not None and door.monitor.poll(500):
                door.on_events(None)
            return door.clients

        def client() -> zmq.Socket:
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(f"ipc://{path}")
            return sock

        try:
            door.prepare()
            assert door.monitor is not None, "no open-file limit here"
            listeners.bind(path)
            old = listeners.endpoint
            clients = [client() for _ in range(3)]
            assert settled() == 3
            path.unlink()
            listeners.bind_again(tmp_path, path)
            # No longer than the back socket's name: a folder is chosen for those to fit.
            assert len(listeners.endpoint.rsplit("/", 1)[1]) <= len(BACK_SOCKET)
            clients.append(client())
            assert settled() == 4
            listeners.unbind_idle(door.connections_through)
            assert listeners.retired == [old], "unbound with its clients connected"
            assert door.connections_through(listeners.endpoint) == 1
            for sock in clients[:3]:  # the old listener's clients are served on it still
                sock.send(b"still")
                assert front.poll(10_000) and front.recv_multipart()[1] == b"still"
            for sock in clients[:3]:
                sock.close(linger=0)
            clients = clients[3:]
            assert settled() == 1
            listeners.unbind_idle(door.connections_through)
            assert listeners.retired == [] and settled() == 1
            # The old listener's unbind leaves the new one's file (a libzmq that unlinked its
            # path at unbind would shut every new client out from here on).
            assert path.exists()
            clients.append(client())
            clients[-1].send(b"new")
            assert front.poll(10_000) and front.recv_multipart()[1] == b"new"
            assert settled() == 2
            for sock in clients:
                sock.close(linger=0)
            clients = []
            assert settled() == 0
        finally:
            for sock in clients:
                sock.close(linger=0)
