"""A stop reaches only the supervisor it was meant for, and a stop's own failure is said
as such: review27g's findings on fix27d.

- `sup.stop` names the supervisor's pid: another one refuses it (a stop queued for a
  supervisor whose door had closed for its own stop was delivered to the next one);
- a request on a socket made with no socket file there (the door closed) is refused
  before it is sent, and a socket whose request no supervisor took is closed, so the
  next supervisor to bind never gets it;
- `kint supervisor stop` whose own `sup.stop` fails (the supervisor held mid-stop) says
  so, where it was taken for another stop's doing (SIGTERM, 70 s more).

Real supervisors throughout; the doors closed at one exact moment are closed by the test
(tests/support/closed_by_hand.py), the supervisor held, as its stop closes them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import zmq

from conftest import SUPPORT, make_sandbox, pid_alive
from kint.client import KintError
from kint.front_closed import CLOSED_SOCKET, NOTE, FrontClosed
from kint.socket_paths import socket_dir
from kint.supervisor.pidlock import running_pid
from support.closed_by_hand import close_by_hand, open_by_hand
from support.limited_box import in_thread

# How long a supervisor started after the stop is watched for a late stop: ZeroMQ
# reconnects a kept socket within 100 ms of the bind, and delivers what it queued then.
WATCH_S = 2.0


def _still_serving(sb, pid: int) -> None:
    time.sleep(WATCH_S)
    assert pid_alive(pid) and running_pid(sb.kint_home) == pid, "the supervisor stopped"
    with sb.client() as client:
        assert client.call("sup.ping", timeout_s=10)["pid"] == pid


def test_a_stop_meant_for_another_supervisor_is_refused(tmp_path):
    """Before, `sup.stop` named nobody: whichever supervisor read it stopped. One without
    a pid (an older client's) still stops it."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        with sb.client() as client, pytest.raises(KintError) as refused:
            client.call("sup.stop", args={"pid": pid + 1}, timeout_s=10)
        err = refused.value
        assert err.code == "BAD_REQUEST", err
        assert f"meant for the supervisor pid {pid + 1}" in err.message, err
        assert f"(pid {pid}) keeps running" in err.message, err
        _still_serving(sb, pid)
        with sb.client() as client:
            client.call("sup.stop", timeout_s=60)
        sb.wait_for(lambda: not pid_alive(pid), what="stopped by a stop naming nobody")
    finally:
        sb.shutdown()


def test_a_stop_sent_while_the_door_was_closed_never_stops_the_next_supervisor(tmp_path):
    """/tmp/review27g/demo_queued_stop.py: a `sup.stop` on a socket made while A's door was
    closed for its stop, A gone a moment later, B started. Before, the stop was queued on
    a socket that connected to no file, the call said A "exited before answering" and
    kept it, and B, once bound, got it and stopped."""
    sb = make_sandbox(tmp_path)
    try:
        pid_a = sb.start()
        folder = socket_dir(sb.kint_home)
        os.kill(pid_a, signal.SIGSTOP)
        now = time.time()
        close_by_hand(folder, FrontClosed(pid_a, 30, 1024, 1, now, now - 5, True))
        client = sb.client()
        caller, result = in_thread(lambda: client.call("sup.stop", timeout_s=60))
        time.sleep(0.2)
        # A's stop ends (idle: in milliseconds): its exit, and what it left goes with it.
        os.kill(pid_a, signal.SIGKILL)
        sb.wait_for(lambda: not pid_alive(pid_a), what="A gone")
        (folder / CLOSED_SOCKET).unlink(missing_ok=True)
        (folder / NOTE).unlink(missing_ok=True)
        caller.join(timeout=90)
        err = result.get("error")
        assert isinstance(err, KintError), result
        assert "is stopping" in err.message and "(sup.stop was not sent)" in err.message, err
        pid_b = sb.start()
        try:
            _still_serving(sb, pid_b)
        finally:
            client.close()
    finally:
        sb.shutdown()


def test_a_request_no_supervisor_took_never_reaches_the_next_one(tmp_path):
    """A kept socket, its supervisor stopped since: a `sup.stop` on it is refused (no
    supervisor is running) within a second. Before, the socket was kept with the stop
    queued on it, and the next supervisor to bind got it and stopped."""
    sb = make_sandbox(tmp_path)
    try:
        pid_a = sb.start()
        with sb.client() as client:
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid_a
            out = sb.kint("supervisor", "stop")
            assert out.returncode == 0, out.stdout + out.stderr
            with pytest.raises(KintError) as refused:
                client.call("sup.stop", timeout_s=60)
            assert "no supervisor is running" in refused.value.message, refused.value
            pid_b = sb.start()
            _still_serving(sb, pid_b)
    finally:
        sb.shutdown()


def test_a_request_on_a_socket_connected_as_the_door_closed_is_served(tmp_path):
    """The socket file is looked at before the connect: here it was there, the connect
    made, and the door closed for the stop just after (the supervisor held meanwhile, the
    door closed by the test at that one moment, from a wrapper around the connect). The
    request reached the supervisor and is answered once it runs. Before (review27g 3),
    the file was looked at after the connect, found gone, and the request that reached it
    was refused "(sup.ping was not sent)"."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        folder = socket_dir(sb.kint_home)
        with sb.client() as client:
            connect = client._connect
            check_serving = client._check_serving
            looked = threading.Event()

            def connect_then_the_door_closes():
                sock = _connected(connect, client)
                os.kill(pid, signal.SIGSTOP)
                now = time.time()
                close_by_hand(folder, FrontClosed(pid, 30, 1024, 1, now, now - 5, True))
                return sock

            def check_serving_looked(serving, op):
                try:
                    return check_serving(serving, op)
                finally:
                    looked.set()

            client._connect = connect_then_the_door_closes  # type: ignore[method-assign]
            client._check_serving = check_serving_looked  # type: ignore[method-assign]
            caller, result = in_thread(lambda: client.call("sup.ping", timeout_s=30))
            # The call's first liveness look made (a second on), the door still closed: the
            # look that refused it; waited for (or the call's end: refused before it sent),
            # where a 2 s sleep stood for it.
            sb.wait_for(lambda: looked.is_set() or not caller.is_alive(), timeout=60,
                        what="the call's first look whether its supervisor serves")
            open_by_hand(folder)
            os.kill(pid, signal.SIGCONT)
            caller.join(timeout=60)
            assert result.get("answer", {}).get("pid") == pid, result
    finally:
        sb.shutdown()


def _connected(connect, client) -> zmq.Socket:
    """`connect()`'s socket once ZeroMQ, in its own thread, has connected it (its monitor
    told, attached as the client's context made the socket), where a 0.3 s sleep stood
    for that."""
    ctx = client._zctx
    make = ctx.socket
    monitors: list[zmq.Socket] = []

    def socket(kind: int) -> zmq.Socket:
        sock = make(kind)
        if kind == zmq.DEALER:  # the client's, not the monitor's own PAIR
            monitors.append(sock.get_monitor_socket(zmq.EVENT_CONNECTED))
        return sock

    ctx.socket = socket
    try:
        sock = connect()
    finally:
        ctx.socket = make
    (monitor,) = monitors
    try:
        assert monitor.poll(60_000), "the client's socket never connected"
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
    return sock


def _pending_signals(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("ShdPnd:"):
                return int(line.split()[1], 16)
    return 0


def test_a_stop_whose_own_call_fails_says_so(tmp_path):
    """`kint supervisor stop` whose own `sup.stop` reached the supervisor as it was held
    mid-stop (tests/support/stop_held_mid_stop.py): refused, saying the supervisor is
    stopped and holds the stop. Before, that was taken for another stop begun meanwhile:
    it was sent SIGTERM and waited for up to 70 s more (130 s in all for a stop that took
    too long, where docs/commands.md says 70 s)."""
    sb = make_sandbox(tmp_path)
    folder = socket_dir(sb.kint_home)
    pid = None
    try:
        pid = sb.start()
        out = subprocess.run([sys.executable, str(SUPPORT / "stop_held_mid_stop.py")],
                             env={**sb.env, "KINT_TEST_UNREACHABLE_AFTER_S": "1"},
                             text=True, capture_output=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"pid {pid}" in out.stderr and "it holds sup.stop" in out.stderr, out.stderr
        assert not _pending_signals(pid) & (1 << (signal.SIGTERM - 1)), "sent SIGTERM"
    finally:
        open_by_hand(folder)
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGCONT)
            # Continued, it reads the stop it holds (its own pid) and stops.
            sb.wait_for(lambda: not pid_alive(pid), timeout=60, what="the stop it held")
        sb.shutdown()
