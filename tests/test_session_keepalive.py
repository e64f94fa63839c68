"""A kint-server session's keepalive (kint.agent_server.session): it attaches again every
KEEPALIVE_S on a socket of its own, so a long tool call holding the session's socket does
not hold it back, and it sends nothing once `close()` has begun, so the worker never counts
a gone server as attached; the worker, for its part, does not take back a session that
said goodbye when an attach of it sent earlier runs after the goodbye (its op pool may run
them in either order). And it runs whether or not the start's attach went through: a
server whose first attach failed attaches once the worker is back, on a short backoff.

Real parts: a real kint-server process under the `mcp` SDK's stdio client, on a machine
connected to the devchain through the loopback RPC proxy (a push that waits on a receipt
that never comes is the long call), the test supervisor and the space's worker. The order
at close is checked on the session class in this process against the same supervisor and
worker: in kint-server the window is a keepalive waking as the server exits, which no
test can hit on purpose, so a test holds the session's socket as a long tool call does
(the case in which the old keepalive waited, then attached after the goodbye) and records
what the session sends."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from chain_machines import behind_proxy, join_devchain, kjson, make_session_key
from conftest import let_go_on, make_sandbox, wait_until, write_store
from kint.agent_server import session as session_module
from kint.agent_server.session import AgentSession
from kint.spaces import SpaceRef
from machines_together import running_together
from mcp_session import AgentProcess

# The longest the push below is waited for in kint-server (KINT_TEST_TOOL_WAIT_S): the
# keepalives at every half second are seen well within it.
LONG_CALL_S = 12


def _server_log(sb) -> str:
    return "\n".join(path.read_text(errors="replace")
                     for path in sb.kint_home.rglob("kint.log"))


def _sessions(sb) -> int:
    """How many sessions the space's worker counts (a detach of an id never attached
    changes nothing and answers the count)."""
    return sb.call("detach", sb.sibyl_db, timeout_s=30, args={"session": "probe"})["sessions"]


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """The module's three machines, their test supervisors started side by side (each
    start is mostly its interpreter's and forkserver's imports: machines_together.py), each
    untouched until its test: "keepalive" on the session's devchain (connected through a
    proxy by its test), "sessions" without a chain (the `machine` fixture's), and
    "late-attach", on the devchain, whose config.toml is written before its supervisor
    starts (see its test)."""
    keepalive = make_sandbox(tmp_path_factory.mktemp("keepalive"), KINT_QUIET_SECONDS="3600")
    sessions = make_sandbox(tmp_path_factory.mktemp("sessions") / "machine")
    # No quiet period before the watcher's push (the session sends the sandbox's): the
    # write the late-attach test makes is the one the push waits on, nothing comes after
    # it to wait for. The watcher ticks every quarter second (a poll
    # KINT_TEST_POLL_MINIMUM_S lets under 1 s, tests/support/kint_test_timings.py), so the
    # push waits a tick, not a second.
    late = make_sandbox(tmp_path_factory.mktemp("late-attach"), KINT_POLL_SECONDS="0.25",
                        KINT_TEST_POLL_MINIMUM_S="0.25", KINT_QUIET_SECONDS="0")
    for sb in (keepalive, late):
        join_devchain(chain_home, sb)
        make_session_key(sb)
    # The short timeout in late-attach's config.toml before its supervisor starts (it reads
    # the file at its start), so the worker connect spawns beats every second; its test
    # sets the long one once that worker runs.
    _heartbeat_timeout(late, SPAWNED_UNDER_S)
    made = {"keepalive": keepalive, "sessions": sessions, "late-attach": late}
    with running_together(made):
        yield made


def test_the_keepalive_attaches_while_a_long_call_holds_the_session(machines, chain_home):
    with behind_proxy(machines["keepalive"], chain_home) as (sb, proxy):
        attaches = sb.root / "attaches"
        agent = AgentProcess({**sb.env, "KINT_TEST_TOOL_WAIT_S": str(LONG_CALL_S),
                              "KINT_TEST_KEEPALIVE_S": "0.5", "SESSION_NAME": "long",
                              "KINT_TEST_ATTACH_LOG": str(attaches)}).start()
        try:
            assert agent.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship on a Friday"})["ok"] is True
            seen = len(proxy.calls)
            proxy.set_mode("unmined")
            push = agent.submit("memory_push")
            assert wait_until(lambda: "eth_getTransactionReceipt" in proxy.calls[seen:],
                              timeout=60, interval=0.2), proxy.calls[seen:]
            before = len(attaches.read_text().split())
            # Before, the keepalive waited for the session's socket until the push let go.
            assert wait_until(lambda: len(attaches.read_text().split()) >= before + 2,
                              timeout=LONG_CALL_S / 2, interval=0.1), \
                "no keepalive attach while the push held the session's socket"
            assert not push.done(), "the push came back before the keepalives were seen"
            proxy.forward()
        finally:
            agent.close()  # mid-call: the goodbye goes on a socket of its own
        assert wait_until(lambda: "kint-server exits" in _server_log(sb), timeout=30), \
            _server_log(sb)[-2000:]
        assert wait_until(lambda: _sessions(sb) == 0, timeout=30, interval=0.2), \
            "the worker still counts the gone server's session"


@pytest.fixture(scope="module")
def machine(machines):
    """The test supervisor over the default store, no chain: the sessions of the two tests
    below run in this process against it (each ends its own, so the worker counts none
    between them)."""
    sb = machines["sessions"]
    write_store(sb.sibyl_db, tenant=sb.tenant)
    return sb


def test_a_closing_session_attaches_no_more_and_the_worker_keeps_it_gone(machine,
                                                                         monkeypatch):
    sb = machine
    monkeypatch.setattr(session_module, "KEEPALIVE_S", 0.05)
    sent: list[tuple[str, float]] = []
    real = AgentSession._call_on

    def recorded(self, client, op, args, timeout_s):  # noqa: ANN001, ANN202
        sent.append((op, time.monotonic()))
        return real(self, client, op, args, timeout_s)

    monkeypatch.setattr(AgentSession, "_call_on", recorded)
    session = AgentSession(SpaceRef(label=sb.tenant, tenant=sb.tenant,
                                    db=str(sb.sibyl_db)), sb.kint_home)
    session.watcher = False
    session.attach()

    def attaches() -> int:
        return sum(op == "attach" for op, _ in sent)

    with session._lock:  # a tool call waiting on the worker holds the session's socket
        assert wait_until(lambda: attaches() >= 3, timeout=30), sent
        closing = time.monotonic()
        session.close()  # says goodbye on a socket of its own, the call still held
    session._keepalive.join(30)
    assert not session._keepalive.is_alive()
    # Before, the keepalive blocked behind the held socket sent its attach now.
    assert [at for op, at in sent if op == "attach" and at >= closing] == [], sent
    assert wait_until(lambda: _sessions(sb) == 0, timeout=30, interval=0.2)

    # An attach the worker runs after its session's goodbye (sent before it, or by a
    # keepalive that was already waiting on a slow worker) does not take it back.
    late = sb.call("attach", sb.sibyl_db, args={"session": session.id, "watcher": False})
    assert late["ended"] is True and late["sessions"] == 0, late
    assert _sessions(sb) == 0


# The worker's heartbeat timeout (KINT_WORKER_HEARTBEAT_TIMEOUT, a user's setting, in
# config.toml; the supervisor reads it again within a second of a change, and at once on
# `sup.reload`, which `kint supervisor reload` sends). Short when the supervisor starts, so
# that the worker it spawns beats every second while idle (a quarter of the timeout, held to
# 1 to 3 s, fixed at the spawn); then long while kint-server starts, which must send its
# attach while the supervisor still counts the stopped worker as serving, even on a loaded
# box; then, once that attach has failed, short, so that the supervisor judges the worker
# hung at once rather than waiting out the long one. A worker spawned before a reload
# shortened the timeout is given two of its beats: spawned under the long one, it would beat
# every 3 s and be judged after 6 s of silence; beating every second, after the short one.
SPAWNED_UNDER_S = 4
HUNG_AFTER_S = 60
HUNG_AFTER_SHORT_S = 3
# The first wait of the keepalive's retries here (2 s for a user, doubling), through the
# test launcher's KINT_TEST_ATTACH_RETRY_S (tests/support/run_kint_server.py): the retry
# sent while the worker is stopped waits for the supervisor's judgement (WORKER_DOWN), and
# the next one, a second later rather than four, attaches to the replacement.
ATTACH_RETRY_S = 0.5
# How long after the stopped worker is replaced the session may take to attach: a few of
# those retries, under the 60 s of its keepalive proper.
REATTACH_WITHIN_S = 40
assert REATTACH_WITHIN_S < session_module.KEEPALIVE_S


def _heartbeat_timeout(sb, seconds: float) -> None:
    config = sb.kint_home / "config.toml"
    config.write_text(f"worker_heartbeat_timeout = {seconds}\n")
    config.chmod(0o600)


def _hung_after(sb, seconds: float) -> None:
    """The heartbeat timeout set in config.toml, and seen by the supervisor (its log line
    for the change): read at once through `sup.reload`, not at its next look at the file."""
    log = sb.kint_home / "supervisor.log"
    changed = re.compile(rf"settings changed: .*heartbeat_timeout_s \S+ -> {float(seconds)}\b")
    before = len(changed.findall(log.read_text()))
    _heartbeat_timeout(sb, seconds)
    sb.call("sup.reload")
    assert wait_until(lambda: len(changed.findall(log.read_text())) > before, timeout=30), \
        log.read_text()[-2000:]


def test_a_server_whose_first_attach_failed_attaches_once_the_worker_is_back(machines):
    """The space's worker is stopped for real (SIGSTOP) before kint-server starts, with a
    0.5 s start-up budget (no budget is long enough for a stopped worker): its attach
    answers TIMEOUT, and its start-up pull waits its least, 0.5 s. The supervisor judges
    the worker hung and ends it (its SIGTERM comes with a SIGCONT, and a worker told to
    stop starts nothing it reads after), so the attach waiting in its pipe never runs. The
    test does not SIGCONT it sooner itself: a worker continued before its judgement would
    run that attach, and the session would count without any retry. Before, the keepalive
    started only after a first attach that went through: this session never counted and no
    watcher pushed its agent's writes for the server's whole life."""
    # The machine's supervisor started with the short timeout in config.toml (`machines`);
    # the long one once the worker connect spawns runs.
    sb = machines["late-attach"]
    agent = None
    worker = None
    try:
        # `kint connect --dev`'s op, from this process: set-up, not the command.
        sb.call("connect", sb.sibyl_db, args={"dev": True}, timeout_s=300)
        worker = sb.call("status", sb.sibyl_db, timeout_s=30)["worker"]["pid"]
        _hung_after(sb, HUNG_AFTER_S)
        os.kill(worker, signal.SIGSTOP)
        agent = AgentProcess({**sb.env, "KINT_BOOTSTRAP_SECONDS": "0.5",
                              "KINT_TEST_ATTACH_RETRY_S": str(ATTACH_RETRY_S)}).start()
        assert wait_until(lambda: "could not attach to the space's worker" in _server_log(sb),
                          timeout=30), _server_log(sb)[-2000:]
        _hung_after(sb, HUNG_AFTER_SHORT_S)
        # It was the long one set once the worker ran.
        assert (f"heartbeat_timeout_s {float(HUNG_AFTER_S)} -> {float(HUNG_AFTER_SHORT_S)}"
                in (sb.kint_home / "supervisor.log").read_text())
        hung = f"worker {worker} is hung ("
        assert wait_until(lambda: hung in (sb.kint_home / "supervisor.log").read_text(),
                          timeout=HUNG_AFTER_SHORT_S + 30), "the stopped worker not judged hung"
        _hung_after(sb, HUNG_AFTER_S)  # the long timeout again for the rest of the test
        # The probe's own request starts the worker's replacement, if no retry has yet.
        assert wait_until(lambda: _sessions(sb) == 1, timeout=REATTACH_WITHIN_S,
                          interval=0.5), _server_log(sb)[-2000:]

        # Its watcher pushes the agent's write, as for a session attached at start. (The
        # head before it, from the status op: `kint status` is checked below.)
        before = sb.call("status", sb.sibyl_db, timeout_s=30,
                         args={"chain": True})["head"]["seq"]
        assert agent.call("memory_remember", category="notes", name="after-the-wait",
                          body={"text": "written once the worker was back"})["ok"] is True
        # Waited for on the supervisor's row (no command started per look), then `kint
        # status` says the same.
        assert wait_until(lambda: (r := sb.row(sb.sibyl_db))["head"]
                          and r["head"]["seq"] > before and r["unanchored"] == 0,
                          timeout=60, interval=0.2), sb.row(sb.sibyl_db)
        pushed = kjson(sb, "status")
        assert pushed["head"]["seq"] > before and pushed["unanchored"] == 0, pushed
        # One line for the failure and one for the attach that ended it, none per retry.
        log = _server_log(sb)
        assert log.count("could not attach to the space's worker") == 1, log
        assert log.count("attached to the space's worker after") == 1, log
        assert "keepalive:" not in log, log
    finally:
        if agent is not None:
            agent.close()
        let_go_on(worker)
        sb.shutdown()


def test_memory_status_says_whether_this_servers_session_is_attached(machine):
    """memory_status's `attached` (kint's own field): false while the session has not
    attached (a start whose attach failed is still retrying), true once the worker took
    it. The status tool runs in this process on a real session, supervisor and worker."""
    from kint.agent_server.tools import kint_tools
    from kint.agent_server.tool_args import StatusArgs
    from kint.agent_server.wrapped_client import SharedClient

    sb = machine
    session = None
    try:
        session = AgentSession(SpaceRef(label=sb.tenant, tenant=sb.tenant,
                                        db=str(sb.sibyl_db)), sb.kint_home)
        session.watcher = False
        shared = SharedClient(str(sb.sibyl_db), sb.tenant, sb.kint_home, session)
        (status,) = [t.run for t in kint_tools(session, shared) if t.name == "memory_status"]
        assert status(StatusArgs())["attached"] is False  # not attached yet
        session.attach()
        assert _sessions(sb) == 1
        assert status(StatusArgs())["attached"] is True
    finally:
        if session is not None:
            session.close()


def test_memory_status_reads_the_worker_and_the_supervisors_row_in_one_bound(machine,
                                                                            monkeypatch):
    """memory_status's worker status and its read of the supervisor's row (`parked`) end
    by one deadline, the tool's 30 s (docs/harnesses.md: one deadline for the whole call),
    where the row's read took its own 2 s after a status that could use all 30. Real
    session, supervisor and worker; what is recorded is the deadline in force around each
    request (kint.client_bound.call_deadline asked with a timeout longer than any: the
    enclosing bound's), since a status made to use up its bound would make the test wait
    it out."""
    from kint import client as client_module
    from kint.agent_server.tool_args import StatusArgs
    from kint.agent_server.tools import STATUS_WAIT_S, kint_tools
    from kint.agent_server.wrapped_client import SharedClient
    from kint.client_bound import call_deadline

    sb = machine
    taken: list[tuple[str, tuple[float, float]]] = []
    real = client_module.Client.call

    def recorded(self, op, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        taken.append((op, call_deadline(1e6)))
        return real(self, op, *args, **kwargs)

    session = AgentSession(SpaceRef(label=sb.tenant, tenant=sb.tenant, db=str(sb.sibyl_db)),
                           sb.kint_home)
    try:
        session.watcher = False
        shared = SharedClient(str(sb.sibyl_db), sb.tenant, sb.kint_home, session)
        (status,) = [t.run for t in kint_tools(session, shared) if t.name == "memory_status"]
        monkeypatch.setattr(client_module.Client, "call", recorded)
        assert status(StatusArgs())["parked"] == []
    finally:
        monkeypatch.undo()
        session.close()
    by_op = dict(taken)
    assert set(by_op) == {"status", "sup.status"}, taken
    assert by_op["status"] == by_op["sup.status"], taken
    assert by_op["status"][1] == STATUS_WAIT_S, taken
