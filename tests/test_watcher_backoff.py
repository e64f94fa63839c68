"""After a push that fails (anything but HELD), the store watcher waits before it tries
again: KINT_PUSH_RETRY_SECONDS (at least one poll), doubling to 900 s. Any successful push of
the space and a change of config.toml end the wait; a store change does not. The space's
status carries the failure (`watcher_failure`), and so does `kint supervisor status` (the
worker's beat carries it), and the log has a line at the first failure, at a change of what
it says, and when a push goes through, never one per attempt.

The first test runs the real parts: the devchain's anvil behind a loopback RPC proxy
(tests/rpc_proxy.py) that hangs every call, the test supervisor, the space's worker and its
watcher, started by a session's `attach`. The second drives a real Watcher over a real store
file with its clock in the test's hands, so the doubling up to 15 minutes is checked without
waiting 15 minutes: its push is a stand-in that raises the worker's own refusals (what
raises them is the first test's business)."""

from __future__ import annotations

import json
import logging
import os
import re
import time

import pytest

from chain_machines import behind_proxy, ok
from conftest import sibyl_client, write_store
from machines_together import new_machines
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import SPACE_RPC_HINT
from kint.render_space import space_status_text
from kint.agent_server.results import status_result

# KINT_PUSH_RETRY_SECONDS here: several ticks. Its doubled wait is the time the steps after
# the second failure have (two commands, a beat, the `kint push` started) before the
# watcher's own retry, which must not come first, and the wait the config change must end
# is the time to write the file and see it read: 3 s (6 s) was met by a loaded box (-n 4,
# two burners), the watcher's retry going through before the command's push.
RETRY_S = 10
# The watcher's tick in the workers here (KINT_TEST_POLL_MINIMUM_S lets it under 1 s,
# tests/support/kint_test_timings.py): each step below waits a tick or two, and a quarter
# second is still several ticks of every wait the steps check (RETRY_S, 1 s).
TICK = {"KINT_POLL_SECONDS": "0.25", "KINT_TEST_POLL_MINIMUM_S": "0.25"}
WAIT = {"timeout": 60, "interval": 0.2}
# KINT_RPC_TIMEOUT of the first machine's supervisor, so of the watcher's own pushes: each
# push the hung proxy fails costs three tries of it (and 0.75 s of pauses), four such pushes
# here. Half a second is still many times a loopback call to anvil, which the watcher's
# last push makes through the proxy once it forwards again (half a second: a quarter was met
# by the connect's head read under four test workers; the connect now sends 30 s). Its
# commands (push, status) send their own 1 s with each call.
WATCHER_RPC_TIMEOUT_S = "0.5"
COMMAND_RPC_TIMEOUT_S = "1"
SANE_RPC_TIMEOUT_S = "30"  # a command's that is not meant to time out


def _failure(sb, db) -> dict | None:
    # Without the chain: with the proxy hung, the head read would wait out its budget.
    return sb.call("status", db)["watcher_failure"]


def failed_watcher_push(sb, proxy, session: str, retry_s: int, **wait):
    """The watcher of `sb`'s store attached as `session`, its KINT_PUSH_RETRY_SECONDS
    `retry_s` from config.toml (not the environment, which would beat the file), and a row
    written through Sibyl while `proxy` hangs every call: the Sibyl client that wrote it, and
    the watcher's failure once its push failed."""
    db = sb.sibyl_db
    config = sb.kint_home / "config.toml"
    config.write_text(f"push_retry_seconds = {retry_s}\n")
    config.chmod(0o600)
    assert sb.call("attach", db, args={"session": session, "watcher": True})["watcher"]
    proxy.set_mode("hang")
    client = sibyl_client(db, sb.tenant)
    client.set_entity("notes", "first", {"text": "the endpoint is down"})
    return client, sb.wait_for(lambda: _failure(sb, db), what="the watcher's failed push",
                               **wait)


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """The two real-parts tests' machines, started together (their supervisors' starts
    overlap), each untouched until its test, which stops it when done: the first's is
    connected through a proxy by the test, its supervisor with a 0.5 s RPC timeout and its
    commands with 1 s."""
    started = new_machines([tmp_path_factory.mktemp("backoff"), tmp_path_factory.mktemp("counts")],
                           chain_home, envs=[{"KINT_RPC_TIMEOUT": WATCHER_RPC_TIMEOUT_S}, {}],
                           **TICK, KINT_QUIET_SECONDS="0")
    # Started: the supervisor keeps the value it started with; the commands run from now on
    # (each reads the machine's environment anew) send theirs.
    started[0].env["KINT_RPC_TIMEOUT"] = COMMAND_RPC_TIMEOUT_S
    try:
        yield started
    finally:
        for sb in started:
            sb.shutdown()


def test_a_failed_watcher_push_waits_doubles_and_is_reset_by_a_push_and_a_config_change(
        machines, chain_home):
    # The connect (its authorization sent through the proxy) under a sane timeout, not the
    # supervisor's half second: it is meant to go through.
    with behind_proxy(machines[0], chain_home,
                      connect_settings={"KINT_RPC_TIMEOUT": SANE_RPC_TIMEOUT_S}) as (sb, proxy):
        db = sb.sibyl_db
        # The wait from config.toml: the change of configuration below also sets a wait of
        # 1 s, the least, so that the watcher's own push after it is not a whole RETRY_S
        # away.
        config = sb.kint_home / "config.toml"
        client, first = failed_watcher_push(sb, proxy, "backoff", RETRY_S, **WAIT)
        assert first["code"] == "RPC_UNAVAILABLE", first
        assert (first["attempts"], first["wait_s"]) == (1, RETRY_S), first
        calls = len(proxy.calls)

        # Not tried again at the next ticks: a reply that says a second (four ticks) has
        # passed since the failure still counts one attempt, and the endpoint saw nothing
        # new (RETRY_S - 1 s before the retry is due: room for a loaded box).
        later = sb.wait_for(lambda: (f := _failure(sb, db))["retry_in_s"] <= RETRY_S - 1 and f,
                            what="four ticks after the failure", **WAIT)
        assert later["attempts"] == 1 and later["age_s"] >= 1, later
        assert len(proxy.calls) == calls

        # Tried again once the wait is over; it failed again and the wait doubled.
        second = sb.wait_for(lambda: (f := _failure(sb, db))["attempts"] == 2 and f,
                             what="the attempt after the wait", **WAIT)
        assert second["wait_s"] == 2 * RETRY_S and len(proxy.calls) > calls, second

        shown = json.loads(ok(sb.kint("status", "--json")).stdout)
        assert shown["watcher_failure"]["code"] == "RPC_UNAVAILABLE", shown
        assert shown["watcher_failure"]["attempts"] >= 2
        assert "watcher: push failed " in space_status_text(shown)
        # Its hint names the endpoints the space was connected with (`--rpc-urls`), as a
        # request's refusal does, where it sent the user to KINT_RPC_URL; memory_status
        # gives it in an agent's words, what else it says as the worker said it.
        assert shown["watcher_failure"]["hint"] == SPACE_RPC_HINT, shown
        agent = status_result(shown)["watcher_failure"]
        assert agent == {**shown["watcher_failure"], "hint": (
            f"call memory_push again in a minute; if it fails again, stop and tell the "
            f"human to {SPACE_RPC_HINT}")}, agent

        # `kint supervisor status` shows it too, from the worker's beat (no request to the
        # worker): in OP while nothing runs, on a line under the table, in --json; and the
        # row the watcher counted before it pushed, in UNANCHORED. Waited for with OP empty:
        # a beat sent while the `kint status` above ran names that op until the next beat
        # (seen under load); a failure the beat showed as an op would never let OP empty.
        row = sb.wait_for(lambda: (r := sb.row(db))["watcher_failure"]
                          and r["watcher_failure"]["attempts"] == 2 and r["op"] is None
                          and r, what="the failure in the supervisor's status, OP empty",
                          **WAIT)
        assert row["watcher_failure"]["code"] == "RPC_UNAVAILABLE", row
        assert row["unanchored"] == 1, row
        table = ok(sb.kint("supervisor", "status")).stdout  # exit 0: not a degraded space
        assert "push failed x2" in table, table
        assert f"watcher of {row['space']}: push failed " in table, table
        assert "(RPC_UNAVAILABLE)" in table and "2 failed attempts" in table, table

        # A successful `kint push` ends the wait. It waits its calls out as a user's push
        # does (the default timeout): the commands' 1 s, there to keep the hung steps above
        # short, was met in CI by this push's send through the forwarding proxy.
        proxy.forward()
        ok(sb.kint("push", env={"KINT_RPC_TIMEOUT": SANE_RPC_TIMEOUT_S}))
        assert _failure(sb, db) is None
        sb.wait_for(lambda: (r := sb.row(db))["watcher_failure"] is None
                    and r["unanchored"] == 0, what="the supervisor's row after the push",
                    **WAIT)
        log = (sb.kint_home / "supervisor.log").read_text()
        assert log.count("watcher: push failed (RPC_UNAVAILABLE)") == 1, log
        assert "watcher: push failed again" not in log  # the same failure: no second line
        assert "watcher: push went through after 2 failed attempts (a push from the " \
               "command line)" in log, log

        # The next failure starts over at the first wait, not at the doubled one.
        proxy.set_mode("hang")
        client.set_entity("notes", "second", {"text": "down again"})
        again = sb.wait_for(lambda: _failure(sb, db), what="the next failed push", **WAIT)
        assert (again["attempts"], again["wait_s"]) == (1, RETRY_S), again

        # A change of config.toml ends the wait: the push is tried at once (a fresh first
        # failure, where the wait alone would have made it the second attempt). The new
        # file's wait is the least the setting takes, 1 s.
        before = again["age_s"]
        config.write_text("push_retry_seconds = 1\n")
        sb.wait_for(lambda: "watcher: the configuration changed" in
                    (sb.kint_home / "supervisor.log").read_text(),
                    what="the watcher to see the new configuration", **WAIT)
        fresh = sb.wait_for(lambda: (f := _failure(sb, db)) and f, what="the retried push",
                            **WAIT)
        assert (fresh["attempts"], fresh["wait_s"]) == (1, 1), (before, fresh)

        # The watcher's own push that goes through ends the wait as any other does (the
        # one place every successful push tells it: push.went_through), and says so.
        proxy.forward()
        sb.wait_for(lambda: _failure(sb, db) is None, what="the watcher's own push", **WAIT)
        log = (sb.kint_home / "supervisor.log").read_text()
        assert re.search(r"watcher: push went through after \d+ failed attempts?$", log,
                         re.M), log
        assert sb.call("status", db, args={"chain": True})["unanchored"] == 0  # pushed
        client.storage.close()


def test_the_wait_doubles_to_fifteen_minutes_and_only_a_push_or_the_config_ends_it(
        tmp_path, monkeypatch, caplog):
    from kint.tenant_worker.watcher import Watcher

    db = write_store(tmp_path / "memory.db")
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_POLL_SECONDS", "15")
    monkeypatch.setenv("KINT_PUSH_RETRY_SECONDS", "60")
    attempts: list[float] = []
    refusal = [ProtocolError(ErrorCode.RPC_UNAVAILABLE, "the endpoint is down")]
    generation = [0]

    def push(reason: str) -> None:
        attempts.append(now)
        raise refusal[0]

    watcher = Watcher(str(db), lambda: (1, 0), push, generation=lambda: generation[0])
    caplog.set_level(logging.INFO, logger="kint.worker")
    now = time.monotonic()

    def tick_at(t: float) -> None:
        nonlocal now
        now = t
        watcher.tick(t)

    # A store change (each its own time a while ago: read two seconds or more after it,
    # a signature tells every later commit, store.SettledRule).
    os.utime(db, ns=(time.time_ns(), time.time_ns() - 10 * 10**9))
    tick_at(now)
    assert len(attempts) == 1 and watcher.backoff.failure.wait_s == 60
    start = now
    tick_at(start + 15)  # the next tick: still waiting
    os.utime(db, ns=(time.time_ns(), time.time_ns() - 9 * 10**9))
    tick_at(start + 30)  # a store change does not end the wait
    assert len(attempts) == 1
    waits = []
    for _ in range(7):
        tick_at(watcher.backoff.failure.retry_at)
        waits.append(watcher.backoff.failure.wait_s)
    assert waits == [120, 240, 480, 900, 900, 900, 900]
    assert len(attempts) == 8
    assert sum("watcher: push failed" in r.getMessage() for r in caplog.records) == 1

    refusal[0] = ProtocolError(ErrorCode.TIMEOUT, "the endpoint hung")
    t = watcher.backoff.failure.retry_at
    tick_at(t)
    assert [r.getMessage() for r in caplog.records if "failed again" in r.getMessage()] == [
        "watcher: push failed again, now (TIMEOUT): the endpoint hung; 9 failed attempts, "
        "the next in 15 min"]

    generation[0] += 1  # config.toml read again: the wait is over at once
    tick_at(t + 1)
    assert len(attempts) == 10 and watcher.backoff.failure.attempts == 1

    watcher.backoff.went_through("memory_push")  # what push.went_through does
    assert watcher.backoff.failure is None
    assert ("watcher: push went through after 1 failed attempt (memory_push)"
            in caplog.text)

    # HELD is not a failure: no wait, and the next store change is what lets it push again.
    refusal[0] = ProtocolError(ErrorCode.HELD, "held")
    os.utime(db, ns=(time.time_ns(), time.time_ns() - 8 * 10**9))
    tick_at(t + 2)
    assert len(attempts) == 11 and watcher.backoff.failure is None
    tick_at(t + 3)
    assert len(attempts) == 11
    os.utime(db, ns=(time.time_ns(), time.time_ns() - 7 * 10**9))
    tick_at(t + 4)
    assert len(attempts) == 12


def test_a_watcher_that_cannot_count_says_so_once_until_it_can_again(machines):
    """A connected space whose data key is no longer cached (it expired, or its file went):
    the watcher cannot count what to push, at every tick while the store is dirty. It says
    so once, not once a tick (the log lives under KINT_HOME and counts against Sibyl's cap),
    and says when it can count again."""
    sb = machines[1]
    db = sb.sibyl_db
    log_path = sb.kint_home / "supervisor.log"
    try:
        ok(sb.kint("connect", "--dev"))
        assert sb.call("attach", db, args={"session": "counts", "watcher": True})["watcher"]
        cached = {path: path.read_bytes() for path in sb.kint_home.rglob("vault*.aes")}
        assert cached, "no cached data key to take away"
        for path in cached:
            path.unlink()
        client = sibyl_client(db, sb.tenant)
        client.set_entity("notes", "uncounted", {"text": "written while no key is cached"})
        line = "watcher: cannot count unanchored rows (ProtocolError: no data key on this machine"
        sb.wait_for(lambda: line in log_path.read_text(), what="the watcher's line", **WAIT)
        # Each tick tries to count again. That ticks ran is seen, not waited for: a tick
        # reads the watcher's timings first and logs them when they changed, so a size
        # trigger that config.toml changes is logged by the next tick, which then counts;
        # once the third is logged, the ticks that logged the first two have counted.
        for size in (40000, 40001, 40002):
            config = sb.kint_home / "config.toml"
            config.write_text(f"size_trigger_bytes = {size}\n")
            config.chmod(0o600)
            sb.wait_for(lambda: f"size trigger {size} bytes" in log_path.read_text(),
                        what=f"a tick with the size trigger {size}", **WAIT)
        assert log_path.read_text().count(line) == 1, log_path.read_text()

        for path, data in cached.items():  # the data key cached again, as connect leaves it
            path.write_bytes(data)
            path.chmod(0o600)
        sb.wait_for(lambda: "watcher: counting unanchored rows again" in log_path.read_text(),
                    what="the watcher counting again", **WAIT)
        assert log_path.read_text().count(line) == 1
        client.storage.close()
    finally:
        sb.shutdown()


def test_an_empty_wal_left_by_a_reader_is_no_store_change(tmp_path):
    """kint's own read-only connection leaves an empty `-wal` beside a store in WAL mode;
    the watcher reads the store's files as the heartbeat's count does (`store_signature`),
    so that read does not mark the store dirty (a needless count at the next quiet period).
    A real write still does."""
    import sqlite3

    from kint.tenant_worker.watcher import Watcher

    db = write_store(tmp_path / "memory.db")
    conn = sqlite3.connect(db)
    assert conn.execute("pragma journal_mode=wal").fetchone()[0] == "wal"
    conn.close()  # the last connection: its WAL is checkpointed and removed
    wal = tmp_path / "memory.db-wal"
    assert not wal.exists()
    # One row to push, too small for the size trigger: a dirty store stays dirty.
    watcher = Watcher(str(db), lambda: (1, 0), lambda reason: None, generation=lambda: 0)
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    reader.execute("select count(*) from sqlite_master").fetchone()
    assert wal.exists() and wal.stat().st_size == 0  # what the reader left
    watcher.tick(time.monotonic())
    assert not watcher.dirty
    reader.close()

    writer = sqlite3.connect(db)
    writer.execute("create table scratch (x)")
    writer.execute("insert into scratch values (1)")
    writer.commit()
    watcher.tick(time.monotonic())
    assert watcher.dirty
    writer.close()
