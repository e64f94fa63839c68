"""What an agent sees through kint-server when something under it fails: every tool call
comes back, within a bound, with a result or an error carrying a code, one line and a hint
that names the agent's next call. Each fault is made for real under the official MCP
client's stdio session: a chain endpoint that never confirms or answers a stale head
(tests/rpc_proxy.py), the supervisor SIGKILLed and the worker SIGSTOPped during a call, a
store that is not a SQLite file, a store another process holds a write lock on, a store
deleted under the running server; and a ping, a Sibyl write and a cancellation while a
kint call waits on a hung endpoint.

The elapsed-time bounds only say "it returned, it did not hang": each is generous for a
loaded 2-core box and well under what the same call took before (named at each bound)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from chain_machines import behind_proxy
from conftest import sibyl_client, wait_until, write_store
from machines_together import new_machines
from kint.supervisor.pidlock import running_pid
from mcp_session import AgentProcess

AGAIN_SOON = "the space's worker goes on with it: call memory_status in a minute"


# In the killed-supervisor test, the stopped worker is found hung after this many seconds
# without a beat (its idle beat comes every second under it), and the call answered
# WORKER_DOWN at once: through the setting a user has (KINT_WORKER_HEARTBEAT_TIMEOUT, here
# in that machine's supervisor's environment, which the supervisor the test starts again
# inherits too), not the default 10 s of waiting. The other machines keep the default.
HEARTBEAT_TIMEOUT_S = 3


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """A machine for each test of the module, by name: started together (their supervisors'
    starts overlap), each untouched until its test, which stops it when done. None pushes
    by itself (KINT_QUIET_SECONDS). The first three are connected through a proxy by their
    test (`behind_proxy`)."""
    own = {"killed": {"KINT_WORKER_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S)}}
    names = ("unmined", "inflight", "killed", "garbage", "locked", "deleted", "deleted-new")
    started = new_machines([tmp_path_factory.mktemp(f"mcp-{name}") for name in names],
                           chain_home, envs=[own.get(name, {}) for name in names],
                           KINT_QUIET_SECONDS="3600")
    try:
        yield dict(zip(names, started))
    finally:
        for sb in started:
            sb.shutdown()


def timed(agent, tool, **args):
    started = time.monotonic()
    payload = agent.failed(tool, **args)
    return payload, time.monotonic() - started


def test_a_push_past_the_tool_bound_answers_timeout_and_lands_in_the_worker(
        machines, chain_home):
    """The endpoint takes the transaction and never confirms it: the push waits past the
    tool's bound (2 s here, kint.agent_server.tools.TOOL_WAIT_S), the agent is told so with
    its next call, and the worker's push lands once the endpoint answers again. Only that
    push runs under the short bound: the calls after it (a push that must go through, a
    pull that must be refused NOT_FRESH, not TIMEOUT) are a second server's, with the
    default bound, as a loaded box may take more than 2 s over any of them."""
    with behind_proxy(machines["unmined"], chain_home) as (sb, proxy):
        short = AgentProcess({**sb.env, "KINT_TEST_TOOL_WAIT_S": "2"}).start()
        try:
            assert short.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship on a Friday"})["ok"] is True
            proxy.set_mode("unmined")
            refused, took = timed(short, "memory_push")
            # Before, the call waited out the 60 s receipt wait (RPC_UNAVAILABLE), past
            # the 120 s Hermes gives a tool call once more than one epoch was due.
            assert took < 30, f"memory_push took {took:.1f}s"
            assert refused["error"] == "TIMEOUT", refused
            assert refused["hint"].startswith(AGAIN_SOON), refused
            proxy.forward()
        finally:
            short.close()  # its exit push waits for the worker's push, then finds nothing
        # Over before the next session's push, which would meet it BUSY.
        log = sb.kint_home / "supervisor.log"
        assert wait_until(lambda: "exit push: nothing to push" in log.read_text(
            errors="replace"), timeout=60), log.read_text(errors="replace")[-3000:]
        agent = AgentProcess(sb.env).start()
        try:
            status = wait_until(lambda: (s := agent.call("memory_status"))["in_step"]
                                and s["unanchored"] == {"changed": 0, "deleted": 0} and s,
                                timeout=60, interval=0.2)
            assert status and status["mirror"]["seq"] == 1, agent.call("memory_status")

            # A second epoch, then an endpoint that answers the head as it was before it.
            assert agent.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship on a Friday or a Monday"})["ok"]
            assert agent.call("memory_push")["head_seq"] == 2
            proxy.set_mode("stale_head", block=status["mirror"]["block"])
            answer = agent.call("memory_verify", query="release rule")
            assert answer["ok"] is True and answer["decision"] == "refuse", answer
            assert answer["reason"].startswith("the chain endpoint answered seq 1 at block "), \
                answer  # not "chain moved ..., pull first": the pull refuses it
            assert "a stale or lying RPC" in answer["reason"]
            stale = agent.failed("memory_pull")
            assert stale["error"] == "NOT_FRESH", stale
            # The agent cannot check the endpoint; the human can: the ones in force, which
            # this space's connect gave (not KINT_RPC_URL, not in force here).
            assert stale["hint"].startswith("stop and tell the human: check the endpoints this "
                                            "space was given by `kint connect --rpc-urls`"), stale

            # An endpoint that refuses every head read: try again, then tell the human.
            proxy.set_mode("error_methods", methods=["eth_call"], message="refused by test")
            assert agent.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship"})["ok"]
            refused = agent.failed("memory_push")
            assert refused["error"] == "RPC_UNAVAILABLE", refused
            assert refused["hint"].startswith("call memory_push again in a minute; if it "
                                              "fails again, stop and tell the human"), refused
        finally:
            agent.close()


# A kint call this long leaves time to ask the server other things while it waits (a few
# round trips over stdio, once the worker waits on the receipt: seconds to spare on a
# loaded box); the worker's own receipt wait (60 s) is longer, so the call answers TIMEOUT
# at this bound, which the test waits out once.
IN_FLIGHT_WAIT_S = 5


def _push_in_flight(agent, proxy, **submit):
    """A memory_push sent with the endpoint never confirming, once the worker waits on
    its receipt: the call is then in flight in kint-server for IN_FLIGHT_WAIT_S."""
    seen = len(proxy.calls)
    proxy.set_mode("unmined")
    sent = (agent.submit_cancellable if submit.pop("cancellable", False)
            else agent.submit)("memory_push", **submit)
    assert wait_until(lambda: "eth_getTransactionReceipt" in proxy.calls[seen:],
                      timeout=60, interval=0.2), proxy.calls[seen:]
    return sent


def test_a_long_kint_call_leaves_pings_answered_and_the_next_tool_call_waiting(
        machines, chain_home):
    """A kint call waits on the worker off kint-server's event loop: while a push waits on
    an endpoint that never confirms, a `ping` and `tools/list` are answered, a Sibyl write
    waits for the push (tool calls never overlap: a pull swaps the client it writes to),
    the worker's progress line reaches a client that asked for progress, and the push
    answers as it did when it ran on the loop. A push the client cancels is
    answered `Request cancelled` at once; the next tool call still waits for its work.
    A client gone mid-call does not keep the server from exiting."""
    with behind_proxy(machines["inflight"], chain_home) as (sb, proxy):
        agent = AgentProcess({**sb.env,
                              "KINT_TEST_TOOL_WAIT_S": str(IN_FLIGHT_WAIT_S)}).start()
        try:
            assert agent.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship on a Friday"})["ok"] is True
            progress: list = []
            push = _push_in_flight(agent, proxy, progress=progress)
            agent.ping()  # before, it was answered only once the push came back
            assert "memory_push" in agent.list_tools()
            assert not push.done(), "the push came back before the ping was answered"
            write = agent.submit("memory_remember", category="rules", name="deploy",
                                 body={"rule": "deploy from main"})
            agent.ping()  # the server has read the write by now: it waits for the push
            assert not write.done() and not push.done(), "the write overlapped the push"
            pushed = agent.payload(push.result(IN_FLIGHT_WAIT_S + 60))
            assert pushed["error"] == "TIMEOUT", pushed  # the answer it always gave
            assert pushed["hint"].startswith(AGAIN_SOON), pushed
            assert agent.payload(write.result(60))["ok"] is True
            # The client asked for progress: the worker's line, as `kint push` shows it.
            assert (1.0, "push: epoch 1 of 1 (1 rows)") in progress, progress
            assert [sent for sent, _ in progress] == list(range(1, len(progress) + 1))

            # Let the worker's push land, then cancel one that waits.
            proxy.forward()
            assert wait_until(lambda: ((agent.call("memory_status").get("mirror") or {})
                               .get("seq") == 1), timeout=90, interval=0.2), \
                agent.call("memory_status")
            assert agent.call("memory_remember", category="rules", name="deploy",
                              body={"rule": "deploy from main, on a Tuesday"})["ok"]
            push, cancel = _push_in_flight(agent, proxy, cancellable=True)
            cancel()
            with pytest.raises(Exception, match="Request cancelled"):
                push.result(IN_FLIGHT_WAIT_S / 2)  # at once, not at the call's bound
            write = agent.submit("memory_remember", category="rules", name="freeze",
                                 body={"rule": "no deploys in December"})
            agent.ping()
            assert not write.done(), "a write overlapped the cancelled push's work"
            # The cancelled push's work lands once the endpoint confirms it; the write goes
            # on after it (not at the end of the call's bound, which it would wait out else).
            proxy.forward()
            assert agent.payload(write.result(IN_FLIGHT_WAIT_S + 60))["ok"] is True
            assert "memory_push: no longer waited for (cancelled, or the client went " \
                   "away); its work goes on" in _server_log(sb)

            # The client goes away while a push waits: the server says goodbye to the
            # worker on a socket of its own (the push holds the session's) and exits.
            assert wait_until(lambda: ((agent.call("memory_status").get("mirror") or {})
                               .get("seq") == 2), timeout=90, interval=0.2), \
                agent.call("memory_status")
            _push_in_flight(agent, proxy)
        finally:
            agent.close()
        assert wait_until(lambda: "kint-server exits" in _server_log(sb), timeout=30), \
            _server_log(sb)[-2000:]
        logged = _server_log(sb)
        assert "a tool call is still waiting on the worker; it goes on there" in logged
        assert "exit_push not sent" not in logged, logged[-2000:]


def _server_log(sb) -> str:
    return "\n".join(path.read_text(errors="replace")
                     for path in sb.kint_home.rglob("kint.log"))


def test_a_killed_supervisor_and_a_stopped_worker_name_the_call_to_make_again(
        machines, chain_home):
    with behind_proxy(machines["killed"], chain_home) as (sb, proxy):
        agent = AgentProcess(sb.env).start()
        try:
            assert agent.call("memory_remember", category="rules", name="release-gate",
                              body={"rule": "never ship on a Friday"})["ok"] is True
            # The supervisor SIGKILLed while a push waits on a hung broadcast: once the
            # endpoint has the broadcast (the push is then waiting on it), not after a guess.
            proxy.set_mode("hang_methods", methods=["eth_sendRawTransaction"])
            supervisor = running_pid(sb.kint_home)
            seen = len(proxy.calls)

            def kill_once_broadcast() -> None:
                if wait_until(lambda: "eth_sendRawTransaction" in proxy.calls[seen:],
                              timeout=60, interval=0.1):
                    os.kill(supervisor, signal.SIGKILL)

            threading.Thread(target=kill_once_broadcast, daemon=True).start()
            refused, took = timed(agent, "memory_push")
            # Noticed within a second or so of the kill (kint.client_liveness's look).
            assert took < 20, f"memory_push took {took:.1f}s"
            assert refused["error"] == "SUPERVISOR_UNAVAILABLE", refused
            assert "whether push ran is unknown" in refused["message"]
            assert refused["hint"].startswith("call memory_push again: kint-server starts a "
                                              "new supervisor"), refused
            proxy.release()
            proxy.forward()
            wait_until(lambda: running_pid(sb.kint_home) is None, timeout=20)
            sb.start_entitled()  # the test's supervisor, in place of the one a call starts
            assert agent.call("memory_status")["ok"] is True

            # The space's worker SIGSTOPped during a call: judged hung, ended, restarted.
            worker = agent.call("memory_status")["worker"]["pid"]
            os.kill(worker, signal.SIGSTOP)
            try:
                refused, took = timed(agent, "memory_status")
            finally:
                try:
                    os.kill(worker, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            # The heartbeat timeout (~3 s), inside status's 30 s.
            assert took < 40, f"memory_status took {took:.1f}s"
            log = (sb.kint_home / "supervisor.log").read_text()
            assert f"worker {worker} is hung (no heartbeat for " in log, log[-2000:]
            assert refused["error"] == "WORKER_DOWN", refused
            assert refused["hint"] == ("the space's worker is being restarted: call "
                                       "memory_status again in a few seconds"), refused
            assert agent.call("memory_status")["worker"]["pid"] != worker
        finally:
            agent.close()


def test_a_store_that_is_not_sqlite_is_served_and_named(machines):
    """kint-server used to die at start on it (Sibyl's client raised from its constructor),
    so the agent had no tool at all to learn why."""
    sb = machines["garbage"]
    sb.sibyl_db.parent.mkdir(parents=True, exist_ok=True)
    sb.sibyl_db.write_bytes(b"not a database " * 400)
    try:
        agent = AgentProcess(sb.env).start(timeout=60)
        try:
            # The supervisor binds no space to a file that is not SQLite: every kint tool
            # says so at once.
            for tool, args in (("memory_status", {}), ("memory_verify", {"query": "rule"})):
                refused, took = timed(agent, tool, **args)
                assert took < 30, f"{tool} took {took:.1f}s"
                assert refused["error"] == "BAD_REQUEST", refused
                assert refused["message"].endswith("memory.db is not a SQLite database")
                assert refused["hint"].startswith("stop and tell the human: SIBYL_MEMORY_DB "
                                                  "in kint-server's MCP configuration"), refused
            assert agent.result("memory_recall", category="rules",
                                name="release-gate").isError is True  # Sibyl's own error
            # The store put right: the next call opens it.
            sb.sibyl_db.unlink()
            write_store(sb.sibyl_db, tenant=sb.tenant)
            recalled = agent.call("memory_recall", category="rules", name="release-gate")
            assert recalled["ok"] is True, recalled
            assert agent.call("memory_verify", query="release rule")["ok"] is True
        finally:
            agent.close()
    finally:
        sb.shutdown()


def test_a_store_locked_by_another_writer_is_busy_at_once(machines):
    """Sibyl's client, opening a store, waits up to 180 s for another process's write lock:
    kint-server's start and a first memory_verify used to wait with it (the verify until
    its TIMEOUT)."""
    sb = machines["locked"]
    write_store(sb.sibyl_db, tenant=sb.tenant)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "conn.execute('begin exclusive')\nprint('locked', flush=True)\ntime.sleep(600)\n",
         str(sb.sibyl_db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        # The server's lock check waits half a second, not 2 s, at each of its checks.
        agent = AgentProcess({**sb.env, "KINT_TEST_LOCK_PROBE_S": "0.5"}).start(timeout=90)
        try:
            took = time.monotonic() - started
            assert took < 60, f"kint-server listed its tools after {took:.1f}s"
            refused, took = timed(agent, "memory_verify", query="release rule")
            assert took < 30, f"memory_verify took {took:.1f}s"
            assert refused["error"] == "BUSY", refused
            assert "is locked by another process's write" in refused["message"]
            # One retry of the agent's own, then the human, who alone can close the holder.
            assert refused["hint"] == ("another process is writing the store: call "
                                       "memory_verify again in a minute; if it is still "
                                       "locked then, stop and tell the human: a process "
                                       "holds the store open in a write (an agent's MCP "
                                       "server, Hermes, a `sqlite3` shell, a script), and "
                                       "closing it is theirs; after that, call memory_verify "
                                       "again"), refused
            holder.kill()
            holder.wait()
            answer = agent.call("memory_verify", query="release rule")
            assert answer["ok"] is True, answer
        finally:
            agent.close()
    finally:
        holder.kill()
        holder.wait()
        sb.shutdown()


def _machine_with_a_rule(sb, *, pushed: bool):
    """The devchain machine `sb` connected, its store holding one rule, anchored when
    `pushed`; its watcher never pushes by itself (KINT_QUIET_SECONDS)."""
    try:
        # The ops `kint connect --dev` and `kint push` send, from this process: set-up.
        sb.call("connect", sb.sibyl_db, args={"dev": True}, timeout_s=300)
        sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "release-gate",
                                                        {"rule": "never ship on a Friday"})
        if pushed:
            sb.call("push", sb.sibyl_db, timeout_s=120)
    except BaseException:
        sb.shutdown()
        raise
    return sb


def _delete_store(sb):
    """Delete the store's files under whoever has them open; returns their paths."""
    files = [sb.sibyl_db.with_name(sb.sibyl_db.name + s) for s in ("", "-wal", "-shm")]
    for path in files:
        path.unlink(missing_ok=True)
    return files


def test_a_store_deleted_under_the_server_is_named_and_a_plain_pull_restores_it(
        machines):
    """The store's files deleted while kint-server has its client open. Sibyl's tools kept
    writing into the unlinked file (every row lost when the server exits), and memory_pull
    said "already at the chain head". Now the next call closes that client and refuses,
    naming the deleted store and memory_pull; the pull restores it into a new file."""
    sb = _machine_with_a_rule(machines["deleted"], pushed=True)
    try:
        agent = AgentProcess(sb.env).start()
        try:
            assert agent.call("memory_recall", category="rules",
                              name="release-gate")["ok"] is True  # the client is open
            files = _delete_store(sb)

            gone = f"the store {sb.sibyl_db} was deleted while kint-server had it open"
            for tool, args in (("memory_remember", {"category": "rules", "name": "lost",
                                                    "body": {"rule": "written nowhere"}}),
                               ("memory_recall", {"category": "rules", "name": "release-gate"}),
                               ("memory_verify", {"query": "release rule"})):
                refused = agent.failed(tool, **args)
                assert refused["error"] == "STORE_GONE", refused
                assert refused["message"] == f"{gone}; 1 row(s) anchored from it are on chain"
                assert refused["hint"].startswith("call memory_pull: it restores"), refused
            assert not any(path.exists() for path in files)  # no new, empty store either
            status = agent.call("memory_status")
            assert status["store_gone"]["message"].startswith(gone), status

            pulled = agent.call("memory_pull")
            assert pulled["ok"] is True and pulled["applied"] == [1], pulled
            recalled = agent.call("memory_recall", category="rules", name="release-gate")
            assert recalled["entity"]["body"] == {"rule": "never ship on a Friday"}, recalled
            assert "store_gone" not in agent.call("memory_status")
            # Writes land in the restored file, where another reader finds them.
            assert agent.call("memory_remember", category="rules", name="kept",
                              body={"rule": "written to disk"})["ok"] is True
            reader = sibyl_client(sb.sibyl_db, sb.tenant)
            assert reader.get_entity("rules", "kept")["body"] == {"rule": "written to disk"}
            reader.storage.close()
        finally:
            agent.close()
    finally:
        sb.shutdown()


def test_a_store_deleted_under_the_server_with_nothing_anchored_is_made_anew(
        machines):
    """The store's files deleted while kint-server has its client open, and nothing of it
    was ever anchored (connected, never pushed): there is nothing on chain to restore, so
    no STORE_GONE (docs/harnesses.md). The next call closes the client on the deleted file
    and a new store is made at the path, as at a first start: the tools go on, and what
    they write is in the new file on disk, not in the unlinked one."""
    from sibyl_memory_client.exceptions import NotFoundError

    sb = _machine_with_a_rule(machines["deleted-new"], pushed=False)
    try:
        agent = AgentProcess(sb.env).start()
        try:
            assert agent.call("memory_recall", category="rules",
                              name="release-gate")["ok"] is True  # the client is open
            status = agent.call("memory_status")
            assert status["connected"] is True and status["mirror"]["rows"] in (0, None), \
                status  # nothing anchored
            _delete_store(sb)

            written = agent.call("memory_remember", category="rules", name="fresh",
                                 body={"rule": "written after the delete"})
            assert written["ok"] is True, written
            assert "store_gone" not in agent.call("memory_status")
            verified = agent.call("memory_verify", query="release rule")
            assert verified["ok"] is True, verified
            # The write is in a new file at the store's path; the deleted row went with the
            # deleted file.
            reader = sibyl_client(sb.sibyl_db, sb.tenant)
            try:
                assert reader.get_entity("rules", "fresh")["body"] == {
                    "rule": "written after the delete"}
                with pytest.raises(NotFoundError):
                    reader.get_entity("rules", "release-gate")
            finally:
                reader.storage.close()
            logged = "\n".join(path.read_text(errors="replace")
                               for path in sb.kint_home.rglob("kint.log"))
            assert (f"the store {sb.sibyl_db} was deleted under kint-server; nothing of it was "
                    "anchored: a new store is made, as at a first start") in logged
        finally:
            agent.close()
    finally:
        sb.shutdown()
