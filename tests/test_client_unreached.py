"""A request that may never have reached the supervisor it was sent to, whose pid file is
gone: not waited on, its socket dropped, so the next supervisor to bind never gets it
(review33b, SHOULD 1).

The client's socket records (`_connected_at`) that its socket file was there just before
the connect; ZeroMQ connects a moment after, so a supervisor that moved the file aside in
between (its door closed for its stop) never got the connection, and the request waits
queued on the client's socket for whichever supervisor binds the path next. That race is
microseconds wide: the tests set the stamp as the race leaves it (the file seen there, the
connection made after it moved), on a client whose request really is queued to nobody. The
rest is real: a supervisor held by SIGSTOP (so it binds nothing, answers nothing), its
socket file moved aside, its pid file removed, and in the first test a real successor.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from conftest import pid_alive
from kint.client import Client, KintError
from kint.front_closed import (CLOSED_SOCKET, FrontClosed, Moment, moment, process_began,
                               write_note)
from kint.paths import run_dir
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.pidlock import PID_FILE, running_pid


def _ping_on(client: Client, outcome: dict[str, Any]) -> threading.Thread:
    """`sup.ping` sent on `client` from a thread; its reply or refusal goes to `outcome`."""

    def ping() -> None:
        try:
            outcome["reply"] = client.call("sup.ping", timeout_s=60)
        except KintError as err:
            outcome["error"] = err

    caller = threading.Thread(target=ping, daemon=True)
    caller.start()
    return caller


def _queued_to(sb: Any, client: Client, pid: int, outcome: dict[str, Any],
               closed_to: str) -> tuple[threading.Thread, Moment]:
    """A `sup.ping` queued on `client` for the SIGSTOPped supervisor `pid`, whose socket
    file was moved to `closed_to` first, its stamp set as a connect racing that move
    leaves it; returned with the stamp's moment."""
    folder = socket_dir(sb.kint_home)
    at = moment()
    (folder / FRONT_SOCKET).rename(folder / closed_to)
    caller = _ping_on(client, outcome)
    # Sent (queued) to the supervisor the pid file names: its first look is a second on.
    sb.wait_for(lambda: client.sent_to == pid or outcome, interval=0.01,
                what="the request sent")
    assert not outcome, outcome
    client._connected_at = (at, pid)  # the file seen there, the connection made after
    return caller, at


def _unreached(err: KintError, pid: int, home: Any) -> None:
    assert err.code == "SUPERVISOR_UNAVAILABLE", err.message
    assert err.message == (f"the supervisor (pid {pid}) no longer holds {home} and sup.ping "
                           f"may not have reached it; whether sup.ping ran is unknown"), \
        err.message


def test_a_queued_request_is_not_waited_on_once_a_successor_holds_the_home(sandbox):
    """The supervisor N closed its door (its socket file moved aside) just as the client
    connected, and its pid file went; a successor S then takes the home and binds the
    socket path. N is still there, but nothing proves the request reached it: the client
    drops its socket at its look, so S, binding, never gets the request. It waited on N
    (no note of N's was read as N's door still open, or as cleared by a successor), and S
    answered the ping meant for N."""
    sb = sandbox
    pid = sb.start()
    outcome: dict[str, Any] = {}
    client = Client(sb.kint_home, autostart=False)
    os.kill(pid, signal.SIGSTOP)
    try:
        caller, _ = _queued_to(sb, client, pid, outcome, FRONT_SOCKET + ".aside")
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        # The client's look with the pid file gone, then the successor: the look is what
        # keeps the request from it (one that binds before the look gets it, as ever).
        sb.wait_for(lambda: client._holder.run is None or outcome, interval=0.01,
                    what="a look at the pid file since it went")
        successor = sb.start()
        assert successor != pid
        caller.join(30)
        assert not caller.is_alive()
        assert "reply" not in outcome, f"the successor (pid {successor}) got it: {outcome}"
        _unreached(outcome["error"], pid, sb.kint_home)
        assert client._sock is None  # dropped: the queued request goes to nobody
        assert pid_alive(pid) and running_pid(sb.kint_home) == successor
    finally:
        client.close()
        os.kill(pid, signal.SIGKILL)


def test_a_request_connected_as_the_door_closed_is_not_waited_on(sandbox):
    """The supervisor N's door closed for its stop (its stepping-down note, as N writes
    it) less than half a second after the client connected: ZeroMQ may have connected
    after the file moved, so the request may sit queued. With N's pid file gone the
    client does not wait on N, though N is there: it drops its socket at its next look."""
    sb = sandbox
    pid = sb.start()
    folder = socket_dir(sb.kint_home)
    outcome: dict[str, Any] = {}
    client = Client(sb.kint_home, autostart=False)
    os.kill(pid, signal.SIGSTOP)
    try:
        caller, at = _queued_to(sb, client, pid, outcome, CLOSED_SOCKET)
        began = process_began(pid)
        assert began is not None and at.boot > 0
        write_note(folder, FrontClosed(pid, 10, 1024, 1, at.wall + 0.1, at.wall - 5.0, True,
                                       at.boot + 0.1, began))
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        caller.join(30)  # a look a second, where the stop is named after 10 s
        assert not caller.is_alive()
        _unreached(outcome["error"], pid, sb.kint_home)
        assert client._sock is None
        assert pid_alive(pid)
    finally:
        client.close()
        os.kill(pid, signal.SIGKILL)


def test_a_request_its_note_showed_let_in_is_waited_on_after_a_successor_clears_it(sandbox):
    """The proof a look found in the stepping-down supervisor N's note (the connection
    made well before its door closed: let in) holds for that request once a successor,
    taking the home, clears the note (kint.front_closed.clear_left_behind): the client
    goes on waiting on N. A later request has no such proof. Looks made by hand on a
    client whose state is set as such a request leaves it (nothing is sent)."""
    from kint.front_closed import clear_left_behind

    sb = sandbox
    pid = sb.start()
    folder = socket_dir(sb.kint_home)
    client = Client(sb.kint_home, autostart=False)
    os.kill(pid, signal.SIGSTOP)  # no stop of its own meanwhile: the test says what it did
    try:
        at = moment()
        (folder / FRONT_SOCKET).rename(folder / CLOSED_SOCKET)
        client._socket(pid)
        client._connected_at = (at, pid)  # connected while its file was there
        client._named_at = time.monotonic()
        began = process_began(pid)
        assert began is not None and at.boot > 0
        write_note(folder, FrontClosed(pid, 10, 1024, 1, at.wall + 2.0, at.wall - 5.0, True,
                                       at.boot + 2.0, began))
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        assert client._check_serving(pid, "x") == pid  # let in: waited on
        clear_left_behind(folder)  # the successor's first step
        assert client._check_serving(pid, "x") == pid  # still: the note proved it
        client._sent_now()  # a later request, sent after the note
        with pytest.raises(KintError) as refused:
            client._check_serving(pid, "x")
        assert "may not have reached it" in refused.value.message
        assert client._sock is None
    finally:
        client.close()
        os.kill(pid, signal.SIGKILL)


def test_a_request_on_a_connection_the_supervisor_answered_on_is_waited_on(sandbox):
    """A supervisor N that answered on this client's socket still serves that connection
    as it steps down, whatever is left of its door (here: its socket file gone, no note,
    as once a successor cleared them): its pid file removed, the client waits on a
    request sent on it. Looks made by hand, the request's state set as a send leaves it."""
    sb = sandbox
    pid = sb.start()
    folder = socket_dir(sb.kint_home)
    client = Client(sb.kint_home, autostart=False)
    try:
        assert client.call("sup.ping", timeout_s=30)["pid"] == pid  # answered on it
        os.kill(pid, signal.SIGSTOP)  # no step-down of its own meanwhile
        (folder / FRONT_SOCKET).rename(folder / (FRONT_SOCKET + ".aside"))
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        client._named_at = time.monotonic()
        assert client._check_serving(pid, "x") == pid
        assert client._sock is not None
    finally:
        client.close()
        os.kill(pid, signal.SIGKILL)
