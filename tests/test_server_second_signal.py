"""kint-server stopped by a signal sends its goodbye even when a second signal comes while
it does: a harness that sends SIGTERM again, or SIGHUP as its terminal closes.

The first signal unwinds the server's event loop, and its way out says goodbye to the
space's worker (kint/mcp_server.py, kint/agent_server/session.py). That goodbye can take
a while: its client may first wait for the supervisor to answer (a start's wait), and its
close waits for the cast to leave (kint.client.Client.close, its own context). A second
signal in that wait raised inside it, as the first had: the goodbye was cut short and
never sent, and the exit that ends the threads the unwound loop left behind was skipped.
Once the server unwinds, a stop signal is only noted.

Real parts: the test supervisor and its worker, kint-server through the MCP client. The
goodbye is held in its client's wait for the supervisor: the supervisor held (SIGSTOP)
and its socket file moved aside, as for a supervisor that must be waited for, a wait the
start lock shows (held by it throughout, for seconds); both are put back once the second
signal is sent. The server runs under a shell that keeps its exit code, and its stderr goes
to a file: it exits as the first signal says (128 + SIGTERM), with no traceback. (The
second signal in the close's own wait, once the cast is queued, is test_client_linger's.)

A first SIGINT (a Ctrl-C in a harness's terminal, which shares the server's process group)
stops the server as SIGTERM does: left to Python's own handler, a first one was
asyncio.Runner's, a cancel of its main task that did not end the serve, and the server
served on, its session open. The last test sends one, the server run under a
Python wrapper that writes its exit code as subprocess gives it: 130 for the server's own
exit, -2 for a death by the signal (a shell writes 130 for both).

The server's last line says what became of its goodbye, as far as its close knows it
(kint/mcp_server.py `_say_goodbye`): the last two tests give it each outcome.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import make_sandbox, pid_alive, write_store
from kint.agent_server.session import _goodbye
from kint.mcp_server import _say_goodbye
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.pidlock import running_pid
from mcp_session import AgentProcess
from support.start_lock import start_lock_held


def _server_pid(sb) -> int:
    """The pid of the test's kint-server of `sb` (its launcher run by this Python, with
    sb's KINT_HOME; not the shell or the `-c` wrapper that runs it)."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if (proc.name.isdigit() and argv[0] == sys.executable.encode() and argv[1] != b"-c"
                    and any(b"run_kint_server.py" in arg for arg in argv)
                    and str(sb.kint_home).encode() in (proc / "environ").read_bytes()):
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError("no kint-server found")


@contextlib.contextmanager
def _serving(tmp_path: Path, wrapper: list[str]) -> Iterator[tuple]:
    """A started sandbox with kint-server serving its store, run under `wrapper` (which takes
    the exit-code file, then the server's argv) with its stderr to a file: yields (sandbox,
    server pid, exit-code file, stderr file) once the worker counts the server's session."""
    sb = make_sandbox(tmp_path / "machine")
    agent = errlog = None
    rc, err_log = tmp_path / "rc", tmp_path / "server-stderr.log"
    command = [*wrapper, str(rc), *AgentProcess(sb.env).command]
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        errlog = open(err_log, "w")
        agent = AgentProcess(sb.env, command=command, errlog=errlog).start()
        assert agent.call("memory_status")["ok"] is True
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 1, timeout=60,
                    what="the server's session counted")
        yield sb, _server_pid(sb), rc, err_log
    finally:
        if agent is not None:
            agent.close(timeout=5)
        if errlog is not None:
            errlog.close()
        sb.shutdown()


def _assert_exited(sb, server: int, rc: Path, err_log: Path, code: int, noter: str) -> None:
    """kint-server exited with `code` (as its wrapper, `noter`, wrote it), said so on its
    stderr without a traceback, and its goodbye (a detach: the session wrote nothing)
    reached the worker."""
    sb.wait_for(lambda: not pid_alive(server), timeout=60, what="kint-server's exit")
    sb.wait_for(lambda: rc.exists() and rc.read_text().endswith("\n"), timeout=30,
                what=f"{noter}'s note of the exit code")
    assert rc.read_text() == f"{code}\n"
    said = err_log.read_text()
    assert "Traceback" not in said and "kint-server exits" in said, said
    # What became of the goodbye, as the close measured it: one of its two lines once it
    # was queued. Which one is a matter of time (the detach written within the close's 2 s
    # linger), and a loaded box may run the end late; its delivery is the wait below.
    # (test_client_linger's last test proves the measure with a minute's margin.)
    assert any(f"kint-server exits; its detach (nothing written: no exit push) {fate}" in said
               for fate in ("was written to the supervisor's connection",
                            "may not have left")), said
    sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 0, timeout=60,
                what="the worker told the session ended")


# Runs the server under a shell that writes its exit code once it ends.
_SHELL_RC = ["sh", "-c", '"$@"; echo $? > "$0"']


def test_a_second_signal_during_the_goodbye_leaves_it_sent(tmp_path):
    with _serving(tmp_path, _SHELL_RC) as (sb, server, rc, err_log):
        supervisor = running_pid(sb.kint_home)
        assert supervisor is not None and supervisor > 0
        front = socket_dir(sb.kint_home) / FRONT_SOCKET
        aside = front.with_name("held-aside.sock")
        os.kill(supervisor, signal.SIGSTOP)
        try:
            os.rename(front, aside)
            os.kill(server, signal.SIGTERM)
            sb.wait_for(lambda: start_lock_held(sb) or not pid_alive(server), interval=0.02,
                        what="the goodbye waiting for the supervisor")
            # The premise: the server is in its goodbye's wait, which lasts seconds.
            assert pid_alive(server) and start_lock_held(sb)
            os.kill(server, signal.SIGTERM)  # the harness again
        finally:
            os.rename(aside, front)
            os.kill(supervisor, signal.SIGCONT)
        # The first signal's code, 143.
        _assert_exited(sb, server, rc, err_log, 128 + signal.SIGTERM, "the shell")


# Runs the server (argv after the file) and writes its exit code as subprocess gives it.
_KEEP_RC = ("import subprocess, sys\n"
            "code = subprocess.call(sys.argv[2:])\n"
            "open(sys.argv[1], 'w').write(f'{code}\\n')\n")


def test_a_first_sigint_stops_the_server_as_sigterm_does(tmp_path):
    with _serving(tmp_path, [sys.executable, "-c", _KEEP_RC]) as (sb, server, rc, err_log):
        os.kill(server, signal.SIGINT)  # Ctrl-C, once
        # Before, the server served on, its session open (20 s later still). Its own exit
        # is 130, not the signal's (-2).
        _assert_exited(sb, server, rc, err_log, 128 + signal.SIGINT, "the wrapper")


@pytest.mark.parametrize("goodbye, line", [
    ("left", "INFO kint-server exits; its exit push was written to the supervisor's "
             "connection, on its way to the worker"),
    ("unsent", "WARNING kint-server exits; its exit push was not sent (the warning above "
               "says why); without it"),
    ("unwritten", "WARNING kint-server exits; its exit push may not have left (not written "
                  "to the supervisor's connection within 2 s, and dropped then); without it"),
])
def test_the_last_line_says_what_became_of_the_goodbye(caplog, goodbye, line):
    """kint-server's last line says of its goodbye only what its close knows
    (AgentSession.close's outcome). Before, a goodbye never queued (its cast refused, the
    warning before it says why) was said not written within the 2 s linger, which never ran
    for it; and one written was said to be the worker's, where it was only on its way."""
    with caplog.at_level(logging.INFO, logger="kint"):
        _say_goodbye(goodbye, wrote=True)
    said = [f"{r.levelname} {r.getMessage()}" for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(line), said
    assert ("within 180 s" in said[0]) == (goodbye != "left"), said


def test_a_goodbye_never_queued_is_said_unsent_whatever_its_close_measured():
    """A close with nothing of the goodbye queued measures nothing of it (a close with an
    empty queue ends at once, which the close takes for "left")."""
    assert [_goodbye(q, w) for q, w in ((True, True), (True, False), (False, True),
                                        (False, False))] == [
        "left", "unwritten", "unsent", "unsent"]
