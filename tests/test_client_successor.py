"""A long-lived client (kint-server) whose supervisor stepped down while a successor already
holds KINT_HOME (lane follow33).

A supervisor N whose pid file is replaced steps down: it stops, serving the connections it
has until it exits (up to its workers' stop grace). A kint-server that N had answered kept
its socket, and ZeroMQ keeps a connection while the peer keeps it open: the server's next
tool call went to N over it and was refused WORKER_DOWN, "the supervisor is stopping ...
the next call starts a new supervisor", though the successor M had been serving the home
all along. Now a client whose pid file names another supervisor than the one that last
answered on its socket, that one stepping down or gone, connects again before it sends.

Real parts: a real kint-server under the `mcp` SDK's stdio client, the test supervisors
(tests/support/run_supervisor.py, kint's `run_foreground`) and their workers, a real
store. N is kept stopping by an `attach` held on the pool of its worker of another store
(KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py); N is held (SIGSTOP) while M
takes the home, so that N's stop, bounded by its worker's 10 s grace, begins only once M
serves, however long M's start takes on a loaded box.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from conftest import make_sandbox, pid_alive, write_store
from kint.client import KintError
from kint.paths import run_dir
from kint.supervisor.pidlock import PID_FILE, running_pid
from mcp_session import AgentProcess
from support.stop_read import stop_read
from support.successor import take_over_while_held

HOLD = "KINT_TEST_HOLD_ATTACH"


def _held_attach(sb: Any, db: Any, outcome: dict[str, Any]) -> threading.Thread:
    """`attach` for the store `db` sent on a thread, returned once its worker runs it: the
    work that keeps that worker, and so its supervisor, from exiting as it stops."""

    def attach() -> None:
        try:
            outcome["reply"] = sb.call("attach", db, timeout_s=90,
                                       args={"session": "held", "watcher": False})
        except KintError as err:
            outcome["error"] = err

    caller = threading.Thread(target=attach, daemon=True)
    caller.start()
    sb.wait_for(lambda: (sb.row(db).get("ops_running") or 0) >= 1, what="the attach held")
    return caller


def test_an_agents_next_call_reaches_the_supervisor_that_took_over(tmp_path):
    hold = tmp_path / "hold-attach"
    sb = make_sandbox(tmp_path / "machine", KINT_WORKER_HEARTBEAT_TIMEOUT="60",
                      KINT_QUIET_SECONDS="3600")
    other = sb.profile_db("held")
    agent: AgentProcess | None = None
    old: int | None = None
    outcome: dict[str, Any] = {}
    try:
        sb.env[HOLD] = str(hold)
        sb.start_entitled()
        del sb.env[HOLD]  # the old supervisor's workers alone hold an attach
        old = running_pid(sb.kint_home)
        assert old is not None and old > 0
        write_store(sb.sibyl_db, tenant=sb.tenant)
        other.parent.mkdir(parents=True)
        write_store(other, tenant=sb.tenant)
        agent = AgentProcess(sb.env).start()
        assert agent.call("memory_status")["ok"] is True  # answered by N on its socket
        sb.call("status", other, timeout_s=60)
        hold.touch()
        caller = _held_attach(sb, other, outcome)

        # N held while its pid file goes and M takes the home and answers; then N, let go,
        # finds its pid file replaced and steps down, its held attach keeping it stopping.
        take_over_while_held(sb, old, HOLD)
        new = running_pid(sb.kint_home)
        log = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: stop_read(log.read_text(errors="replace")),
                    what="the old supervisor's stop read by its worker")
        # N stops, and serves the connections it has for up to its worker's grace (10 s
        # from that line): the call below goes out well inside it. (The held attach
        # itself is given up on by its own client: sent on a connection N never answered
        # on, nothing proves it reached N once M holds the home, kint/client_liveness.py.)
        assert pid_alive(old)
        status = agent.call("memory_status")
        assert status.get("ok") is True, status
        assert running_pid(sb.kint_home) == new
        said = (sb.kint_home / "kint.log").read_text(errors="replace")
        assert "the supervisor is stopping" not in said, said[-3000:]
        hold.unlink()
        caller.join(60)
        sb.wait_for(lambda: not pid_alive(old), what="the old supervisor's exit")
    finally:
        hold.unlink(missing_ok=True)
        if agent is not None:
            agent.close()
        sb.shutdown()
        if old is not None and pid_alive(old):
            os.kill(old, signal.SIGKILL)


def test_an_answer_before_the_successor_binds_is_not_taken_for_its(tmp_path):
    """The successor M has taken the pid lock and named itself, not yet bound its socket,
    while N has not seen that it lost the home: a connection made then reaches N's file,
    and N answers. That answer was recorded as M's (the run the pid file named), so once M
    marked itself serving the client kept N's connection, and its calls were refused
    "the supervisor is stopping" until N exited. Now only a serving holder's answer is
    recorded: the next call, M serving, connects again. M is this test process holding the
    pid lock (a real supervisor cannot be held between its lock and its bind), N a real
    supervisor held by SIGSTOP while the call is sent."""
    import fcntl

    from kint.client import Client

    sb = make_sandbox(tmp_path)
    old = sb.start()
    client = Client(sb.kint_home, autostart=False)
    fd = -1
    outcome: dict[str, Any] = {}
    try:
        assert client.call("sup.ping", timeout_s=10)["pid"] == old
        os.kill(old, signal.SIGSTOP)
        path = run_dir(sb.kint_home) / PID_FILE
        path.unlink()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # M starting: not bound yet
        caller = threading.Thread(target=lambda: outcome.update(
            reply=client.call("sup.ping", timeout_s=10)), daemon=True)
        caller.start()
        sb.wait_for(lambda: client.sent_to == os.getpid(), what="the ping sent, M named")
        os.kill(old, signal.SIGCONT)
        caller.join(15)
        assert outcome["reply"]["pid"] == old  # N answered it
        kept = client._sock
        os.pwrite(fd, f"{os.getpid()} serving\n".encode(), 0)  # M bound, says so
        client._follow(client._holder.pid())
        assert kept is not None and client._sock is not kept  # N's connection dropped
    finally:
        client.close()
        if fd >= 0:
            os.close(fd)
        if pid_alive(old):
            os.kill(old, signal.SIGCONT)
            os.kill(old, signal.SIGKILL)
