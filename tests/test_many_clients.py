"""Hundreds of clients at the supervisor's open-file limit: the real supervisor, started
under RLIMIT_NOFILE 64 (soft and hard, as `ulimit -n 64` sets them, so its start cannot
raise it), and a few hundred real ZeroMQ DEALER clients of this process, each asking
`sup.ping` as a CLI call or an agent's session does.

Before kint/supervisor/front_door.py, the client that took its last descriptor killed the
supervisor: libzmq aborts when accept() on an IPC socket fails with EMFILE (`Too many
open files (src/ipc_listener.cpp:297)` on its raw stderr, SIGABRT, no log line), and every
client waited out its deadline. Now the supervisor closes its socket to new clients while
it still has descriptors to spare, keeps serving the clients it has, says so once in its
log and in `kint supervisor status` (exit 1, with the count and the limit); a new client
is refused BUSY naming the limit, and the socket opens again once clients leave.

The clients connect a few at a time and wait for their answers, as separate processes do
(each starts Python first): the door is shut from the supervisor's loop, and a burst of
connections faster than one turn of it could still overrun a margin this small.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import orjson
import pytest
import zmq

from conftest import KINT, SUPPORT, make_sandbox, pid_alive
from kint import render
from kint.client import Client, KintError
from kint.front_closed import CLOSED_SOCKET, NOTE
from kint.open_files import WARM_UP_FDS
from kint.socket_paths import front_address, socket_dir
from kint.supervisor.front_door import backlog_for
from kint.supervisor.pidlock import running_pid
from support.limited_box import start_limited
from support.procs import signal_pending

LIMIT = 64
CLIENTS = 240
# Clients that connect together, then wait for their answers.
WAVE = 4


@pytest.fixture(scope="module")
def sb(tmp_path_factory):
    sb = make_sandbox(tmp_path_factory.mktemp("many-clients"))
    _start(sb)
    yield sb
    sb.shutdown()


def _start(sb) -> None:
    """The supervisor started under the limit, its worker forkserver ready: these tests
    count on the margin of a supervisor that warmed up. While its warm-up runs, the margin
    holds the descriptors the warm-up may yet open, and the door closes sooner
    (`test_a_crowd_during_the_forkserver_warm_up_leaves_it_room`)."""
    start_limited(sb, LIMIT)  # waits for the warm-up too


def _ping(sock: zmq.Socket, rid: str) -> None:
    sock.send(orjson.dumps({"v": 1, "id": rid, "op": "sup.ping", "timeout_ms": 5000}))


def _client(ctx: zmq.Context, sb) -> zmq.Socket:
    """A client connected to the supervisor's front socket, its `sup.ping` sent."""
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(front_address(sb.kint_home))
    _ping(sock, "first")
    return sock


def _answered(sock: zmq.Socket, rid: str, wait_ms: int) -> bool:
    if not sock.poll(wait_ms):
        return False
    reply = orjson.loads(sock.recv())
    assert reply["id"] == rid and reply["ok"], reply
    return True


def _served_still(served: list[zmq.Socket]) -> dict:
    """Each of the `served` clients asks again on its connection and is answered; then the
    first asks `sup.status`: its result."""
    for n, sock in enumerate(served):
        _ping(sock, f"again-{n}")
    assert all(_answered(sock, f"again-{n}", 10_000) for n, sock in enumerate(served))
    served[0].send(orjson.dumps({"v": 1, "id": "st", "op": "sup.status", "timeout_ms": 5000}))
    assert served[0].poll(10_000)
    return orjson.loads(served[0].recv())["result"]


def _log(sb) -> str:
    return (sb.kint_home / "supervisor.log").read_text()


def _crowd(sb, ctx: zmq.Context, pid: int) -> tuple[list[zmq.Socket], list[zmq.Socket]]:
    """CLIENTS clients, a few at a time until the supervisor closes its socket, then the
    rest: the ones it answered, and the ones it did not."""
    note = socket_dir(sb.kint_home) / NOTE
    served: list[zmq.Socket] = []
    unserved: list[zmq.Socket] = []
    while not note.exists() and pid_alive(pid) and len(served) + len(unserved) < CLIENTS:
        for sock in [_client(ctx, sb) for _ in range(WAVE)]:
            # Generous while the socket is open; a moment once it is closed.
            wait = 200 if note.exists() else 10_000
            (served if _answered(sock, "first", wait) else unserved).append(sock)
    # The rest connect after the door closed: none reaches the supervisor.
    late = [_client(ctx, sb) for _ in range(CLIENTS - len(served) - len(unserved))]
    poller = zmq.Poller()
    for sock in late:
        poller.register(sock, zmq.POLLIN)
    assert not poller.poll(500)
    return served, unserved + late


def _leave(ctx: zmq.Context, served: list[zmq.Socket], unserved: list[zmq.Socket],
           held_s: float = 0.0) -> None:
    """The crowd leaves: first the clients the door kept out, still knocking (a DEALER
    connects again every 100 ms), then the ones it served, then their context. The served
    first, the door opened again as they left, while the others, not yet closed, still
    knocked: they came in all at once, more than the free descriptors, and libzmq aborted
    the supervisor (EMFILE at its accept, `Too many open files (src/ipc_listener.cpp:297)`
    on its raw stderr, no line in its log), as a stress of these tests showed with the
    closing thread held up a tenth of a second between the two, as a loaded box holds it.
    These raw DEALERs knock as kint's own client does not: refused, it drops its socket
    (kint/client_closed_door.py). `held_s`: the closing thread held that long between the
    two groups."""
    for sock in unserved:
        sock.close(linger=0)
    time.sleep(held_s)
    for sock in served:
        sock.close(linger=0)
    ctx.term()


@contextmanager
def _door_closed(sb, knocking: bool = True) -> Iterator[tuple[int, Path, list[zmq.Socket]]]:
    """The supervisor's door closed by a crowd of clients: its pid, its socket folder and
    the clients it served. The
    crowd leaves at the block's end; without `knocking`, the clients the door kept out
    leave as soon as it closed, the ones it serves stay to the end."""
    pid = running_pid(sb.kint_home)
    folder = socket_dir(sb.kint_home)
    ctx = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, CLIENTS + 64)
    served: list[zmq.Socket] = []
    unserved: list[zmq.Socket] = []
    try:
        served, unserved = _crowd(sb, ctx, pid)
        assert (folder / NOTE).exists() and served
        if not knocking:
            for sock in unserved:
                sock.close(linger=0)
        yield pid, folder, served
    finally:
        _leave(ctx, served, unserved)


def _clients_settle_at(sb, count: int) -> dict:
    """`sup.status`'s `front` once its count of clients reads `count` (this call's own
    connection among them): a client that left is counted until the supervisor's loop
    reads its disconnect, a moment after."""
    seen: list[dict] = []

    def settled() -> dict | None:
        seen[:] = [sb.call("sup.status")["supervisor"]["front"]]
        return seen[0] if seen[0]["clients"] == count else None

    try:
        return sb.wait_for(settled, timeout=20, what=f"{count} client(s) counted")
    except AssertionError as err:
        raise AssertionError(f"{err}; the door said {seen}") from None


def test_the_clients_are_counted_from_the_start(sb):
    """The monitor is on before the socket binds: a client connected as it bound (`kint
    supervisor start`'s own wait for the answer) is counted in as it is counted out. Once
    the monitor started after the bind, such a client's disconnect alone was counted, and
    the count stayed one short for the supervisor's life (0 with this call connected)."""
    assert _clients_settle_at(sb, 1)["closed"] is None


def test_past_the_open_file_limit_new_clients_are_refused_and_connected_ones_served(sb):
    pid = running_pid(sb.kint_home)
    note = socket_dir(sb.kint_home) / NOTE
    ctx = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, CLIENTS + 64)  # this process's own cap, not the supervisor's
    served: list[zmq.Socket] = []
    unserved: list[zmq.Socket] = []
    try:
        served, unserved = _crowd(sb, ctx, pid)
        assert pid_alive(pid) and running_pid(sb.kint_home) == pid, (
            "the supervisor died: " + (sb.kint_home / "run" / "supervisor.stderr").read_text())
        assert note.exists(), f"all {CLIENTS} clients served under a limit of {LIMIT}"
        assert len(served) >= 16 and unserved, (len(served), len(unserved))

        # Every client it took is served still, and one of them is told why others are not.
        status = _served_still(served)
        assert status["degraded"] and status["supervisor"]["front"]["episodes"] == 1, status
        closed = status["supervisor"]["front"]["closed"]
        assert closed["limit"] == LIMIT and closed["pid"] == pid, closed
        assert 0 < closed["clients"] < closed["open"], closed
        # Every client it served is connected (one of the wave the door closed in may
        # have been accepted and its answer not yet read).
        assert len(served) <= status["supervisor"]["front"]["clients"] <= (
            len(served) + len(unserved)), (status, len(served), len(unserved))
        assert f"of the supervisor's {LIMIT} open files" in render.supervisor_status_text(status)

        # A new client is refused at once, naming the limit, not left to its deadline.
        with Client(sb.kint_home) as client:
            with pytest.raises(KintError) as refused:
                client.call("sup.ping", timeout_s=30)
        err = refused.value
        assert err.code == "BUSY", err
        assert f"of its {LIMIT} open files (ulimit -n)" in err.message, err.message
        assert "(sup.ping was not sent)" in err.message, err.message
        assert "ulimit -n" in err.hint and "kint supervisor stop" in err.hint, err.hint
        # One that does not start supervisors (as `sb.call`) says so within a second or two.
        with pytest.raises(KintError) as refused:
            sb.call("sup.ping", timeout_s=30)
        assert refused.value.code == "BUSY", refused.value

        # `kint supervisor status`: degraded, with the count and the limit.
        out = sb.kint("supervisor", "status")
        assert out.returncode == 1, out.stdout + out.stderr
        assert f"of its {LIMIT} open files (ulimit -n)" in out.stderr and "[BUSY]" in out.stderr
        out = sb.kint("supervisor", "status", "--json")
        assert out.returncode == 1 and json.loads(out.stdout)["error"] == "BUSY", out.stdout
        assert "Traceback" not in out.stderr
    finally:
        _leave(ctx, served, unserved)

    # Once its clients leave, it takes new ones again: the same process, one episode.
    sb.wait_for(lambda: sb.client().ping(1.0), timeout=20, what="the socket open again")
    assert not note.exists() and running_pid(sb.kint_home) == pid
    assert _clients_settle_at(sb, 1) == {"closed": None, "episodes": 1,
                                         "clients": 1}  # this call's
    assert not sb.call("sup.status")["degraded"]
    log = _log(sb)
    assert log.count("new clients are refused until some close") == 1, log
    assert log.count("taking new clients again") == 1, log
    assert f"of {LIMIT} open files (ulimit -n) in use, " in log, log
    # Its socket is where it was bound: no rebinding took the closed socket for a removal.
    assert "was removed or replaced" not in log, log
    assert os.path.exists(socket_dir(sb.kint_home) / "kint.sock")


def test_a_watch_started_before_the_door_closed_shows_it_closed(sb):
    """`kint supervisor status --watch` keeps its connection, which the supervisor serves
    still: it shows the line saying new clients are refused, where it used to end at its
    next look with the BUSY a new client gets."""
    watch = subprocess.Popen([KINT, "supervisor", "status", "--watch"], env=sb.env, text=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)
    reader.start()
    try:
        sb.wait_for(lambda: any(line.startswith("supervisor pid") for line in lines),
                    timeout=30, what="the watch's first status")
        with _door_closed(sb):
            sb.wait_for(lambda: any(line.startswith("new clients refused: ")
                                    for line in lines),
                        timeout=20, what="the watch showing the door closed")
            assert watch.poll() is None, watch.stderr.read()
            assert f"of the supervisor's {LIMIT} open files (ulimit -n)" in "".join(lines)
    finally:
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=30)
    assert watch.returncode == 0, err
    sb.wait_for(lambda: sb.client().ping(1.0), timeout=20, what="the socket open again")


def test_a_moved_socket_removed_while_the_door_is_closed_is_bound_again_closed(sb):
    """Removed (its folder cleaned, or the file), the moved socket leaves no door to open:
    the supervisor says so once and binds its front socket again, under the moved-aside
    name, the door still closed, beside the old listener, whose clients it goes on
    serving on their connections; the door opens the usual way once they leave. Before,
    it forgot the door and bound the socket at its path, its old listener unbound: every
    client that unbind ended reconnected at once with the ones the door had kept out
    (raw DEALERs, every 100-200 ms), a burst faster than its loop: closed again at best
    (a second episode), at worst aborted by libzmq (`Too many open files
    (src/ipc_listener.cpp:297)`, SIGABRT 35 ms after the rebinding, once in some hundred
    stress runs). Here the clients the door kept out knock all along."""
    before = sb.call("sup.status")["supervisor"]["front"]["episodes"]
    with _door_closed(sb) as (pid, folder, served):
        (folder / CLOSED_SOCKET).unlink()
        sb.wait_for(lambda: (folder / CLOSED_SOCKET).exists() or not pid_alive(pid),
                    timeout=20, what="the front socket bound again, closed")
        # Past the reconnect interval of any client the rebinding ended (100-200 ms): a
        # time that must pass for the burst it would make to come, the premise itself, not
        # a state; a loaded box that stretches it only makes the test see more of it.
        time.sleep(0.5)
        assert pid_alive(pid), (sb.kint_home / "run" / "supervisor.stderr").read_text()
        assert not (folder / "kint.sock").exists() and (folder / NOTE).exists()
        # Every client it served is served on: one of them asks how it stands.
        front = _served_still(served)["supervisor"]["front"]
        assert front["closed"] is not None and front["episodes"] == before + 1, front
    # Once they left, it opens the door the usual way: one episode in all.
    sb.wait_for(lambda: sb.client().ping(1.0), timeout=20, what="the socket open again")
    assert running_pid(sb.kint_home) == pid and not (folder / NOTE).exists()
    assert _clients_settle_at(sb, 1) == {"closed": None, "episodes": before + 1,
                                         "clients": 1}
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("kint.sock")) == [
        "kint.sock"]
    log = _log(sb)
    assert log.count(f"{folder / CLOSED_SOCKET} (the front socket moved aside for want of "
                     f"open files) was removed") == 1, log
    assert "could not open the front socket" not in log, log
    assert "Too many open files" not in (sb.kint_home / "run" / "supervisor.stderr").read_text()


def test_a_socket_file_removed_is_bound_again_without_ending_its_clients(sb):
    """The front socket's file removed under the supervisor, its door open: it binds the
    socket again beside the old listener, and the clients connected through that one keep
    their connections (no disconnect, as their own ZeroMQ monitors tell) and are served;
    a new client reaches the new one. Before, the old listener was unbound, and every
    client it ended reconnected at once (front_listeners.py)."""
    pid = running_pid(sb.kint_home)
    front = socket_dir(sb.kint_home) / "kint.sock"
    ctx = zmq.Context()
    clients = [_client(ctx, sb) for _ in range(8)]
    monitors = [sock.get_monitor_socket(zmq.EVENT_DISCONNECTED) for sock in clients]
    try:
        assert all(_answered(sock, "first", 10_000) for sock in clients)
        front.unlink()
        sb.wait_for(lambda: front.exists(), timeout=20, what="the socket bound again")
        for n, sock in enumerate(clients):
            _ping(sock, f"again-{n}")
        assert all(_answered(sock, f"again-{n}", 10_000) for n, sock in enumerate(clients))
        # Each answered: a client the rebinding ended had its disconnect told by its monitor
        # (at the unbind) before it reconnected to be answered, so that event is here by now
        # however slowly the box ran, where a half-second sleep stood for it.
        assert not any(monitor.poll(0) for monitor in monitors), "a client was disconnected"
        assert sb.client().ping(5.0) and running_pid(sb.kint_home) == pid
    finally:
        for sock in clients:
            sock.disable_monitor()
        for sock in monitors + clients:
            sock.close(linger=0)
        ctx.term()
    assert _clients_settle_at(sb, 1)["closed"] is None
    assert _log(sb).count(f"{front} was removed or replaced") == 1
    # Its clients gone, the old listener is unbound (within a second): one listening
    # descriptor a removal, not kept for the supervisor's life. One is left, under the
    # name it was bound at before its file was moved to kint.sock.
    sb.wait_for(lambda: len(_listening(pid)) == 1, timeout=20, what="the old listener unbound")
    assert _listening(pid)[0].startswith(f"{front.parent}/kint.new")


def _listening(pid: int) -> list[str]:
    """The paths the listening unix sockets of process `pid` were bound at (Linux's
    /proc/net/unix, by the inodes of its descriptors)."""
    mine = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(target[len("socket:["):-1])
    paths = []
    with open("/proc/net/unix") as table:
        next(table)
        for line in table:
            cols = line.split()
            # Flags 00010000: __SO_ACCEPTCON, a listening socket.
            if len(cols) >= 8 and cols[6] in mine and int(cols[3], 16) & 0x10000:
                paths.append(cols[7])
    return sorted(path for path in paths if not path.endswith("workers.sock"))


def test_a_crowd_that_leaves_does_not_come_back_in_at_once(sb):
    """The crowd leaves (`_leave`) with the closing thread held half a second between the
    clients the door kept out and the ones it served: the door opens once, when the
    served have gone, and no knocking client is left to rush in. Closed the other way
    round, the door opened during the hold and the knocking clients came in at once:
    closed again at best, the supervisor aborted by libzmq at worst."""
    pid = running_pid(sb.kint_home)
    episodes = sb.call("sup.status")["supervisor"]["front"]["episodes"]
    ctx = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, CLIENTS + 64)
    served, unserved = _crowd(sb, ctx, pid)
    assert served and unserved
    _leave(ctx, served, unserved, held_s=0.5)
    sb.wait_for(lambda: sb.client().ping(1.0) or not pid_alive(pid), timeout=20,
                what="the socket open again")
    assert pid_alive(pid), (sb.kint_home / "run" / "supervisor.stderr").read_text()
    assert _clients_settle_at(sb, 1) == {"closed": None, "episodes": episodes + 1,
                                         "clients": 1}


def _kint_supervisor_stop(sb, **timings: str) -> subprocess.Popen:
    """`kint supervisor stop` started through run_kint.py, with the test timings given
    (tests/support/kint_test_timings.py)."""
    return subprocess.Popen(
        [sys.executable, str(SUPPORT / "run_kint.py"), "supervisor", "stop"],
        env={**sb.env, **timings}, text=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_supervisor_that_takes_no_new_clients_is_stopped_by_kint_supervisor_stop(sb):
    """The refusal's hint says to restart it: `kint supervisor stop` cannot connect either,
    and stops it by SIGTERM, as cleanly; the moved socket and the note go with it."""
    with _door_closed(sb) as (pid, folder, _):
        # Its stop takes longer than the command's wait for an exit (cut to half a second
        # here, 10 s for a user): held (SIGSTOP) as the SIGTERM arrives, resumed after it.
        # The command waits as long as it would for `sup.stop`'s answer and the exit.
        os.kill(pid, signal.SIGSTOP)
        try:
            stop = _kint_supervisor_stop(sb, KINT_TEST_STOP_EXIT_WAIT_S="0.5")
            # Its SIGTERM arrived (it waits, untaken, in the held supervisor), however long
            # the command's start and imports took on a loaded box; then a second, well past
            # that half second: a time that must pass, the premise itself.
            sb.wait_for(lambda: signal_pending(pid, signal.SIGTERM) or stop.poll() is not None,
                        timeout=90, what="the command's SIGTERM")
            time.sleep(1.0)
        finally:
            os.kill(pid, signal.SIGCONT)
        out, err = stop.communicate(timeout=90)
        assert stop.returncode == 0, out + err
        assert "supervisor stopped" in out, out
    assert not pid_alive(pid) and running_pid(sb.kint_home) is None
    assert sorted(p.name for p in folder.iterdir() if "kint.sock" in p.name or
                  p.name.startswith("front-closed")) == []
    assert "supervisor %d stopped" % pid in _log(sb)


def test_a_stopped_supervisor_that_takes_no_new_clients_is_said_stopped_by_the_stop(sb):
    """Closed to new clients and held (SIGSTOP): `kint supervisor stop` sends SIGTERM, sees
    it stopped for the unreachable bound (cut to a second here, 10 s for a user), and says
    so, naming how to resume it. Before, it waited the whole minute and more `sup.stop`
    would have had, then said TIMEOUT. Resumed, it stops on that SIGTERM. Runs after the
    test above stopped the module's supervisor, and starts its own."""
    _start(sb)
    with _door_closed(sb) as (pid, folder, _):
        os.kill(pid, signal.SIGSTOP)
        try:
            stop = _kint_supervisor_stop(sb, KINT_TEST_UNREACHABLE_AFTER_S="1")
            out, err = stop.communicate(timeout=120)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert stop.returncode != 0, out + err
        assert "is stopped" in err and f"kill -CONT {pid}" in err, err
    sb.wait_for(lambda: not pid_alive(pid), timeout=60, what="the supervisor gone on SIGTERM")


def test_a_crowd_during_the_forkserver_warm_up_leaves_it_room(tmp_path):
    """A crowd that arrives while the worker forkserver warms up (its thread, beside the
    loop, gets its turn late on a loaded box: held here until the crowd is in). The door
    closes with room left for what the warm-up opens after it (up to WARM_UP_FDS) and the
    backlog still to be accepted; the warm-up then ends well, and the clients the door let
    in are served. Before, the door closed at the usual margin (14 free at 64), which the
    warm-up's descriptors ate, and a client accepted next met EMFILE: libzmq aborted the
    supervisor (seen once in some fifty runs of the tests above)."""
    sb = make_sandbox(tmp_path / "machine")
    hold = tmp_path / "let-the-warm-up-go"
    sb.env["KINT_TEST_WARM_UP_HOLD"] = str(hold)
    sb.kint_home.mkdir(mode=0o700, exist_ok=True)
    ctx = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, CLIENTS + 64)
    served: list[zmq.Socket] = []
    unserved: list[zmq.Socket] = []
    try:
        with open(tmp_path / "supervisor.err", "ab") as err:
            subprocess.Popen(
                [sys.executable, str(SUPPORT / "run_supervisor_warm_up_held.py"), "--home",
                 str(sb.kint_home)], env=sb.env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT)))
        sb.wait_for(lambda: sb.client().ping(0.5), interval=0.05, what="the supervisor")
        pid = running_pid(sb.kint_home)
        assert sb.call("sup.status")["supervisor"]["forkserver"]["ready"] is False

        served, unserved = _crowd(sb, ctx, pid)
        assert pid_alive(pid), (tmp_path / "supervisor.err").read_text()
        note = json.loads((socket_dir(sb.kint_home) / NOTE).read_text())
        free = note["limit"] - note["open"]
        assert free >= WARM_UP_FDS + backlog_for(LIMIT), note

        hold.touch()  # the warm-up opens its descriptors now, the door closed
        status_rid = iter(range(1000))

        def forkserver() -> dict | None:
            rid = f"status-{next(status_rid)}"
            served[0].send(orjson.dumps({"v": 1, "id": rid, "op": "sup.status",
                                         "timeout_ms": 5000}))
            assert served[0].poll(10_000), "no answer from the supervisor"
            reply = orjson.loads(served[0].recv())
            assert reply["id"] == rid, reply
            found = reply["result"]["supervisor"]["forkserver"]
            return found if found["ready"] else None

        assert sb.wait_for(forkserver, timeout=60, what="the forkserver ready") == {
            "ready": True, "missing_preload": []}
        for n, sock in enumerate(served):
            _ping(sock, f"again-{n}")
        assert all(_answered(sock, f"again-{n}", 10_000) for n, sock in enumerate(served))
        assert pid_alive(pid) and running_pid(sb.kint_home) == pid
    finally:
        hold.touch()
        _leave(ctx, served, unserved)
        try:
            # Once its clients left, it takes new ones again, and stops.
            sb.wait_for(lambda: sb.client().ping(1.0), timeout=20, what="the socket open")
        finally:
            sb.shutdown()
    assert "Too many open files" not in (tmp_path / "supervisor.err").read_text()
    assert "the worker forkserver did not start" not in _log(sb)


def test_a_crowd_while_the_supervisor_stops_is_told_it_stops(tmp_path):
    """The supervisor's stop takes up to 20 s with its workers (one held here, SIGSTOP,
    as long as the test looks), and its socket monitor is off from the stop's start
    (libzmq#3575): nothing kept the door. A crowd then took its last descriptors, and
    libzmq aborted it mid-stop (its workers left to their own exits, no "stopped" in its
    log). Now the door closes as the stop begins: the crowd never reaches it, a new
    client is told it stops (not left to its deadline), and it stops cleanly, leaving no
    moved socket or note behind."""
    sb = make_sandbox(tmp_path / "machine")
    ctx = zmq.Context()
    ctx.set(zmq.MAX_SOCKETS, CLIENTS + 64)
    crowd: list[zmq.Socket] = []
    worker = None
    try:
        _start(sb)
        pid = running_pid(sb.kint_home)
        worker = sb.call("status", db=sb.sibyl_db, timeout_s=60)["worker"]["pid"]
        os.kill(worker, signal.SIGSTOP)  # the stop waits for it
        os.kill(pid, signal.SIGTERM)
        sb.wait_for(lambda: "supervisor stopping 1 worker(s)" in _log(sb), timeout=20,
                    what="the stop begun")

        crowd = [_client(ctx, sb) for _ in range(CLIENTS)]
        poller = zmq.Poller()
        for sock in crowd:
            poller.register(sock, zmq.POLLIN)
        answered = poller.poll(1000)
        assert pid_alive(pid), (sb.kint_home / "run" / "supervisor.stderr").read_text()
        assert not answered, f"{len(answered)} of the crowd answered"

        with Client(sb.kint_home) as client:  # a command's: it would start a supervisor
            with pytest.raises(KintError) as refused:
                client.call("sup.ping", timeout_s=30)
        err = refused.value
        assert err.code == "SUPERVISOR_UNAVAILABLE", err
        assert f"the supervisor (pid {pid}) is stopping" in err.message, err.message
        assert "(sup.ping was not sent)" in err.message and "has stopped" in err.hint, err
        out = sb.kint("supervisor", "status")
        assert out.returncode == 1 and "is stopping" in out.stderr, out.stdout + out.stderr
    finally:
        if worker is not None:
            os.kill(worker, signal.SIGCONT)
        for sock in crowd:
            sock.close(linger=0)
        ctx.term()
    sb.wait_for(lambda: running_pid(sb.kint_home) is None, timeout=60,
                what="the supervisor stopped")
    assert "supervisor %d stopped" % pid in _log(sb)
    assert "Too many open files" not in (sb.kint_home / "run" / "supervisor.stderr").read_text()
    folder = socket_dir(sb.kint_home)
    assert not (folder / NOTE).exists() and not (folder / CLOSED_SOCKET).exists()
