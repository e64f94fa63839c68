"""A restore (`memory_pull` with `discard_local`) that outlasts the tool call's bound,
through the real kint-server and the official MCP client (docs/harnesses.md, "Every kint
tool call comes back within a bound").

The call was once waited for up to 30 minutes, while Codex gives a tool call the 180 s
`kint setup` writes: the client gave up and every later call waited behind the restore.
Now it answers RESTORE_RUNNING within the bound (3 s here, KINT_TEST_TOOL_WAIT_S), the
calls that need the store are refused at once while the worker still restores, and the
server opens the restored store as the restore ends, with no tool call (it once waited for
the next call, whose look at a second-old beat could still say "restoring"). A supervisor
killed mid-restore no longer leaves Sibyl's tools refused until a kint tool is called: the
server sends the restore again and opens the store when that one ends. A worker the dead
supervisor left stopped keeps the store closed while it lives, named in the refusals.

One machine of the session's devchain with one epoch anchored, behind an RPC proxy
(tests/rpc_proxy.py) that holds the restore's epoch log read until the test lets it go.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from sibyl_memory_client.exceptions import NotFoundError

from chain_machines import machine_behind_proxy
from conftest import sibyl_client, wait_until, write_rules
from mcp_session import AgentProcess

from kint.supervisor.pidlock import running_pid

# How long the held epoch log read waits at most before it goes through anyway (a failing
# test ends); under the machine's RPC timeout, so the held read never times out.
HOLD_S = 40
TOOL_WAIT_S = 3
# How long after a supervisor died the server expects its worker gone
# (KINT_TEST_OLD_WORKER_GONE_S; 13 s in kint-server).
OLD_WORKER_GONE_S = 1
# The tool bound where the supervisor is killed inside the call's wait: room to see the
# worker run the restore, stop it and kill its supervisor before the call gives up (under a
# second on a box several runs loaded; the test says so if the call answered first). The
# call waits it out before the test goes on.
INSIDE_CALL_WAIT_S = 8


def _pushed(sb) -> dict:
    """The push op's answer, asked from this process: the first epoch is set-up here, not
    `kint push` under test, whose start would cost its interpreter and imports."""
    return sb.call("push", sb.sibyl_db, timeout_s=120)


def _running(sb, op: str, since: float) -> bool:
    """Whether the space's worker runs `op`, begun since `since` (time.monotonic())."""
    running = sb.row(sb.sibyl_db).get("op") or {}
    return running.get("name") == op and running["age_s"] <= time.monotonic() - since


def _restore_held(agent: AgentProcess, sb, proxy) -> None:
    """A memory_pull with discard_local sent, its epoch log read held at the proxy: answered
    RESTORE_RUNNING at the tool bound, once the worker runs it."""
    proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
    sent = time.monotonic()
    payload = agent.payload(agent.submit("memory_pull", discard_local=True)
                            .result(timeout=HOLD_S / 2))
    assert payload["error"] == "RESTORE_RUNNING", payload
    sb.wait_for(lambda: _running(sb, "pull", sent), what="the restore in the worker")


def _recalled_once_restored(agent: AgentProcess) -> dict:
    """memory_recall of `release_gate`, asked until it is no longer refused RESTORE_RUNNING:
    the row the restore brought back."""
    def recalled() -> dict | None:
        answer = agent.payload(agent.result("memory_recall", category="rules",
                                            name="release_gate"))
        return None if answer.get("error") == "RESTORE_RUNNING" else answer

    answer = wait_until(recalled, timeout=HOLD_S)
    assert answer and answer.get("entity", {}).get("body") == {
        "rule": "never ship on a Friday"}, answer
    return answer


def _server_holds(db: Path) -> bool:
    """Whether a kint-server (the test launcher) has `db` open: it opened its client."""
    from kint.tenant_worker.store_holders import other_holders

    for pid in other_holders(str(db)):
        try:
            if b"run_kint_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_a_restore_past_the_bound_answers_and_the_store_opens_when_it_ends(
        tmp_path, chain_home):
    with machine_behind_proxy(tmp_path, chain_home, KINT_QUIET_SECONDS="3600",
                              KINT_RPC_TIMEOUT="60") as (sb, proxy):
        write_rules(sb.sibyl_db, sb.tenant, release_gate="never ship on a Friday")
        assert _pushed(sb)["head_seq"] == 1
        agent = AgentProcess({**sb.env, "KINT_TEST_TOOL_WAIT_S": str(TOOL_WAIT_S)}).start()
        try:
            assert agent.call("memory_recall", category="rules",
                              name="release_gate")["ok"] is True  # the client is open
            proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
            sent = time.monotonic()
            pull = agent.submit("memory_pull", discard_local=True)
            # Before, the call waited for the whole restore (held here for HOLD_S).
            answered = pull.result(timeout=HOLD_S / 2)
            payload = agent.payload(answered)
            assert answered.isError is True and payload["error"] == "RESTORE_RUNNING", payload
            assert "the restore goes on in the space's worker" in payload["message"], payload
            assert payload["hint"].startswith("call memory_status in a minute"), payload
            assert _running(sb, "pull", sent), sb.row(sb.sibyl_db)

            # While the worker restores, the calls that need the store answer at once, and
            # nothing opens the store under the restore; memory_status says why.
            for tool, args in (("memory_remember", {"category": "rules", "name": "lost",
                                                    "body": {"rule": "written mid-restore"}}),
                               ("memory_recall", {"category": "rules",
                                                  "name": "release_gate"}),
                               ("memory_verify", {"query": "release rule"})):
                refused = agent.failed(tool, **args)
                assert refused["error"] == "RESTORE_RUNNING", refused
                assert "is still restoring the store" in refused["message"], refused
            # A second restore is not sent while the first is followed.
            again = agent.failed("memory_pull", discard_local=True)
            assert again["error"] == "RESTORE_RUNNING", again
            status = agent.call("memory_status")
            assert status["restore_running"].startswith(
                "a memory_pull with discard_local began "), status
            assert _running(sb, "pull", sent), "the restore ended before the checks"

            proxy.forward()
            # The server opens the restored store when the restore ends, before any call.
            sb.wait_for(lambda: _server_holds(sb.sibyl_db), timeout=HOLD_S,
                        what="kint-server opening the restored store, with no tool call")
            recalled = agent.call("memory_recall", category="rules", name="release_gate")
            status = agent.call("memory_status")
            assert status["restore_running"] is None and status["in_step"] is True, status
            assert status["restore_outcome"]["ok"] is True, status
            assert recalled["entity"]["body"] == {"rule": "never ship on a Friday"}, recalled
            # Writes land in the restored file, where another reader finds them.
            assert agent.call("memory_remember", category="rules", name="kept",
                              body={"rule": "written after the restore"})["ok"] is True
            reader = sibyl_client(sb.sibyl_db, sb.tenant)
            try:
                assert reader.get_entity("rules", "kept")["body"] == {
                    "rule": "written after the restore"}
                with pytest.raises(NotFoundError):  # refused mid-restore, written nowhere
                    reader.get_entity("rules", "lost")
            finally:
                reader.storage.close()
        finally:
            proxy.forward()
            agent.close()


def test_a_supervisor_killed_mid_restore_leaves_no_tool_refused(tmp_path, chain_home):
    """Only Sibyl's tools are called after the kill, and nothing else starts a supervisor:
    the server finds its supervisor gone, sends the restore again once the old worker has
    stopped (starting a supervisor, the test's here: KINT_TEST_AUTOSTART_ENTITLED), and
    opens the store when it ends. A row written only here before the discard is gone, as
    the agent asked. Before, every Sibyl call answered RESTORE_RUNNING until a kint tool
    happened to start a supervisor."""
    with machine_behind_proxy(tmp_path, chain_home, KINT_QUIET_SECONDS="3600",
                              KINT_RPC_TIMEOUT="60") as (sb, proxy):
        write_rules(sb.sibyl_db, sb.tenant, release_gate="never ship on a Friday")
        assert _pushed(sb)["head_seq"] == 1
        write_rules(sb.sibyl_db, sb.tenant, local_only="never anchored")
        agent = AgentProcess({**sb.env, "KINT_TEST_TOOL_WAIT_S": str(TOOL_WAIT_S),
                              "KINT_TEST_AUTOSTART_ENTITLED": "1"}).start()
        try:
            _restore_held(agent, sb, proxy)
            killed = running_pid(sb.kint_home)
            os.kill(killed, signal.SIGKILL)
            proxy.forward()
            _recalled_once_restored(agent)
            assert running_pid(sb.kint_home) not in (None, killed)  # the server started it
            gone = agent.payload(agent.result("memory_recall", category="rules",
                                              name="local_only"))
            assert gone.get("ok") is not True, gone  # discarded, as the restore was asked
            outcome = agent.call("memory_status")["restore_outcome"]
            assert outcome["ok"] is True and outcome["resumed"] is True, outcome
        finally:
            proxy.forward()
            agent.close()


@pytest.mark.parametrize("killed", ["after the call", "inside the call"])
def test_a_stopped_worker_a_killed_supervisor_left_keeps_the_store_closed(tmp_path,
                                                                          chain_home, killed):
    """The worker running the restore is stopped (SIGSTOP), then its supervisor killed.
    Past the bound the worker is expected gone by, the server keeps the store closed and
    Sibyl's tools refused, naming the worker and how to end it: it once ended the restore
    BUSY there and opened the store, under a worker that, resumed, runs its restore on and
    moves the store aside. Resumed, the worker exits (its supervisor is gone), and the
    server sends the restore again and opens the store when it ends.

    Killed "inside the call": while the tool call still waits for the restore (the likelier
    case: the call waits 100 s). The worker's pid was once looked up only when the call
    gave up, from the supervisor's status, gone by then: unknown, the worker counted as
    gone, and its head lock, held under the stopped pull, ended the restore BUSY blaming
    "another kint process", the store opened under it. The server now learns the worker
    while the call waits (and finds it by the head lock it holds when it could not)."""
    inside = killed == "inside the call"
    with machine_behind_proxy(tmp_path, chain_home, KINT_QUIET_SECONDS="3600",
                              KINT_RPC_TIMEOUT="60") as (sb, proxy):
        write_rules(sb.sibyl_db, sb.tenant, release_gate="never ship on a Friday")
        assert _pushed(sb)["head_seq"] == 1
        wait_s = INSIDE_CALL_WAIT_S if inside else TOOL_WAIT_S
        agent = AgentProcess({**sb.env, "KINT_TEST_TOOL_WAIT_S": str(wait_s),
                              "KINT_TEST_OLD_WORKER_GONE_S": str(OLD_WORKER_GONE_S),
                              "KINT_TEST_AUTOSTART_ENTITLED": "1"}).start()
        worker = None
        try:
            if inside:
                proxy.set_mode("delay_methods", methods=["eth_getLogs"], seconds=HOLD_S)
                sent = time.monotonic()
                pull = agent.submit("memory_pull", discard_local=True)
                sb.wait_for(lambda: _running(sb, "pull", sent), what="the restore in the worker")
            else:
                _restore_held(agent, sb, proxy)
            worker = sb.row(sb.sibyl_db)["pid"]
            os.kill(worker, signal.SIGSTOP)
            os.kill(running_pid(sb.kint_home), signal.SIGKILL)
            proxy.forward()
            if inside:
                assert not pull.done(), "the call answered before its supervisor was killed"
                payload = agent.payload(pull.result(timeout=HOLD_S))
                assert payload["error"] == "RESTORE_RUNNING", payload

            # Sibyl's tool, not memory_status: a kint tool would start a supervisor.
            def named() -> dict | None:
                answer = agent.payload(agent.result("memory_recall", category="rules",
                                                    name="release_gate"))
                return answer if (answer.get("error") != "RESTORE_RUNNING"
                                  or f"(pid {worker})" in answer["message"]) else None

            refused = wait_until(named, timeout=HOLD_S)
            assert refused and refused.get("error") == "RESTORE_RUNNING", refused  # closed
            assert f"the worker that ran it (pid {worker}) still runs" in refused["message"]
            assert refused["hint"].startswith(  # the human's: the agent has no tool for it
                f"stop and tell the human: `kill -CONT {worker}` if it is stopped"), refused
            assert not _server_holds(sb.sibyl_db)

            os.kill(worker, signal.SIGCONT)
            _recalled_once_restored(agent)
            outcome = agent.call("memory_status")["restore_outcome"]
            assert outcome["ok"] is True and outcome["resumed"] is True, outcome
        finally:
            if worker is not None:
                try:
                    os.kill(worker, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            proxy.forward()
            agent.close()
