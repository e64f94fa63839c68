"""The worker an agent uses is recycled for its memory while the agent's kint-server stays
attached, and the successor serves that session at once: its watcher, with the timings
the session sent, pushes the session's next write; its notes move the drift baseline the
successor took over (no push is held for them); its exit push lands.

Real parts: the session's devchain (anvil), the test supervisor and its workers, a real
kint-server driven by the `mcp` SDK over stdio. KINT_WORKER_RECYCLE_MIB is 1 (so any
worker is over it) from once the session has attached and its first write is anchored, 0
before, set in config.toml as a user would: the worker `connect` used would be recycled
with no session, and a space is recycled at most once in ten minutes. The space's own
watcher timings would never push (KINT_QUIET_SECONDS 3600): only the session's (none, a
push at the first poll after a write) do, so a push by the successor's watcher shows it was
handed the session's settings, not merely restarted. A keepalive comes every 60 s: the
steps that matter happen well before it (the log says the successor took the session
over, not that it attached again).
"""

from __future__ import annotations

import sys

import pytest

from chain_machines import kjson, new_machine, ok
from kint.agent_server.session import KEEPALIVE_S
from mcp_session import AgentProcess
from test_worker_recycle import QUICK

WAIT = {"timeout": 90, "interval": 0.25}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the memory figure comes from /proc/self/smaps_rollup")


def test_an_agents_worker_is_recycled_and_its_successor_serves_the_session(tmp_path,
                                                                            chain_home):
    # The watchers tick every quarter second (a poll under its least of 1 s, lowered by
    # KINT_TEST_POLL_MINIMUM_S, tests/support/kint_test_timings.py): each push below waits
    # a tick, not a second.
    sb = new_machine(tmp_path / "agent", chain_home, KINT_POLL_SECONDS="0.25",
                     KINT_TEST_POLL_MINIMUM_S="0.25", KINT_QUIET_SECONDS="3600", **QUICK)
    agents: list[AgentProcess] = []
    config = sb.kint_home / "config.toml"

    def recycle_over(mib: int) -> None:
        config.write_text(f"worker_recycle_mib = {mib}\n")
        config.chmod(0o600)
        sb.call("sup.reload")

    try:
        recycle_over(0)
        ok(sb.kint("connect", "--dev"))

        def row() -> dict:
            return sb.row(sb.sibyl_db)

        def head_at(seq: int, what: str, timeout: float = WAIT["timeout"]) -> dict:
            return sb.wait_for(lambda: (r := row())["head"] and r["head"]["seq"] == seq and r,
                               what=what, timeout=timeout, interval=WAIT["interval"])

        one = AgentProcess({**sb.env, "KINT_QUIET_SECONDS": "0"}).start()
        agents.append(one)
        before = kjson(sb, "status")["head"]["seq"]
        assert one.call("memory_remember", category="notes", name="before",
                        body={"text": "written before the recycle"})["ok"]
        first_pid = head_at(before + 1, "the watcher's push of the first write")["pid"]
        recycle_over(1)

        successor = sb.wait_for(lambda: (r := row())["pid"] not in (None, first_pid)
                                and r["sessions"] == 1 and r,
                                what="the successor, with the session attached", **WAIT)
        assert successor["restarts"] == 0, successor
        log = sb.kint_home / "supervisor.log"
        assert "1 session(s) taken over from the worker before this one" in log.read_text()

        assert one.call("memory_remember", category="notes", name="after",
                        body={"text": "written to the successor"})["ok"]
        # Within the keepalive's minute: a successor that did not have the session's
        # timings would run the space's hour-long quiet until the keepalive sent them.
        head_at(before + 2, "the successor's watcher pushing the session's write",
                timeout=KEEPALIVE_S - 10)

        # A second session that asks the watcher to wait an hour (the newest session's
        # timings rule), so the first one's next write is left to its exit push.
        two = AgentProcess({**sb.env, "KINT_QUIET_SECONDS": "3600"}).start()
        agents.append(two)
        assert one.call("memory_remember", category="notes", name="last-words",
                        body={"text": "pushed by the exit push"})["ok"]
        one.close()
        agents.remove(one)
        landed = head_at(before + 3, "the exit push of the handed-over session")
        assert landed["pid"] == successor["pid"], landed
        text = log.read_text()
        assert "exit push: anchored" in text, text[-3000:]
        assert "push HELD" not in text, text[-3000:]
        assert two.call("memory_status")["held"] is None
    finally:
        for agent in agents:
            agent.close()
        sb.shutdown()
