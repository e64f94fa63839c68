"""The watcher timings a KINT_NO_WATCHER=1 kint-server sends are kept by the space's worker
for a watcher it did not ask for (space.SpaceContext.session_settings), and were shown by
`kint config show` as the timings in force (SpaceContext.effective_setting) while no
watcher ran on them. The row is now the space's own, saying the session's value is kept
(push_settings.kept_value), and so is a push setting's; once another session asks for a
watcher, the kept value is the one it runs with, and the row says that. Nor does that
kint-server's every call get a line saying its timings are not used
(SpaceContext.compared_setting): they are kept, as its harness's configuration asked, and
an older such session's are not either while a newer one's are the kept ones. Another
caller's value is told that no watcher runs, as config show says, where it was told the
space "runs with" the kept value. `kint status` and memory_status show no push settings
while no watcher runs, and the kept ones once one does.

Real parts: the test supervisor and its worker, two real kint-servers over stdio
(tests/mcp_session.py), the real CLI. No chain: nothing here pushes.
"""

from __future__ import annotations

import json

from conftest import make_sandbox
from mcp_session import AgentProcess

WAIT = {"timeout": 60, "interval": 0.2}


def _rows(sb, *args: str) -> dict[str, dict]:
    out = sb.kint("config", "show", "--json", *args)
    assert out.returncode == 0, out.stderr
    return {e["name"]: e for e in json.loads(out.stdout)["settings"]}


def _status(sb) -> dict:
    out = sb.kint("status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _timing_notices(said: dict) -> list[str]:
    return [n for n in said.get("notices") or [] if "KINT_QUIET_SECONDS" in n]


def test_a_no_watcher_sessions_timings_are_kept_not_shown_as_in_force(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    sb.start_entitled()
    agents: list[AgentProcess] = []
    try:
        quiet = AgentProcess({**sb.env, "KINT_NO_WATCHER": "1", "KINT_QUIET_SECONDS": "7",
                              "KINT_RPC_TIMEOUT": "60"}).start()
        agents.append(quiet)
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 1,
                    what="the session attached", **WAIT)

        rows = _rows(sb)
        assert (rows["KINT_QUIET_SECONDS"]["value"],
                rows["KINT_QUIET_SECONDS"]["source"]) == (300.0, "default")
        assert rows["KINT_QUIET_SECONDS"]["kept_for_watcher"] == {
            "value": 7.0, "source": "kint-server session"}
        assert rows["KINT_POLL_SECONDS"]["kept_for_watcher"] is None  # the session gave none
        assert rows["KINT_RPC_TIMEOUT"]["watcher"] is None
        # A push setting it gave is kept for a watcher too, and said so as its timings are.
        assert rows["KINT_RPC_TIMEOUT"]["kept_for_watcher"] == {
            "value": 60.0, "source": "kint-server session"}
        same = json.loads(sb.kint("config", "show", "--json",
                                  env={"KINT_RPC_TIMEOUT": "60"}).stdout)["settings"]
        assert next(e for e in same if e["name"] == "KINT_RPC_TIMEOUT")[
            "kept_for_watcher"] is None  # the row, this call's, is the kept value
        text = sb.kint("config", "show").stdout.splitlines()
        line = next(x for x in text if x.startswith("KINT_QUIET_SECONDS "))
        assert line.split()[1] == "300", line
        assert line.endswith("default; no watcher runs (a kint-server session's 7 is kept "
                             "for one)"), line
        line = next(x for x in text if x.startswith("KINT_RPC_TIMEOUT "))
        assert line.endswith("default; no watcher runs (a kint-server session's 60 is kept "
                             "for one)"), line

        # Its own calls are told nothing of timings it sent to be kept.
        said = quiet.call("memory_status")
        assert not _timing_notices(said), said
        assert said["watcher_settings"] is None
        assert _status(sb)["watcher_settings"] is None
        # A terminal's value, the space's own 300, is told what config show says: no
        # watcher runs and the session's 7 is kept for one; not that the space runs with 7.
        out = sb.kint("status", env={"KINT_QUIET_SECONDS": "300"})
        assert out.returncode == 0, out.stderr
        notice = next(x for x in out.stderr.splitlines() if "KINT_QUIET_SECONDS" in x)
        assert "runs with" not in notice, notice
        assert notice.startswith("kint: KINT_QUIET_SECONDS=300 in this environment is not "
                                 "used: no watcher runs in space ") and (
            "(a kint-server session's 7 is kept for one); to change it, kint-server sends it "
            "when it attaches") in notice, notice

        # A second such session: its 9 is the one kept now, and the first, whose 7 counts
        # again once the second goes, is not told on every call that its 7 is unused.
        later = AgentProcess({**sb.env, "KINT_NO_WATCHER": "1",
                              "KINT_QUIET_SECONDS": "9"}).start()
        agents.append(later)
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 2,
                    what="the second session attached", **WAIT)
        assert _rows(sb)["KINT_QUIET_SECONDS"]["kept_for_watcher"] == {
            "value": 9.0, "source": "kint-server session"}
        said = quiet.call("memory_status")
        assert not _timing_notices(said), said
        assert not _timing_notices(later.call("memory_status"))
        later.close()
        agents.remove(later)
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 1,
                    what="the second session detached", **WAIT)
        assert _rows(sb)["KINT_QUIET_SECONDS"]["kept_for_watcher"] == {
            "value": 7.0, "source": "kint-server session"}

        # A session that asks for a watcher and gives no timings of its own: the kept ones
        # are the watcher's now, in force, and so are the kept push settings.
        agents.append(AgentProcess(dict(sb.env)).start())
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 2,
                    what="the session with a watcher attached", **WAIT)
        rows = _rows(sb)
        quiet_row = rows["KINT_QUIET_SECONDS"]
        assert (quiet_row["value"], quiet_row["source"], quiet_row["kept_for_watcher"]) == (
            7.0, "kint-server session", None)
        assert (rows["KINT_RPC_TIMEOUT"]["watcher"], rows["KINT_RPC_TIMEOUT"]["kept_for_watcher"]
                ) == ({"value": 60.0, "source": "kint-server session"}, None)
        assert "watcher: quiet 7s (kint-server session)" in (
            sb.kint_home / "supervisor.log").read_text()
        taken = [{"name": "KINT_RPC_TIMEOUT", "value": 60.0, "source": "kint-server session",
                  "own": 10.0, "own_source": "default"}]
        assert _status(sb)["watcher_settings"] == taken
        assert quiet.call("memory_status")["watcher_settings"] == taken
    finally:
        for agent in agents:
            agent.close()
        sb.shutdown()
