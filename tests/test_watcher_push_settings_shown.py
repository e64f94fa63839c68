"""The push settings a kint-server session gives the watcher's pushes (space_settings.PUSH_SETTINGS:
KINT_RPC_TIMEOUT, KINT_KEY_TTL, KINT_NONCE_RETRY_SECONDS), shown where a user looks
(kint.tenant_worker.push_settings), and a timeout that names the KINT_RPC_TIMEOUT it
waited and whose it was (kint.tenant_worker.rpc_hint.timeout_named).

The watcher's pushes take a session's values (sessions._watcher_push), yet `kint
supervisor status` showed none of them and `kint config show` the call's own: a user who
saw `KINT_RPC_TIMEOUT 10` there could not tell why an automatic push waited a minute;
`kint status` and memory_status, where a user and an agent look at one space, showed none
either. And a push that timed out, a watcher's or a command's, said "within
KINT_RPC_TIMEOUT" with neither the value nor whose it was. A recycled worker hands its
sessions to the successor (session_handoff.py): the successor's watcher must still take
the session's values, in the pushes it makes (the cached data key renewed for the
session's KINT_KEY_TTL) as in what its status shows.

Real parts: the session's devchain (anvil), the test supervisor and its workers, a real
kint-server over stdio (tests/mcp_session.py), the real CLI; a delaying RPC proxy
(tests/support) for the timeout.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from chain_machines import kjson, machine_behind_proxy, new_machine, ok
from conftest import write_rules
from mcp_session import AgentProcess, a_session_writes_and_closes
from test_worker_recycle import QUICK
from kint import settings
from kint.chain.calls import RPC_TIMEOUT_WORDS
from kint.protocol import ErrorCode, ProtocolError
from kint.settings.schema import BY_NAME
from kint.tenant_worker.rpc_hint import timeout_named

WAIT = {"timeout": 90, "interval": 0.25}
SESSION = {"KINT_RPC_TIMEOUT": "60", "KINT_KEY_TTL": "30d", "KINT_NONCE_RETRY_SECONDS": "40"}
# The session's watcher pushes at its first tick after a write (a quarter second: the
# poll's least lowered by KINT_TEST_POLL_MINIMUM_S, tests/support/kint_test_timings.py).
PROMPT = {"KINT_QUIET_SECONDS": "0", "KINT_POLL_SECONDS": "0.25"}
# The head budget of the status whose read of the held balance times out: long enough for
# its head read, which comes first, on a loaded box (test_short_bound_not_failed's too).
STATUS_BOUND_S = "5"


def _shown(row: dict) -> dict:
    return {e["name"]: (e["value"], e["source"], e["own"], e["own_source"])
            for e in row.get("watcher_settings") or []}


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="the recycle's memory figure comes from /proc/self/smaps_rollup")
def test_status_and_config_show_name_a_sessions_push_settings_before_and_after_a_recycle(
        tmp_path, chain_home):
    from kint.custody.vault_cache import CachedKey, read_cached_key

    sb = new_machine(tmp_path / "m", chain_home, KINT_TEST_POLL_MINIMUM_S="0.25", **QUICK)
    config = sb.kint_home / "config.toml"

    def recycle_over(mib: int) -> None:
        config.write_text(f"worker_recycle_mib = {mib}\n")
        config.chmod(0o600)
        sb.call("sup.reload")

    agent = None
    try:
        recycle_over(0)
        ok(sb.kint("connect", "--dev"))
        space = kjson(sb, "status")
        space16 = space["space"]
        agent = AgentProcess({**sb.env, **SESSION, **PROMPT}).start()
        expected = {"KINT_RPC_TIMEOUT": (60.0, "kint-server session", 10.0, "default"),
                    "KINT_KEY_TTL": ("30d", "kint-server session", "24h", "default"),
                    "KINT_NONCE_RETRY_SECONDS": (40.0, "kint-server session", 15.0,
                                                 "default")}

        def status_row() -> dict:
            status = kjson(sb, "supervisor", "status")
            return next(r for r in status["spaces"] if r["space"] == space16)

        first = sb.wait_for(lambda: (r := status_row())["sessions"] == 1
                            and _shown(r) == expected and r,
                            what="the session's push settings in the status", **WAIT)
        text = ok(sb.kint("supervisor", "status")).stdout
        assert (f"watcher of {space16}: its pushes run with the kint-server session's "
                f"KINT_KEY_TTL=30d (the supervisor's: 24h, default); KINT_RPC_TIMEOUT=60 "
                f"(the supervisor's: 10, default); KINT_NONCE_RETRY_SECONDS=40 (the "
                f"supervisor's: 15, default)") in text, text

        shown = {e["name"]: e for e in kjson(sb, "config", "show")["settings"]}
        assert shown["KINT_RPC_TIMEOUT"]["value"] == 10.0  # this call's (the default)
        assert shown["KINT_RPC_TIMEOUT"]["watcher"] == {"value": 60.0,
                                                        "source": "kint-server session"}
        assert shown["KINT_KEY_TTL"]["watcher"] == {"value": "30d",
                                                    "source": "kint-server session"}
        assert shown["KINT_QUIET_SECONDS"]["watcher"] is None  # its row is the watcher's
        assert shown["KINT_QUIET_SECONDS"]["kept_for_watcher"] is None  # one runs
        lines = ok(sb.kint("config", "show")).stdout.splitlines()
        timeout = next(line for line in lines if line.startswith("KINT_RPC_TIMEOUT "))
        assert timeout.endswith("default; the watcher's pushes use 60 (kint-server session)"), \
            timeout
        # A call that gives the session's own value is told of no other.
        same = {e["name"]: e for e in json.loads(ok(sb.kint(
            "config", "show", "--json", env={"KINT_RPC_TIMEOUT": "60"})).stdout)["settings"]}
        assert same["KINT_RPC_TIMEOUT"]["watcher"] is None, same["KINT_RPC_TIMEOUT"]

        # `kint status` and the agent's memory_status say what supervisor status says,
        # set beside the supervisor's own values, not the call's (the agent's call
        # carries the session's own: beside them, nothing would differ).
        assert _shown(kjson(sb, "status")) == expected
        text = ok(sb.kint("status")).stdout
        assert ("watcher: its pushes run with the kint-server session's KINT_KEY_TTL=30d "
                "(the supervisor's: 24h, default); KINT_RPC_TIMEOUT=60 (the supervisor's: "
                "10, default); KINT_NONCE_RETRY_SECONDS=40 (the supervisor's: 15, "
                "default)") in text.splitlines(), text
        assert _shown(agent.call("memory_status")) == expected

        # The worker recycled with the session attached: its successor's watcher takes
        # the values the session handed over (session_handoff.py), not the space's.
        recycle_over(1)
        successor = sb.wait_for(lambda: (r := status_row())["pid"] not in (None, first["pid"])
                                and r["sessions"] == 1 and r["last_beat_age_s"] is not None
                                and r, what="the successor, with the session", **WAIT)
        assert "1 session(s) taken over" in (sb.kint_home / "supervisor.log").read_text()
        assert _shown(sb.wait_for(lambda: (r := status_row())["pid"] == successor["pid"]
                                  and r["watcher_settings"] and r,
                                  what="the successor's beat", **WAIT)) == expected

        # And its pushes take them, not only its beat: a pull from the terminal renews the
        # cached data key for the space's 24 h; the session's next write is then pushed
        # by the successor's watcher, which renews it for the session's 30 days.
        ok(sb.kint("pull"))
        cached = read_cached_key(sb.kint_home, space["space_id"])
        assert isinstance(cached, CachedKey) and cached.expires_at is not None, cached
        assert cached.expires_at < time.time() + 2 * 86400, "not renewed for the 24 h"
        before = status_row()["head"]["seq"]
        asked = time.time()
        assert agent.call("memory_remember", category="notes", name="after-the-recycle",
                          body={"text": "pushed by the successor's watcher"})["ok"]
        pushed = sb.wait_for(lambda: (r := status_row())["head"]
                             and r["head"]["seq"] == before + 1 and r,
                             what="the successor's watcher pushing the write", **WAIT)
        assert pushed["pid"] == successor["pid"], pushed
        # The head is on chain (and in the status) before the push returns and the watcher
        # logs it: wait for the line, which is said once the push and its key renewal ended.
        sb.wait_for(lambda: "watcher: anchored" in (sb.kint_home / "supervisor.log").read_text(),
                    what="the watcher's 'anchored' line", **WAIT)
        cached = read_cached_key(sb.kint_home, space["space_id"])
        assert isinstance(cached, CachedKey) and cached.expires_at is not None, cached
        assert cached.expires_at >= asked + 30 * 86400 - 60, (
            f"renewed for {(cached.expires_at - asked) / 3600:.1f} h, not the session's 30 d")
    finally:
        if agent is not None:
            agent.close()
        sb.shutdown()


def test_a_push_that_times_out_names_the_rpc_timeout_it_waited_and_whose(tmp_path,
                                                                          chain_home):
    """KINT_RPC_TIMEOUT of 0.5 s against an endpoint that takes 2 s to give the session
    key's balance (a push reads it before it sends): a `kint push` says the value it waited
    and where it was set (its own environment, then config.toml), where it said only
    "within KINT_RPC_TIMEOUT"; the watcher's failed push names the kint-server session's
    value, and so does a closing server's exit push in the log, the one place its failure
    is read. A read status makes within its head budget names that budget, not
    KINT_RPC_TIMEOUT, which changes nothing there. For that status the proxy holds the
    balance unanswered, so its read times out on a bound long enough for the head read
    before it."""
    with machine_behind_proxy(tmp_path, chain_home,
                              KINT_TEST_POLL_MINIMUM_S="0.25") as (sb, proxy):
        # The session key's balance, read by status within KINT_VERIFY_HEAD_SECONDS (one
        # status: the endpoint's timeout marks it failed for the next 30 s' head reads).
        # Several seconds: the status's own head read, first and needed for the key's
        # facts, has room on a loaded box (0.5 s, then 1.5 s, missed it there); the held
        # balance read times out on it all the same.
        proxy.set_mode("hang_methods", methods=["eth_getBalance"])
        budget = f"{RPC_TIMEOUT_WORDS.removesuffix('KINT_RPC_TIMEOUT')}KINT_VERIFY_HEAD_SECONDS"
        status = json.loads(ok(sb.kint("status", "--json", env={
            "KINT_VERIFY_HEAD_SECONDS": STATUS_BOUND_S})).stdout)
        assert status["chain_head"] is not None, status  # the premise: its head was read
        key = status["session_key"]
        assert f"{budget}={STATUS_BOUND_S}s (from this call; ReadTimeout)" in key["error"], key
        # From here the balance comes 2 s late: past every push's 0.5 s, and within the head
        # budget (the machine's) of memory_status's reads of the key's facts below, which a
        # held balance would make wait that budget out at every call.
        proxy.set_mode("delay_methods", methods=["eth_getBalance"], seconds=2)
        # A command's own push names the value it waited and whose it was too: this
        # call's environment, then config.toml's (before any session: no watcher then).
        write_rules(sb.sibyl_db, sb.tenant, slow="a row to push")
        late = sb.kint("push", env={"KINT_RPC_TIMEOUT": "0.5"})
        assert late.returncode == 5 and "[RPC_UNAVAILABLE]" in late.stderr, late.stderr
        assert f"{RPC_TIMEOUT_WORDS}=0.5s (from this call; ReadTimeout)" in late.stderr, \
            late.stderr
        config = sb.kint_home / "config.toml"
        config.write_text("rpc_timeout = 0.5\n")
        config.chmod(0o600)
        late = sb.kint("push")
        assert late.returncode == 5, late.stderr
        assert (f"{RPC_TIMEOUT_WORDS}=0.5s (from file {config}; ReadTimeout)"
                in late.stderr), late.stderr
        config.unlink()
        # A closing server's exit push times out too: its log line names the value. The
        # server asks for no watcher, and its own pull has ended before it writes (a pull
        # refused BUSY is the start-up pull still running): no other push or pull of the
        # space holds it when the exit push comes, which would make it wait its turn.
        a_session_writes_and_closes(sb, {**sb.env, "KINT_RPC_TIMEOUT": "0.5",
                                         "KINT_NO_WATCHER": "1"}, **WAIT)
        log = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: "exit push not made" in log.read_text(), what="the exit push",
                    **WAIT)
        line = next(x for x in log.read_text().splitlines() if "exit push not made" in x)
        assert f"{RPC_TIMEOUT_WORDS}=0.5s (from this call; ReadTimeout)" in line, line
        # The session's watcher pushes at its first tick after the write (PROMPT). That
        # tick may come while the session's own start-up pull holds the space (a BUSY
        # failure, retried a second later): the failure waited for is the push's timeout.
        agent = AgentProcess({**sb.env, "KINT_RPC_TIMEOUT": "0.5", **PROMPT,
                              "KINT_PUSH_RETRY_SECONDS": "1"}).start()
        named = f"{RPC_TIMEOUT_WORDS}=0.5s (from kint-server session; ReadTimeout)"
        try:
            assert agent.call("memory_remember", category="notes", name="slow-balance",
                              body={"text": "pushed by the watcher"})["ok"] is True
            failure = sb.wait_for(
                lambda: (f := agent.call("memory_status")["watcher_failure"])
                and f["code"] != "BUSY" and f, what="the watcher's failed push", **WAIT)
            assert named in failure["message"], failure
            # The supervisor shows it once the worker's next beat carries it.
            sb.wait_for(lambda: named in ok(sb.kint("supervisor", "status")).stdout,
                        what="the failure in the supervisor's status", **WAIT)
            assert named in log.read_text()
        finally:
            proxy.forward()
            agent.close()


def _timed_out(message: str, value: settings.Value | None = None) -> str:
    """`message` as timeout_named leaves it, under `value` of KINT_RPC_TIMEOUT (the push
    runs under its settings; overlaid here, so no other test's configuration leaks in)."""
    err = ProtocolError(ErrorCode.RPC_UNAVAILABLE, message)
    with settings.overlay({"KINT_RPC_TIMEOUT": value} if value is not None else {}):
        timeout_named(err)
    assert str(err) == err.message
    return err.message


def test_a_timeout_names_the_default_or_the_spaces_value_and_nothing_else_is_touched():
    """Without a session the watcher's pushes run with the space's value: named as the
    default, or by where it was set; a failure that is no timeout keeps its words."""
    setting = BY_NAME["KINT_RPC_TIMEOUT"]
    default = settings.Value(setting, 10.0, settings.DEFAULT)
    assert _timed_out(f"push: reading the head: {RPC_TIMEOUT_WORDS} (ReadTimeout)",
                      default) == (f"push: reading the head: {RPC_TIMEOUT_WORDS}=10s (the "
                                   f"default; ReadTimeout)")
    spaces = settings.Value(setting, 2.5, settings.FILE, "/h/config.toml")
    assert _timed_out(f"{RPC_TIMEOUT_WORDS} (ReadTimeout)", spaces) == (
        f"{RPC_TIMEOUT_WORDS}=2.5s (from file /h/config.toml; ReadTimeout)")
    assert _timed_out("the endpoint could not be reached") == \
        "the endpoint could not be reached"
