"""The watcher's look at a store it found clean (or pushed) at a signature read within two
seconds of the store's last write comes as that signature tells every later commit, not at
the next poll (kint/tenant_worker/watcher.py, `_run`, and watcher_look.py, `_look_due`;
store.SettledRule's `tells_at`).

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
at the present take the wall clock's branch of `tells_at`: dated 1.5 s ahead (short of the
two seconds that make them "ahead"), they tell 3.5 s on, a window no start misses but on a
box stalled for seconds. That branch's look never came before the poll: once the files
told, `tells_at` gave the present, so the wake's deadline (it plus a margin) moved on at
every look, and the watcher's thread woke every 50 ms until the poll. Both are checked:
with a real worker, and with a real Watcher whose waits are counted.
"""

from __future__ import annotations

import os
import time

import pytest

from chain_machines import anchored, machine_behind_proxy, new_machine
from conftest import wait_until, write_rules, write_store

WAIT = {"timeout": 30, "interval": 0.2}
# The poll the sessions ask for while the look is awaited: far past the test's waits.
LONG_POLL = "600"
AHEAD_NS = 3600 * 10**9
# Files dated at the present: this far ahead of the clock, short of the two seconds that
# make a signature "ahead" (store.settled), so that they tell 3.5 s on, by the wall clock.
NOW_NS = 1_500_000_000


def _dated_ahead(db, ahead_ns: int = AHEAD_NS) -> None:
    """The store's files dated `ahead_ns` ahead: a change of its signature, no write."""
    stamp = time.time_ns() + ahead_ns
    for path in (db, db.with_name(db.name + "-wal")):
        if path.exists():
            os.utime(path, ns=(stamp, stamp))


@pytest.mark.parametrize("ahead_ns", [AHEAD_NS, NOW_NS], ids=["ahead", "now"])
def test_a_start_within_two_seconds_of_a_write_is_looked_at_as_it_tells(tmp_path,
                                                                        chain_home,
                                                                        ahead_ns):
    sb = new_machine(tmp_path / "machine", chain_home, KINT_POLL_SECONDS=LONG_POLL)
    with anchored(sb, first="anchored before the start"):
        db = sb.sibyl_db
        _dated_ahead(db, ahead_ns)
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
    """`tells_at` against `tells` for the three kinds of signature: settled (when it told,
    in the past: a wait due at it plus a margin is over, where `now` plus the margin never
    was), dated within two seconds of the wall clock (when its files are two seconds old),
    ahead of it (two seconds after it was first seen)."""
    from kint.tenant_worker.store import SETTLED_AFTER_NS, SettledRule

    wall = 10**18
    monkeypatch.setattr(time, "time_ns", lambda: wall)
    rule = SettledRule()
    old = (wall - 5 * SETTLED_AFTER_NS, 1, 0, 0, 1)
    assert abs(rule.tells_at(old, 100.0) - 92.0) < 1e-6
    just = (wall - SETTLED_AFTER_NS, 1, 0, 0, 1)  # told this very moment
    assert abs(rule.tells_at(just, 100.0) - 100.0) < 1e-6
    assert rule.tells_at(None, 100.0) == 100.0
    fresh = (wall - SETTLED_AFTER_NS // 4, 1, 0, 0, 1)
    assert abs(rule.tells_at(fresh, 100.0) - 101.5) < 1e-6
    ahead = (wall + 5 * SETTLED_AFTER_NS, 1, 0, 0, 1)
    assert not rule.tells(ahead, None, 100.0)  # first seen at 100
    assert abs(rule.tells_at(ahead, 101.0) - 102.0) < 1e-6
    assert not rule.tells(ahead, None, 101.9) and rule.tells(ahead, None, 102.0)


def test_a_watcher_over_files_dated_now_wakes_once_as_they_tell(tmp_path, monkeypatch):
    """A real Watcher started over a store whose files are dated at the present: its start
    finds nothing left, but at a signature that does not tell yet, so the store stays dirty
    until the look. The look comes as the files turn two seconds old, after one wait, where
    the wait's deadline moved on at every look once they had: the store showed dirty until
    the poll (ten minutes here), and the thread woke every 50 ms meanwhile. Stand-ins: the
    count (nothing left) and the push (none is made); the waits are the real Event's,
    counted."""
    from kint.tenant_worker.watcher import Watcher

    db = write_store(tmp_path / "memory.db")
    monkeypatch.setenv("KINT_POLL_SECONDS", LONG_POLL)
    monkeypatch.setenv("KINT_QUIET_SECONDS", LONG_POLL)
    watcher = Watcher(str(db), lambda: (0, 0), lambda _r: pytest.fail("pushed"),
                      generation=lambda: 0)
    waits: list[float] = []
    wait = watcher._retimed.wait
    watcher._retimed.wait = lambda timeout=None: waits.append(timeout) or wait(timeout)
    _dated_ahead(db, NOW_NS)
    watcher.start()
    try:
        assert watcher.dirty, "the start's count told every later commit: no look owed"
        assert wait_until(lambda: not watcher.dirty, timeout=30, interval=0.2), (
            f"no look as the files told; {len(waits)} waits: {waits[:6]}")
        # One wait for the look, then the poll's (begun or not yet).
        assert len(waits) <= 2, waits[:6]
    finally:
        watcher.stop()
