"""A cast left queued at a client's close (`Client.close(linger_ms)`) is delivered before the
process that closed it exits, within the linger: kint-server's goodbye (its `exit_push` or
`detach`, kint/agent_server/session.py) is the last thing it sends, and it then exits,
its log saying whether that goodbye left (the last test: the close measures it).

ZeroMQ keeps a closed socket's queue for its linger only while its context lives, and a
process's shared context (`zmq.Context.instance()`) is never ended: at the exit, pyzmq
leaves it, and the queue went with the process. A cast on a connection still being made
(a fresh socket: its handshake waits for the supervisor's I/O) was lost so. A client with
a context of its own ends it at its close, which waits out the linger for what is queued.

Real parts: a supervisor started by `kint supervisor start`, the space's worker, and the
client in a process of its own that casts and exits. The supervisor is held (SIGSTOP)
from before the cast until the client's close has had time to return: the connection's
handshake then waits on it, a state that lasts, where a busy supervisor's I/O thread
leaves only a moment.

A second stop signal while the close waits (kint-server's harness sending SIGTERM again)
is only noted there (kint/mcp_server.py), and must not end the wait either: libzmq's
context end returns at a signal (EINTR) and pyzmq then takes the context for ended, so
the close returned at once and the goodbye went with the process. The second test sends
that signal while the child's close waits on the held supervisor.

A Ctrl-C in a host whose SIGINT raises (a Hermes host: Python's own KeyboardInterrupt)
must leave that host's signal mask as it was: the close once blocked the stop signals in
the caller's thread for its wait, and a handler that raised just before the restore left
them blocked for good, inherited by every child the host started after. The wait is now a
thread's of its own, the caller's mask never changed: the third test reads the caller's
mask during the wait and after the interrupt, and sees the goodbye still sent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import make_sandbox, wait_until, write_store
from kint.client import Client
from kint.socket_paths import FRONT_SOCKET, socket_dir

SESSION = "agent-going"
# The client of a process that says goodbye and exits: its cast, then its close with a
# linger longer than the test holds the supervisor (a state that lasts, not a window).
_GOODBYE = """
import sys
from pathlib import Path
from kint.client import Client

home, tenant, db, space, session = sys.argv[1:6]
client = Client(Path(home), autostart=False, own_context=True)
print("casting", flush=True)
client.cast("detach", tenant=tenant, db=db, space=space, args={"session": session})
client.close(linger_ms=120_000)
print("closed", flush=True)
"""
# The same, in a process that notes a stop signal as kint-server does once it unwinds,
# and says when it begins its close: from there its main thread sleeps only in that close.
_NOTED_GOODBYE = """
import signal, sys
from pathlib import Path
from kint.client import Client

noted = []
for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, lambda signum, _frame: noted.append(signum))
home, tenant, db, space, session = sys.argv[1:6]
client = Client(Path(home), autostart=False, own_context=True)
client.cast("detach", tenant=tenant, db=db, space=space, args={"session": session})
print("closing", flush=True)
client.close(linger_ms=120_000)
print("closed", noted, flush=True)
"""

# The same in a process whose Ctrl-C raises, as in a Hermes host: it writes the signals its
# main thread blocks once the close is cut short, and exits.
_INTERRUPTED_GOODBYE = """
import os, signal, sys
from pathlib import Path
from kint.client import Client

signal.signal(signal.SIGINT, signal.default_int_handler)
home, tenant, db, space, session, note = sys.argv[1:7]
client = Client(Path(home), autostart=False, own_context=True)
client.cast("detach", tenant=tenant, db=db, space=space, args={"session": session})
print("closing", *os.listdir("/proc/self/task"), flush=True)
try:
    client.close(linger_ms=120_000)
except KeyboardInterrupt:
    blocked = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    Path(note + ".part").write_text(f"interrupted {blocked}")
    os.replace(note + ".part", note)
"""
_STOPS = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}


def _blocked(pid: int) -> set[int]:
    """The signals the process's main thread blocks (its SigBlk in /proc)."""
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    mask = int(next(ln for ln in status.splitlines() if ln.startswith("SigBlk:")).split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def _sleeping(pid: int, tid: int | None = None) -> bool:
    """Whether the process's main thread (or its thread `tid`) sleeps in a wait (its state
    S in /proc)."""
    where = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    stat = Path(where).read_text()
    return stat[stat.rindex(")") + 2] == "S"


def _ender_waits(pid: int, before: set[int]) -> bool:
    """Whether the close's ender thread (kint/client_context.py: a thread not among
    `before`, the child's threads as its close began) sleeps in the context's end, and the
    main thread in its wait for it. The main thread alone asleep is no proof: it also sleeps
    in Thread.start's wait for the new thread to run, where a raised Ctrl-C cuts the start
    short before the thread is counted at the exit (the process then exited at once, its
    goodbye unsent: seen once under xdist, session 38), a window of the close before its
    wait, which no close can make safe."""
    new = {int(t) for t in os.listdir(f"/proc/{pid}/task")} - before
    return bool(new) and all(_sleeping(pid, t) for t in new) and _sleeping(pid)


@contextlib.contextmanager
def _attached(tmp_path: Path) -> Iterator[tuple]:
    """A started sandbox with SESSION attached: yields (sandbox, supervisor pid, children),
    the children list taking the goodbye processes the test starts, killed at the end if
    a failed assertion left them running, so one test's child never outlives its sandbox."""
    sb = make_sandbox(tmp_path)
    pid = sb.start()
    children: list[subprocess.Popen] = []
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        attached = sb.call("attach", sb.sibyl_db, timeout_s=60,
                           args={"session": SESSION, "watcher": False})
        assert attached.get("ended") is not True and attached["sessions"] == 1, attached
        yield sb, pid, children
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
        sb.shutdown()


@contextlib.contextmanager
def _held(pid: int) -> Iterator[None]:
    """The supervisor held (SIGSTOP) for the body: the goodbye's handshake waits on it, a
    state that lasts; it runs on (SIGCONT) whatever the body raised."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _spawn(sb, children: list, script: str, *extra: str) -> subprocess.Popen:
    """A process of its own running a goodbye script for SESSION of the sandbox's store."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(sb.kint_home), sb.tenant,
         str(sb.sibyl_db), sb.label(sb.sibyl_db), SESSION, *extra],
        env=sb.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    children.append(child)
    assert child.stdout is not None
    return child


def _still_running(child: subprocess.Popen, seconds: float) -> None:
    """The child has not exited after `seconds`: its close still waits for its cast."""
    try:
        child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass
    assert child.poll() is None, (child.returncode, child.communicate())


def _assert_goodbye_taken(sb) -> None:
    """The worker took the goodbye: a fresh attach of SESSION says it ended."""
    def ended() -> bool:
        again = sb.call("attach", sb.sibyl_db, timeout_s=30,
                        args={"session": SESSION, "watcher": False})
        return again.get("ended") is True

    assert wait_until(ended, timeout=30, interval=0.3)


def test_a_cast_queued_at_close_reaches_the_worker_after_the_process_exits(tmp_path):
    with _attached(tmp_path) as (sb, pid, children):
        with _held(pid):
            child = _spawn(sb, children, _GOODBYE)
            assert child.stdout.readline() == "casting\n"
            # A close that does not wait for its cast returns, and the process exits:
            # before, the process had exited here, its cast never sent.
            _still_running(child, 3)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0 and out == "closed\n", (child.returncode, out, err)
        _assert_goodbye_taken(sb)


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_second_signal_during_the_close_leaves_the_cast_sent(tmp_path, second):
    with _attached(tmp_path) as (sb, pid, children):
        with _held(pid):
            child = _spawn(sb, children, _NOTED_GOODBYE)
            assert child.stdout.readline() == "closing\n"
            # The close's wait for the held supervisor: it lasts while the supervisor does.
            assert wait_until(lambda: _sleeping(child.pid), timeout=30, interval=0.05)
            os.kill(child.pid, second)  # the second signal, during that wait
            # Before, the signal ended the wait: the process had exited, its cast unsent.
            _still_running(child, 2)
        out, err = child.communicate(timeout=60)
        assert (child.returncode, out) == (0, f"closed [{int(second)}]\n"), err
        _assert_goodbye_taken(sb)


def test_a_ctrl_c_that_raises_during_the_close_leaves_the_mask_and_the_cast_sent(tmp_path):
    note = tmp_path / "interrupted.txt"
    with _attached(tmp_path) as (sb, pid, children):
        with _held(pid):
            child = _spawn(sb, children, _INTERRUPTED_GOODBYE, str(note))
            said, *tids = child.stdout.readline().split()
            assert said == "closing", (said, tids)
            before = {int(t) for t in tids}
            assert wait_until(lambda: _ender_waits(child.pid, before), timeout=30,
                              interval=0.05)
            # Before, the caller's thread blocked the stop signals for this wait (SigBlk
            # 0x4003), a mask a raising handler could leave so for good.
            assert not _blocked(child.pid) & _STOPS, _blocked(child.pid)
            os.kill(child.pid, signal.SIGINT)  # Ctrl-C, during that wait
            # Raised at once, the mask untouched (before: held back until the wait ended).
            assert wait_until(note.exists, timeout=30, interval=0.05), child.poll()
            assert note.read_text() == "interrupted []"
            # The goodbye's wait goes on: the process's exit waits for it.
            _still_running(child, 2)
        out, err = child.communicate(timeout=60)
        assert (child.returncode, out) == (0, ""), err
        _assert_goodbye_taken(sb)


def test_a_close_says_whether_its_cast_left(tmp_path):
    """`Client.close` says whether what it left queued was written to the supervisor's
    connection before its linger ran out (kint-server's log says so of its goodbye,
    kint/mcp_server.py): ZeroMQ's context end returns either way and tells neither, so the
    close measures it. A served cast left (its linger a minute, far more than the write
    takes); one whose connection cannot be made for the whole linger (the supervisor held
    and its socket file moved aside, a state that lasts) did not. Before, the close said
    nothing, and the log said the push was the worker's either way. "Left" is this
    process's side only: written to the supervisor's connection, not yet read by it."""
    with _attached(tmp_path) as (sb, pid, _children):
        served = Client(sb.kint_home, autostart=False, own_context=True)
        served.cast("detach", tenant=sb.tenant, db=str(sb.sibyl_db),
                    space=sb.label(sb.sibyl_db), args={"session": "agent-never-attached"})
        assert served.close(linger_ms=60_000) is True
        # A second close has nothing to wait for, its context ended: nothing left by it.
        # (Before, it ended at once and said "left".)
        assert served.close(linger_ms=60_000) is False
        front = socket_dir(sb.kint_home) / FRONT_SOCKET
        aside = front.with_name("held-aside.sock")
        with _held(pid):
            os.rename(front, aside)
            try:
                held = Client(sb.kint_home, autostart=False, own_context=True)
                held.cast("detach", tenant=sb.tenant, db=str(sb.sibyl_db),
                          space=sb.label(sb.sibyl_db), args={"session": SESSION})
                assert held.close(linger_ms=1000) is False
            finally:
                os.rename(aside, front)
