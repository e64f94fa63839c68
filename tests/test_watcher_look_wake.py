"""The watcher's look at a store it found clean (or pushed) at a signature read within two
seconds of the store's last write comes as that signature tells every later commit, not at
the next poll (kint/tenant_worker/watcher.py, `_run` and `_look_due`; store.SettledRule's
`tells_at`).

Such a store stays dirty until it is looked at once more (a commit right after the read may
have left the signature as it was), and the beat's `has_work` (`work_left` in `kint
supervisor status`) says so: it keeps the worker from its idle exit and a recycle. The look
came at the next poll (15 s by default, as long as a session asks), so a worker started
within two seconds of a write showed work left for a poll, and one whose push came within
two seconds of a write waited a poll more for its idle exit. Meanwhile, now at most two
seconds (and a beat), `work_left` is true and UNANCHORED is `~N`: the worker cannot yet
tell whether a commit was missed.

Real parts: the devchain's anvil (behind a loopback RPC proxy, tests/rpc_proxy.py, for the
push), the test supervisor and the space's worker, real watchers started by sessions'
`attach`. The store's files are dated an hour ahead of the clock (os.utime), so that their
signature tells only once it has stood two seconds: whether the start's count, or the push,
came within those two seconds is then certain, never a race with a loaded box. Files dated
at the present take the wall clock's branch of `tells_at`, checked below with the wall
clock's read set by the test.
"""

from __future__ import annotations

import os
import time

from chain_machines import anchored, machine_behind_proxy, new_machine
from conftest import write_rules

WAIT = {"timeout": 30, "interval": 0.2}
# The poll the sessions ask for while the look is awaited: far past the test's waits.
LONG_POLL = "600"
AHEAD_NS = 3600 * 10**9


def _dated_ahead(db) -> None:
    """The store's files dated an hour ahead: a change of its signature, no write."""
    stamp = time.time_ns() + AHEAD_NS
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            os.utime(path, ns=(stamp, stamp))


def test_a_start_within_two_seconds_of_a_write_is_looked_at_as_it_tells(tmp_path,
                                                                        chain_home):
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS=LONG_POLL)
    with anchored(sb, first="anchored before the start"):
        db = sb.sibyl_db
        _dated_ahead(db)
        attached = sb.call("attach", db, timeout_s=30,
                           args={"session": "watching", "watcher": True})
        assert attached["watcher"] is True
        # Nothing is left to push: the look once the signature tells clears the store,
        # where it showed work left until the first poll, ten minutes on. (A beat that
        # shows the session was made after the attach, whose op was work in flight.)
        row = sb.wait_for(lambda: (r := sb.row(db))["sessions"] == 1
                          and r["work_left"] is False and r,
                          what="the start's look once its signature told", **WAIT)
        assert row["unanchored"] == 0, row


def test_a_push_within_two_seconds_of_a_write_is_looked_at_as_it_tells(tmp_path, chain_home):
    """Two sessions: the first asks for a long poll, the second for a poll of a second,
    which makes the tick that pushes; the second leaves while the push waits for its
    receipt, so the long poll is in force once the push has landed."""
    with machine_behind_proxy(tmp_path / "machine", chain_home) as (sb, proxy):
        db = sb.sibyl_db
        write_rules(db, sb.tenant, left="pushed by the watcher")
        sb.call("attach", db, timeout_s=30, args={
            "session": "long-poll", "watcher": True,
            "settings": {"KINT_POLL_SECONDS": LONG_POLL, "KINT_QUIET_SECONDS": "0"}})
        proxy.set_mode("unmined")
        _dated_ahead(db)  # seen first by the tick that pushes: it does not tell yet
        sb.call("attach", db, timeout_s=30, args={
            "session": "short-poll", "watcher": True,
            "settings": {"KINT_POLL_SECONDS": "1", "KINT_QUIET_SECONDS": "0"}})
        sb.wait_for(lambda: sb.row(db)["progress_op"] == "push",
                    what="the watcher's push waiting for its receipt", **WAIT)
        sb.call("detach", db, args={"session": "short-poll"})
        proxy.forward()
        row = sb.wait_for(lambda: ((r := sb.row(db))["head"] or {}).get("seq") == 1
                          and r["work_left"] is False and r,
                          what="the push, then the look once its signature told", **WAIT)
        assert row["sessions"] == 1, row


def test_tells_at_is_when_a_signature_tells(monkeypatch):
    """`tells_at` against `tells` for the three kinds of signature: settled (now), dated
    within two seconds of the wall clock (when its files are two seconds old), ahead of it
    (two seconds after it was first seen)."""
    from kint.tenant_worker.store import SETTLED_AFTER_NS, SettledRule

    wall = 10**18
    monkeypatch.setattr(time, "time_ns", lambda: wall)
    rule = SettledRule()
    old = (wall - 5 * SETTLED_AFTER_NS, 1, 0, 0, 1)
    assert rule.tells_at(old, 100.0) == 100.0
    assert rule.tells_at(None, 100.0) == 100.0
    fresh = (wall - SETTLED_AFTER_NS // 4, 1, 0, 0, 1)
    assert abs(rule.tells_at(fresh, 100.0) - 101.5) < 1e-6
    ahead = (wall + 5 * SETTLED_AFTER_NS, 1, 0, 0, 1)
    assert not rule.tells(ahead, None, 100.0)  # first seen at 100
    assert abs(rule.tells_at(ahead, 101.0) - 102.0) < 1e-6
    assert not rule.tells(ahead, None, 101.9) and rule.tells(ahead, None, 102.0)
