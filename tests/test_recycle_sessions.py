"""A worker with agent sessions attached is recycled too (issue 15: "idle PSS per worker
under 25 MB" failed for the one worker an agent uses, which a session's keepalive kept
alive for ever), and its successor serves those sessions at once.

The beat tells the supervisor "sessions attached" (`sessions`) apart from "work to finish"
(`has_work`: ops, a push pending, a dirty store the watcher has yet to push): the first
blocks only the idle exit, the second every stop. A worker recycled with sessions
attached writes them, with the drift baseline their notes moved and the watcher they ran,
for its successor (kint/tenant_worker/session_handoff.py), which the supervisor starts at
once and which takes them over before it serves anything.

The first tests drive real Worker objects in this process (not serving) over a real store;
the others a real test supervisor and its workers, with sessions attached through the
worker's own `attach` op (no keepalive: what the successor knows, it was handed) and a
KINT_WORKER_RECYCLE_MIB of 1, so that any worker is over it. The same with a real
kint-server, the watcher's pushes and the exit push on a devchain is
tests/test_recycle_agent_session.py.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import make_sandbox, write_store
from kint.paths import session_handoff_path
from kint.settings.loader import SESSION, Value
from kint.settings.schema import BY_NAME
from kint.tenant_worker.own_memory import QUIET_SECONDS
from kint.boot import boot_id
from kint.tenant_worker.space import SESSION_TTL_S
from test_worker_recycle import QUICK, _kept_after_its_figure, _verify, recycle_limit

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the memory figure comes from /proc/self/smaps_rollup")


def _worker(tmp_path, supervisor_run: str = "this-start", predecessor_run: str = ""):
    """A real Worker over a real store (not serving: its beats go nowhere)."""
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700, exist_ok=True)
    db = tmp_path / "memory.db"
    if not db.exists():
        write_store(db, tenant="t")
    cfg = WorkerConfig(space_id="cd" * 32, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused",
                       supervisor_pid=os.getpid(), supervisor_run=supervisor_run,
                       predecessor_run=predecessor_run, idle_beat_s=2.5)
    return Worker(cfg, b"\x03" * 32)


def _beat(worker) -> dict:
    count, op, age = worker.inflight.snapshot()
    return worker._beat_message(time.monotonic(), count, op, age, 1.0)[0]["state"]


def test_sessions_are_counted_apart_from_the_work_that_blocks_any_stop(tmp_path):
    worker = _worker(tmp_path)
    try:
        ctx = worker.ctx
        assert (_beat(worker)["sessions"], _beat(worker)["has_work"]) == (0, False)
        with ctx.sessions_lock:
            ctx.sessions["s1"] = time.monotonic()
        state = _beat(worker)
        assert (state["sessions"], state["has_work"]) == (1, False), state
        pending = ctx.state.files["pending"]
        pending.write_bytes(b"{}")  # a push journal left to settle: work, whatever it says
        try:
            assert _beat(worker)["has_work"] is True
        finally:
            pending.unlink()
        worker.inflight.start("r1", "verify")
        assert _beat(worker)["has_work"] is True
    finally:
        worker.close()


def _attached(ctx, sid: str, seen_ago: float, first_ago: float | None = None,
              poll: str | None = None, watching: bool = True) -> None:
    """Session `sid` as attach leaves it; with `watching`, one that asked for the watcher
    (without: a KINT_NO_WATCHER=1 kint-server, whose values no watcher takes)."""
    now = time.monotonic()
    with ctx.sessions_lock:
        ctx.sessions[sid] = now - seen_ago
        if watching:
            ctx.watching.add(sid)
        if first_ago is not None:
            values = ({"KINT_POLL_SECONDS": Value(BY_NAME["KINT_POLL_SECONDS"], float(poll),
                                                  SESSION, raw=poll)} if poll else {})
            ctx.session_settings[sid] = (now - first_ago, values)


def test_the_sessions_their_settings_and_the_drift_baseline_pass_to_the_successor(tmp_path):
    from kint.tenant_worker import sessions
    from kint.tenant_worker.drift import Hold
    from kint.tenant_worker.session_handoff import hand_over, take_over

    old = _worker(tmp_path)
    try:
        ctx = old.ctx
        _attached(ctx, "older", seen_ago=30, first_ago=100, poll="7")
        _attached(ctx, "newer", seen_ago=5, first_ago=50, poll="3")
        _attached(ctx, "nowatch", seen_ago=4, first_ago=40, poll="9", watching=False)
        _attached(ctx, "gone", seen_ago=500)  # killed without a word: not handed over
        _attached(ctx, "left", seen_ago=2, first_ago=60)
        sessions.detach(ctx, {"session": "left"})  # said goodbye: its late keepalive is not
        ctx.drift.reset(ctx.store_rows() or [])
        ctx.drift.note("entity:rules:noted", "ab" * 32)
        ctx.drift.take_over(ctx.drift.handed()["leaves"],
                            Hold("refusing to anchor: test", "watcher", "2026-12-04T00:00:00Z"))
        # The newest session's that asked for the watcher, not the KINT_NO_WATCHER=1 one's.
        assert ctx.watcher_setting("KINT_POLL_SECONDS").value == 3
        assert hand_over(ctx) == 3
        handed = ctx.drift.handed()
    finally:
        old.close()
    path = session_handoff_path(tmp_path / "kint", "cd" * 8)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    new = _worker(tmp_path)
    try:
        ctx = new.ctx
        assert take_over(ctx) is None  # no session ran the watcher: none is started
        assert not path.exists()  # taken once
        assert sorted(ctx.sessions) == ["newer", "nowatch", "older"]
        assert 25 < time.monotonic() - ctx.sessions["older"] < 60  # last seen as it was
        poll = ctx.watcher_setting("KINT_POLL_SECONDS")
        assert (poll.value, poll.source, poll.raw) == (3, SESSION, "3")  # it still wins
        assert ctx.kept_settings("KINT_POLL_SECONDS", watching=False)[0].raw == "9"
        assert ctx.drift.handed() == handed and ctx.drift.active
        assert ctx.drift.held is not None and ctx.drift.held.reason == "watcher"
        assert _beat(new)["sessions"] == 3
        late = sessions.attach(ctx, {"session": "left", "watcher": False})
        assert late.get("ended") is True and late["sessions"] == 3
    finally:
        new.close()


def _handed_one(tmp_path, supervisor_run: str = "this-start") -> None:
    """A worker under `supervisor_run` hands one session and its baseline over."""
    from kint.tenant_worker.session_handoff import hand_over

    old = _worker(tmp_path, supervisor_run=supervisor_run)
    try:
        _attached(old.ctx, "s1", seen_ago=1, first_ago=1)
        old.ctx.drift.reset([])
        assert hand_over(old.ctx) == 1
    finally:
        old.close()


def test_a_handoff_another_supervisor_made_is_not_taken(tmp_path):
    """The notes the sessions cast between the two workers waited in the supervisor that
    handed the sessions over: another supervisor's worker would take a baseline without
    them, and hold the sessions' own writes as drift."""
    from kint.tenant_worker.session_handoff import take_over

    _handed_one(tmp_path, supervisor_run="an-earlier-start")  # the same pid, say
    path = session_handoff_path(tmp_path / "kint", "cd" * 8)
    new = _worker(tmp_path)
    try:
        assert take_over(new.ctx) is None
        assert not new.ctx.sessions and not new.ctx.drift.active and not path.exists()
    finally:
        new.close()
    path.write_bytes(orjson.dumps({"version": 2}))  # not what it must hold: dropped
    new = _worker(tmp_path)
    try:
        assert take_over(new.ctx) is None and not new.ctx.sessions and not path.exists()
    finally:
        new.close()


def test_a_handoff_of_the_supervisor_before_an_upgrade_is_taken(tmp_path):
    """The supervisor that exited for an upgrade named its run id to this one
    (kint/supervisor/succession.py, `WorkerConfig.predecessor_run`): its workers' files are
    taken, another run's are not."""
    from kint.tenant_worker.session_handoff import take_over

    for earlier, taken in (("before-the-upgrade", True), ("another-start", False)):
        _handed_one(tmp_path, supervisor_run=earlier)
        new = _worker(tmp_path, predecessor_run="before-the-upgrade")
        try:
            take_over(new.ctx)
            assert (list(new.ctx.sessions) == ["s1"]) is taken, earlier
            assert new.ctx.drift.active is taken, earlier
        finally:
            new.close()


class FromNow:
    """A monotonic time this many seconds from when the file is planted: a value read at
    collection is stale by the time a later test of a long session runs (a "future" one
    becomes a fresh one a minute on)."""

    def __init__(self, seconds: float, *, text: bool = False) -> None:
        self.seconds = seconds
        self.text = text  # planted as text ("123.4"), as no worker writes it

    def __repr__(self) -> str:
        return f"now{self.seconds:+g}s" + (" as text" if self.text else "")


def _planted(store: str, **changes: Any) -> dict:
    """A handoff as a worker of this supervisor over `store` writes it, one session in it,
    with `changes` (a path of keys joined by "." to a new value)."""
    data: dict[str, Any] = {
        "version": 3, "written_mono": time.monotonic(), "boot_id": boot_id(), "db": store,
        "supervisor_run": "this-start",
        "watcher": False, "ended": {"bye": 1.0}, "held": None,
        "leaves": {"entity:rules:gate": "ab" * 32, "entity:rules:gone": None},
        "sessions": [{"id": "s1", "seen_s_ago": 1.0, "first_s_ago": 2.0, "watcher": True,
                      "settings": {"KINT_POLL_SECONDS": "5"}}]}
    for where, value in changes.items():
        *parents, key = where.split(".")
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(value, FromNow):
            value = time.monotonic() + value.seconds
            value = str(value) if changes[where].text else value
        node[key] = value
    return data


@pytest.mark.parametrize("changes", [
    {},  # as written: taken (the control: the cases below differ from it in one field)
    {"sessions.0.seen_s_ago": -1e9},  # seen in the future: never forgotten
    {"sessions.0.seen_s_ago": "nan"},  # text float() would take, as NaN: never forgotten
    {"sessions.0.seen_s_ago": True},
    {"sessions.0.first_s_ago": "-5"},
    {"sessions.0.settings": {"KINT_POLL_SECONDS": 5}},  # not as the client sent it
    {"ended": {"bye": -1e9}},
    {"held": {"message": 1, "reason": "watcher", "at": "2026-12-04T00:00:00Z"}},
    {"watcher": "yes"},
    {"sessions.0.watcher": "yes"},
    {"leaves": {"entity:rules:gate": "not a leaf"}},  # matches no row: held as drift
    {"written_mono": FromNow(0, text=True)},
    {"written_mono": FromNow(60)},  # written in the future
    {"written_mono": FromNow(-SESSION_TTL_S - 5)},  # too old to be taken
    {"boot_id": "an-earlier-boot"},  # a monotonic reading of another boot means nothing
    {"boot_id": 7},
    {"version": 1},  # the wall clock's format: its written_at is not read
    {"db": "/elsewhere/memory.db"},  # the space moved to another store: not its sessions
    {"db": None},
], ids=lambda c: ",".join(f"{k}={v!r}" for k, v in c.items()) or "as-written")
def test_a_handoff_field_not_as_a_worker_writes_it_drops_the_file(tmp_path, changes):
    """The successor trusts the file no further than its checks: a number of seconds that
    is text, negative or not finite, a setting that is not text, a hold that is not three
    strings. Before, float() took "nan", "-1e9" and true, and a session seen in the future
    (or at NaN) stayed attached for good, keeping the worker from its idle exit."""
    from kint.tenant_worker.session_handoff import take_over

    path = session_handoff_path(tmp_path / "kint", "cd" * 8)
    worker = _worker(tmp_path)
    try:
        path.write_bytes(orjson.dumps(_planted(str(tmp_path / "memory.db"), **changes)))
        assert take_over(worker.ctx) is None and not path.exists()
        ctx = worker.ctx
        if not changes:
            assert list(ctx.sessions) == ["s1"] and list(ctx.ended_sessions) == ["bye"]
            assert ctx.watcher_setting("KINT_POLL_SECONDS").raw == "5"
            assert ctx.drift.handed()["leaves"] == _planted("")["leaves"]
        else:
            assert not ctx.sessions and not ctx.session_settings, ctx.sessions
            assert not ctx.ended_sessions and ctx.drift.held is None
            assert not ctx.drift.active
    finally:
        worker.close()


@pytest.mark.parametrize("ran", [False, True])
def test_a_handoff_an_older_kint_wrote_is_taken(tmp_path, ran):
    """On an upgrade the old workers hand over with the code they started with: version 2,
    which does not say which session asked for the watcher. The new worker dropped the file,
    and with it the sessions, the watcher and the drift baseline README's upgrade promises
    keep. It is taken: its sessions count as asking when the watcher ran (it ran with the
    newest session's values then), and each one's next keepalive says for itself."""
    from kint.tenant_worker import sessions
    from kint.tenant_worker.session_handoff import take_over

    path = session_handoff_path(tmp_path / "kint", "cd" * 8)
    data = _planted(str(tmp_path / "memory.db"), version=2, watcher=ran)
    for entry in data["sessions"]:
        del entry["watcher"]  # as version 2 writes it
    data["sessions"].append({**data["sessions"][0], "id": "s2"})
    worker = _worker(tmp_path)
    try:
        path.write_bytes(orjson.dumps(data))
        watcher = take_over(worker.ctx)
        ctx = worker.ctx
        assert not path.exists() and (watcher is not None) is ran
        assert sorted(ctx.sessions) == ["s1", "s2"] and list(ctx.ended_sessions) == ["bye"]
        assert ctx.drift.handed()["leaves"] == data["leaves"]
        assert ctx.watching == ({"s1", "s2"} if ran else set())
        poll = ctx.watcher_setting("KINT_POLL_SECONDS")
        assert poll.raw == ("5" if ran else None), poll  # as the watcher ran before
        sessions.attach(ctx, {"session": "s2", "watcher": False})  # a KINT_NO_WATCHER=1 one
        sessions.attach(ctx, {"session": "s1", "watcher": True})
        assert ctx.watching == {"s1"}
    finally:
        worker.close()


@pytest.mark.skipif(boot_id() is None, reason="no boot id to read on this OS")
@pytest.mark.parametrize("step_s", [-3600.0, 3600.0])
def test_a_step_of_the_wall_clock_does_not_misjudge_a_handoff(tmp_path, monkeypatch, step_s):
    """The wall clock stepped an hour between the two workers (NTP, a date set by hand):
    the handoff is as fresh as it was. Before, its age was told by time.time(), so an hour
    back made it "written in the future" and an hour on "too old", and the sessions lost
    their watcher and notes until their next keepalive. The step is made by shifting
    time.time() in this process: a real one would need root and would move the whole box."""
    from kint.tenant_worker.session_handoff import take_over

    _handed_one(tmp_path)
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() + step_s)
    new = _worker(tmp_path)
    try:
        take_over(new.ctx)
        assert list(new.ctx.sessions) == ["s1"] and new.ctx.drift.active
    finally:
        new.close()


def _row(sb) -> dict:
    return sb.row(sb.sibyl_db)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One test supervisor for the tests below that need no setting of their own but the
    watcher's poll (every second unless a session says otherwise). Each test has a store,
    so a space, of its own (`_space`), and reads only the log written since it began
    (`Log`); the two that recycle set KINT_WORKER_RECYCLE_MIB for their own run only
    (`_recycling`)."""
    sb = make_sandbox(tmp_path_factory.mktemp("recycle-sessions") / "m", **QUICK,
                      KINT_POLL_SECONDS="1")
    try:
        sb.start_entitled()
        yield sb
    finally:
        sb.shutdown()


def _recycling(sb):  # noqa: ANN202 - recycle_limit's context manager
    """KINT_WORKER_RECYCLE_MIB 1 (any worker is over it) for one test's run."""
    return recycle_limit(sb, 1)


def _space(sb, name: str, *attaches: dict) -> Path:
    """A store of this test's own, under a folder `name` (its space's label is
    `<tenant>@hermes:<name>`), with a session attached for each of `attaches` (the `attach`
    op's arguments: no keepalive follows)."""
    store = sb.root / name / "memory.db"
    store.parent.mkdir(parents=True)
    write_store(store, tenant=sb.tenant)
    for args in attaches:
        sb.call("attach", store, args=args)
    return store


class Log:
    """The shared supervisor's log from where it stood when this was made."""

    def __init__(self, sb) -> None:
        self.path = sb.kint_home / "supervisor.log"
        self.start = len(self.path.read_text())

    def text(self) -> str:
        return self.path.read_text()[self.start:]


@linux_only
def test_a_worker_with_sessions_attached_is_recycled_and_its_successor_has_them(shared):
    with _recycling(shared):
        _sessions_recycled(shared)


def _sessions_recycled(sb) -> None:
    log = Log(sb)
    attaches = [{"session": sid, "watcher": True, "settings": {"KINT_POLL_SECONDS": poll}}
                for sid, poll in (("one", "600"), ("two", "700"))]
    store = _space(sb, "recycled", *attaches)
    _verify(sb, store)
    first = sb.row(store)["pid"]
    row = sb.wait_for(lambda: (r := sb.row(store))["sessions"] == 2 and r, timeout=20,
                      what="the beat to count both sessions")
    assert row["work_left"] is False, row
    # No request is made from here on: the successor starts because sessions were
    # handed to it, and knows them without their keepalive.
    row = sb.wait_for(lambda: (r := sb.row(store))["pid"] not in (None, first)
                      and r["sessions"] == 2 and r,
                      timeout=QUIET_SECONDS + 30, interval=0.2,
                      what="the successor, with both sessions")
    assert row["restarts"] == 0 and row["state"] == "ready", row  # not a crash
    text = log.text()
    assert f"worker {first} holds" in text, text[-3000:]
    assert "its successor starts now with the 2 session(s) attached" in text
    assert "2 session(s) taken over from the worker before this one" in text
    # The watcher runs again, with the newest session's poll: its start says so (the
    # first worker's never ticked after the second attach, so it never logged 700 s).
    sb.wait_for(lambda: "poll 700s (kint-server session)" in log.text(),
                what="the successor's watcher, with the newest session's poll")
    assert not session_handoff_path(sb.kint_home, row["space"]).exists()
    status = sb.kint("supervisor", "status")
    assert status.returncode == 0 and str(row["pid"]) in status.stdout, status.stdout
    assert sb.call("detach", store, args={"session": "one"})["sessions"] == 1
    assert sb.call("detach", store, args={"session": "two"})["sessions"] == 0


@linux_only
def test_a_dirty_store_keeps_a_worker_with_a_session_from_its_recycle(shared):
    """The store changed under the watcher, which cannot push it (the space is not
    connected): while its session is attached the worker has work left, and is neither
    recycled nor stopped (a successor would not know the store dirty). Once no session
    is attached it is no work (tests/test_watcher_count_backoff.py: the idle stop)."""
    with _recycling(shared):
        _dirty_store_kept(shared)


def _dirty_store_kept(sb) -> None:
    store = _space(sb, "dirty", {"session": "s", "watcher": True})
    pid = sb.row(store)["pid"]
    write_store(store, {"later": {"rule": "written after the attach"}}, tenant=sb.tenant)
    sb.wait_for(lambda: sb.row(store)["work_left"], timeout=30, interval=0.2,
                what="the watcher to find the store dirty")
    _verify(sb, store)
    row = _kept_after_its_figure(sb, store)
    assert row["pid"] == pid and row["state"] == "ready" and row["sessions"] == 1, row
    assert row["work_left"] is True and row["memory_mib"] > 1, row
    assert sb.call("detach", store, args={"session": "s"})["sessions"] == 0


@linux_only
def test_sessions_attached_keep_a_worker_from_its_idle_exit(shared):
    """KINT_WORKER_IDLE_SECONDS never stops a worker with a session attached (recycling is
    off here); it does once the session detaches. Both settings are the shared supervisor's
    for this test's run only (config.toml, read at once through `sup.reload`): the spaces
    earlier tests left, sessions gone, exit idle meanwhile, which no test reads."""
    sb = shared
    # The least idle time the setting takes: the test waits it out twice, once with the
    # session attached (and past the memory figure's sweeps), once after it left.
    with sb.supervisor_config("worker_idle_seconds = 1\nworker_recycle_mib = 0\n"):
        store = _space(sb, "idle", {"session": "s", "watcher": False})
        pid = sb.row(store)["pid"]
        row = _kept_after_its_figure(sb, store, after_s=1)  # the idle limit on top
        assert row["pid"] == pid and row["sessions"] == 1, row
        sb.call("detach", store, args={"session": "s"})
        row = sb.wait_for(lambda: (r := sb.row(store))["pid"] is None and r, timeout=30,
                          what="the idle exit once the session left")
        assert row["state"] == "idle" and row["restarts"] == 0, row


def test_a_restarted_worker_hands_its_sessions_to_its_successor(shared):
    """`kint supervisor restart` stops the worker and starts another at once: the sessions
    attached, their watcher and its timings go on in the successor, as after a recycle.
    Before, only a recycle handed them over: the successor counted no session and ran no
    watcher until each session's next keepalive (up to a minute), and the drift baseline,
    with what it had seen, was made anew from the store at that keepalive."""
    sb, log = shared, Log(shared)
    attaches = [{"session": sid, "watcher": True, "settings": {"KINT_POLL_SECONDS": poll}}
                for sid, poll in (("one", "600"), ("two", "700"))]
    store = _space(sb, "restarted", *attaches)
    counted = sb.wait_for(lambda: (r := sb.row(store))["sessions"] == 2 and r, timeout=20,
                          what="the beat to count both sessions")
    first = counted["pid"]
    out = sb.kint("supervisor", "restart", counted["space"])
    assert out.returncode == 0 and "restarted:" in out.stdout, out.stderr
    # No request is made from here on: what the successor knows, it was handed.
    row = sb.wait_for(lambda: (r := sb.row(store))["pid"] not in (None, first)
                      and r["sessions"] == 2 and r, timeout=30, interval=0.2,
                      what="the successor, with both sessions")
    assert row["state"] == "ready" and row["restarts"] == 0, row
    assert "2 session(s) handed to the next worker" in log.text()
    assert "2 session(s) taken over from the worker before this one" in log.text()
    sb.wait_for(lambda: "poll 700s (kint-server session)" in log.text(),
                what="the successor's watcher, with the newest session's poll")
    assert not session_handoff_path(sb.kint_home, row["space"]).exists()
    assert sb.call("detach", store, args={"session": "one"})["sessions"] == 1
    assert sb.call("detach", store, args={"session": "two"})["sessions"] == 0


def test_a_space_that_moved_store_takes_no_sessions_and_they_are_told(shared):
    """The store a session attached over was moved, and the space with it (the next call
    named the store's new path: routing._move_space restarts the worker there). Those
    sessions are over a store the space no longer serves, and the baseline holds the old
    store's rows: the restarted worker takes none of what was handed over, and a session's
    next call (its keepalive, a tool) is told where the space is now and to restart, not
    "set KINT_SPACE" as for a second store asking for a space."""
    from kint.client import KintError

    sb, log = shared, Log(shared)
    old = _space(sb, "store", {"session": "s", "watcher": True})
    new = old.with_name("moved.db")  # the same folder: the same space label
    first = sb.wait_for(lambda: (r := sb.row(old))["sessions"] == 1 and r, timeout=20,
                        what="the session counted")["pid"]
    old.rename(new)
    sb.call("status", new, timeout_s=60)  # the space moves to its store's new path
    row = sb.row(new)
    assert row["pid"] not in (None, first) and row["sessions"] == 0, row
    text = log.text()
    assert "1 session(s) handed to the next worker" in text, text[-3000:]
    assert f"sessions handed over for the store {old} are not taken" in text, text[-3000:]
    assert not session_handoff_path(sb.kint_home, row["space"]).exists()
    with pytest.raises(KintError) as told:
        sb.call("attach", old, args={"session": "s", "watcher": True})
    assert told.value.code == "SPACE_CONFLICT", told.value.message
    assert f"served from the store {new}: {old} does not exist" in told.value.message
    assert "restart" in (told.value.hint or ""), told.value.hint
