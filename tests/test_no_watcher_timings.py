"""The watcher timings a KINT_NO_WATCHER=1 kint-server sends are kept by the space's worker
(space.SpaceContext.session_settings), and were shown by `kint config show` as the
timings in force (SpaceContext.effective_setting) while no watcher ran on them. The row is
now the space's own, saying the session's value is kept and unused
(push_settings.kept_value), and so is a push setting's. No watcher takes them: once
another session asks for one, it runs with that session's values or the space's
(SpaceContext.watcher_setting), where it ran with the newest session's, such a session's
too: one that attached last set the timings and push settings of a watcher another
session asked for. Nor does that kint-server's every call get a line saying its timings
are not used (SpaceContext.compared_setting): they are kept, as its harness's
configuration asked, and an older such session's are not either while a newer one's are
the kept ones. Another caller's value is told that no watcher runs, as config show says,
where it was told the space "runs with" the kept value. `kint status` and memory_status
show no push settings while no watcher runs.

Real parts: the test supervisor and its worker, two real kint-servers over stdio
(tests/mcp_session.py), the real CLI. No chain: nothing here pushes.
"""

from __future__ import annotations

import json

from conftest import make_sandbox
from mcp_session import AgentProcess
from kint.settings.wire import NONE_TAKE

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


def _attached(sb, agents: list[AgentProcess], env: dict[str, str], sessions: int,
              what: str) -> AgentProcess:
    """A real kint-server with `env` over the sandbox's, started, kept in `agents` for the
    test's clean-up, once the space's row counts `sessions` attached."""
    agent = AgentProcess({**sb.env, **env}).start()
    agents.append(agent)
    sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == sessions, what=what, **WAIT)
    return agent


def test_a_no_watcher_sessions_timings_are_kept_not_shown_as_in_force(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    sb.start_entitled()
    agents: list[AgentProcess] = []
    try:
        quiet = _attached(sb, agents, {"KINT_NO_WATCHER": "1", "KINT_QUIET_SECONDS": "7",
                                       "KINT_RPC_TIMEOUT": "60"}, 1, "the session attached")

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
        assert line.endswith(f"default; no watcher runs (a kint-server session's 7 is "
                             f"{NONE_TAKE})"), line
        line = next(x for x in text if x.startswith("KINT_RPC_TIMEOUT "))
        assert line.endswith(f"default; no watcher runs (a kint-server session's 60 is "
                             f"{NONE_TAKE})"), line

        # Its own calls are told nothing of timings it sent to be kept.
        said = quiet.call("memory_status")
        assert not _timing_notices(said), said
        assert said["watcher_settings"] is None
        assert _status(sb)["watcher_settings"] is None
        # A terminal's value, the space's own 300, is told what config show says: no
        # watcher runs and the session's 7 is kept, unused; not that the space runs with 7.
        out = sb.kint("status", env={"KINT_QUIET_SECONDS": "300"})
        assert out.returncode == 0, out.stderr
        notice = next(x for x in out.stderr.splitlines() if "KINT_QUIET_SECONDS" in x)
        assert "runs with" not in notice, notice
        assert notice.startswith("kint: KINT_QUIET_SECONDS=300 in this environment is not "
                                 "used: no watcher runs in space ") and (
            f"(a kint-server session's 7 is {NONE_TAKE}); to change it, kint-server sends "
            f"it when it attaches") in notice, notice

        # A second such session: its 9 is the one kept now, and the first, whose 7 counts
        # again once the second goes, is not told on every call that its 7 is unused.
        later = _attached(sb, agents, {"KINT_NO_WATCHER": "1", "KINT_QUIET_SECONDS": "9"}, 2,
                          "the second session attached")
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

        # A session that asks for a watcher and gives no timings of its own: the watcher
        # runs with the space's, not the kept ones, and shows no session's push settings.
        _attached(sb, agents, {}, 2, "the session with a watcher attached")
        rows = _rows(sb)
        quiet_row = rows["KINT_QUIET_SECONDS"]
        assert (quiet_row["value"], quiet_row["source"], quiet_row["kept_for_watcher"]) == (
            300.0, "default", None)
        assert (rows["KINT_RPC_TIMEOUT"]["watcher"], rows["KINT_RPC_TIMEOUT"]["kept_for_watcher"]
                ) == (None, None)
        assert "watcher: quiet 300s (default)" in (sb.kint_home / "supervisor.log").read_text()
        assert _status(sb)["watcher_settings"] is None
        said = quiet.call("memory_status")
        assert said["watcher_settings"] is None and not _timing_notices(said), said
    finally:
        for agent in agents:
            agent.close()
        sb.shutdown()


def test_a_no_watcher_session_attached_last_does_not_set_the_watchers_values(tmp_path):
    """A session asks for the watcher with its own timings and push settings; a
    KINT_NO_WATCHER=1 session attaches after it with others. The watcher keeps the first's,
    as config show, status and the watcher's own log say, and neither session's calls are
    told their values are unused. Before, the newest session's won, whatever it asked: the
    second's 9 s quiet and 45 s RPC timeout ran a watcher it had said it did not want."""
    sb = make_sandbox(tmp_path / "m")
    sb.start_entitled()
    agents: list[AgentProcess] = []
    try:
        watching = _attached(sb, agents, {"KINT_QUIET_SECONDS": "7", "KINT_RPC_TIMEOUT": "60"},
                             1, "the session with a watcher attached")
        log = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: "watcher: quiet 7s (kint-server session)" in log.read_text(),
                    what="the watcher's timings in the log", **WAIT)
        quiet = _attached(sb, agents, {"KINT_NO_WATCHER": "1", "KINT_QUIET_SECONDS": "9",
                                       "KINT_RPC_TIMEOUT": "45"}, 2,
                          "the KINT_NO_WATCHER=1 session attached")

        rows = _rows(sb)
        assert (rows["KINT_QUIET_SECONDS"]["value"], rows["KINT_QUIET_SECONDS"]["source"]) == (
            7.0, "kint-server session"), rows["KINT_QUIET_SECONDS"]
        assert rows["KINT_RPC_TIMEOUT"]["watcher"] == {"value": 60.0,
                                                       "source": "kint-server session"}
        taken = [{"name": "KINT_RPC_TIMEOUT", "value": 60.0, "source": "kint-server session",
                  "own": 10.0, "own_source": "default"}]
        assert _status(sb)["watcher_settings"] == taken
        # The watcher retimed on the second attach (sessions.attach) and still says 7 s.
        assert "watcher: quiet 9s" not in log.read_text()
        for agent in (watching, quiet):
            said = agent.call("memory_status")
            assert said["watcher_settings"] == taken, said
            assert not _timing_notices(said), said
    finally:
        for agent in agents:
            agent.close()
        sb.shutdown()
