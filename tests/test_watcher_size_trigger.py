"""The store watcher's size trigger (docs/how-it-works.md; v0.3.0's 08-tools.md): while the store is
dirty it counts the unanchored rows at most once a minute, and pushes before the quiet
period ends when rows x 400 bytes is more than KINT_SIZE_TRIGGER_BYTES (32,768 by default):
81 rows (32,400 bytes) wait for the quiet period, 82 (32,800) are pushed at the next check.

Real parts: the devchain, the test supervisor, the space's worker and its watcher (started
by a session's `attach`), and rows written through Sibyl's own client. KINT_QUIET_SECONDS is
an hour, so only the size trigger can push; the minute between size checks is shortened to
a quarter second through the test launcher's knob (tests/support/kint_test_timings.py,
KINT_TEST_SIZE_CHECK_INTERVAL_S), which no user setting reaches, and so is the watcher's
tick (KINT_POLL_SECONDS, which KINT_TEST_POLL_MINIMUM_S, there too, lets under 1 s).

That size checks ran while 81 rows waited is seen, not slept for: each tick of the watcher
(every quarter second here, each a size check while the store is dirty) first logs its timings
when config.toml changed them, so a changed KINT_PUSH_RETRY_SECONDS (which no push here
meets) is logged by the next tick; once the last of CHECKS_SEEN changes is logged, the
ticks that logged the ones before it have checked the size."""

from __future__ import annotations

from chain_machines import new_machine, ok
from conftest import sibyl_client, write_store
from kint.tenant_worker.changes import ESTIMATED_BYTES_PER_ROW

TRIGGER_BYTES = 32768  # KINT_SIZE_TRIGGER_BYTES' default, which the test leaves in force
BELOW = TRIGGER_BYTES // ESTIMATED_BYTES_PER_ROW  # 81: 32,400 bytes, not more than it
# Ticks seen to log a changed configuration while BELOW rows wait: all but the last have
# checked the size by the time the last is logged.
CHECKS_SEEN = 4
WAIT = {"timeout": 90, "interval": 0.1}
# The watcher's tick, and the least time between two size checks while the store is dirty.
TICK_S = "0.25"


def _status(sb) -> dict:
    """What `kint status --json` prints (the status op with the chain), asked from this
    process: the command is not what is tested here, and each poll would cost its start."""
    return sb.call("status", sb.sibyl_db, args={"chain": True}, timeout_s=30)


def test_the_size_trigger_pushes_at_82_rows_and_not_at_81(tmp_path, chain_home):
    assert (BELOW, BELOW * ESTIMATED_BYTES_PER_ROW) == (81, 32400)
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS=TICK_S,
                     KINT_TEST_POLL_MINIMUM_S=TICK_S, KINT_QUIET_SECONDS="3600",
                     KINT_TEST_SIZE_CHECK_INTERVAL_S=TICK_S)
    db = sb.sibyl_db
    try:
        write_store(db, tenant=sb.tenant)
        ok(sb.kint("connect", "--dev"))
        ok(sb.kint("push"))
        head = _status(sb)["head"]["seq"]
        assert sb.call("attach", db, args={"session": "size", "watcher": True})["watcher"]

        client = sibyl_client(db, sb.tenant)
        for i in range(BELOW):
            client.set_entity("notes", f"note-{i:03}", {"text": f"note {i}"})
        sb.wait_for(lambda: _status(sb)["unanchored_changes"] == {
            "changed": BELOW, "deleted": 0}, what=f"{BELOW} unanchored rows", **WAIT)
        config, log_path = sb.kint_home / "config.toml", sb.kint_home / "supervisor.log"
        for retry_s in range(61, 61 + CHECKS_SEEN):  # several size checks: none fires
            config.write_text(f"push_retry_seconds = {retry_s}\n")
            config.chmod(0o600)
            sb.wait_for(lambda: f"push retry {retry_s}s (" in log_path.read_text(),
                        what=f"a tick with the push retry {retry_s} s", **WAIT)
        status = _status(sb)
        assert status["head"]["seq"] == head, status
        assert status["unanchored_changes"] == {"changed": BELOW, "deleted": 0}, status

        client.set_entity("notes", "one-more", {"text": "the 82nd row"})
        pushed = sb.wait_for(lambda: (s := _status(sb))["head"]["seq"] > head and s,
                             what="the size trigger's push", **WAIT)
        assert pushed["head"]["seq"] == head + 1, pushed

        def logs() -> str:
            return "\n".join(p.read_text(errors="replace") for p in sb.kint_home.rglob("*.log"))

        # The watcher logs its result once the push returns to it, which can be just after
        # the head the status read moved: waited for, not raced (it failed so under load).
        done = "watcher: anchored 82 row change(s) in 1 epoch(s)"
        log = sb.wait_for(lambda: done in (text := logs()) and text,
                          what="the watcher's line for its push", **WAIT)
        assert "quiet 3600s" in log, log[-3000:]  # the quiet period could not have fired
        # v0.3.0's log lines (10-configuration.md, "Logs"): what fired, then the result.
        assert "watcher: pushing (size trigger)" in log, log[-3000:]
        assert "watcher: pushing (quiet trigger)" not in log
        assert "watcher: anchored 82 row change(s) in 1 epoch(s)" in log, log[-3000:]
    finally:
        sb.shutdown()


def test_a_size_triggered_push_counts_the_store_once(tmp_path, chain_home):
    """The tick whose size check finds the trigger passed pushes with the count it made: it
    counted the store again in `_fire` first, two diffs of the whole store for every
    size-triggered push. Read in the worker's watcher trace
    (tests/support/kint_test_trace.py): the counts between the push's tick and its push."""
    trace = tmp_path / "watcher.trace"
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS=TICK_S,
                     KINT_TEST_POLL_MINIMUM_S=TICK_S, KINT_QUIET_SECONDS="3600",
                     KINT_TEST_SIZE_CHECK_INTERVAL_S=TICK_S,
                     KINT_TEST_WATCHER_TRACE=str(trace))
    db = sb.sibyl_db
    try:
        write_store(db, tenant=sb.tenant)
        sb.call("connect", db, args={"dev": True}, timeout_s=300)
        head = sb.call("push", db, timeout_s=120)["head_seq"]
        assert sb.call("attach", db, args={"session": "size", "watcher": True})["watcher"]
        client = sibyl_client(db, sb.tenant)
        for i in range(BELOW + 1):  # past the trigger: only it can push (quiet 3600 s)
            client.set_entity("notes", f"note-{i:03}", {"text": f"note {i}"})
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == head + 1,
                    what="the size trigger's push", **WAIT)
        lines = trace.read_text().splitlines()
        assert lines.count("push") == 1, lines[-40:]
        pushed = lines.index("push")
        tick = pushed - 1 - lines[pushed - 1::-1].index("tick")
        assert lines[tick + 1:pushed] == ["count ok"], lines[tick:pushed + 1]
    finally:
        sb.shutdown()
