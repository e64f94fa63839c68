"""An upgrade of kint on disk keeps the agent sessions, as a recycle of a worker does; a
stop on command ends them.

The supervisor that notices new code (kint/supervisor/code_watch.py) stops its workers
for an "upgrade": each hands its sessions over (kint/tenant_worker/session_handoff.py),
and the supervisor leaves its run id, with the spaces that had sessions, in
run/succession.json for the next one (kint/supervisor/succession.py). The next supervisor
starts those spaces' workers at once, and they take the files over. Before, the new
supervisor drew a new run id and its workers dropped every file: the sessions attached
again only at their next keepalive (up to a minute, without the watcher), and the drift
baseline, with what it had seen, was made anew from the store, so a row changed behind
Sibyl's tools before the upgrade was no longer flagged.

Real parts: the test supervisor and its workers, sessions attached through the worker's
own `attach` op (no keepalive follows: what a worker knows, it was handed), and for the
drift a space connected on the session's devchain. The "upgrade" moves a watched file's
mtime forward in the machine's own copy of kint (conftest.kint_copy), as
tests/test_upgrade.py does, and puts it back before the next start.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import orjson
import pytest

from chain_machines import new_machine, ok
from conftest import Sandbox, kint_copy, make_sandbox, write_store
from kint.boot import boot_id
from kint.paths import session_handoff_path
from kint.supervisor.pidlock import running_pid
from kint.supervisor.succession import succession_path, take_up
from kint.tenant_worker.space import SESSION_TTL_S
from test_recycle_sessions import FromNow
from test_worker_recycle import QUICK

# The supervisor looks at kint's installed files at each housekeeping (5 s by default):
# every quarter second here (tests/support/kint_test_timings.py), so each upgrade is seen
# within a quarter second of the file's change instead of up to five.
UPGRADE_QUICK = {**QUICK, "KINT_TEST_HOUSEKEEPING_S": "0.25"}


def _own_kint(root: Path) -> dict[str, str]:
    """The environment that has a machine at `root` run (and watch) a copy of kint of its
    own: its upgrade is seen by it alone, neither by the checkout nor by the tests beside."""
    return {"PYTHONPATH": str(kint_copy(root / "code").parent)}


def _watched(sb: Sandbox) -> Path:
    """The file of `sb`'s own copy of kint that its upgrade moves."""
    for folder in sb.env["PYTHONPATH"].split(os.pathsep):
        if (Path(folder) / "kint").is_dir():
            return Path(folder) / "kint" / "protocol" / "envelope.py"
    raise AssertionError(f"no copy of kint on {sb.env['PYTHONPATH']}")


def _upgrade_and_start_again(sb: Sandbox) -> int:
    """Make the running supervisor see new code, wait for it to exit, put the file back and
    start the next one (as the next call or a service manager would). The log's length
    before the new start, so that a test reads what the new supervisor wrote."""
    watched = _watched(sb)
    st = watched.stat()
    try:
        os.utime(watched, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        sb.wait_for(lambda: running_pid(sb.kint_home) is None, timeout=60, interval=0.2,
                    what="the supervisor to exit for the upgrade")
    finally:
        os.utime(watched, ns=(st.st_atime_ns, st.st_mtime_ns))
    log = (sb.kint_home / "supervisor.log").read_text()
    assert "kint's installed files changed (an upgrade)" in log, log[-3000:]
    before = len(log)
    sb.start_entitled()
    return before


def _row(sb: Sandbox) -> dict | None:
    """The store's row in `sup.status`, or None while the supervisor has no such space."""
    rows = [r for r in sb.sup_status()["spaces"] if r["store"] == str(sb.sibyl_db)]
    return rows[0] if rows else None


def _new_log(sb: Sandbox, since: int) -> str:
    return (sb.kint_home / "supervisor.log").read_text()[since:]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """The test supervisor over the default store, no chain, for the two tests below (the
    first leaves it with no session attached; the second stops it)."""
    root = tmp_path_factory.mktemp("upgrade-sessions") / "m"
    sb = make_sandbox(root, **UPGRADE_QUICK, **_own_kint(root))
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        yield sb
    finally:
        sb.shutdown()


def test_sessions_attached_before_an_upgrade_are_attached_after_it(machine):
    """No request is made on the space after the upgrade: the new supervisor starts its
    worker because its sessions were handed on, and that worker counts them and runs
    their watcher with the newest session's poll, without a keepalive."""
    sb = machine
    for sid, poll in (("one", "600"), ("two", "700")):
        sb.call("attach", sb.sibyl_db, args={"session": sid, "watcher": True,
                                             "settings": {"KINT_POLL_SECONDS": poll}})
    first = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["sessions"] == 2 and r,
                        timeout=20, what="the beat to count both sessions")
    since = _upgrade_and_start_again(sb)
    row = sb.wait_for(lambda: (r := _row(sb)) and r["pid"] not in (None, first["pid"])
                      and r["sessions"] == 2 and r, timeout=30, interval=0.2,
                      what="the new supervisor's worker, with both sessions")
    assert row["state"] == "ready" and row["restarts"] == 0, row
    old_log = (sb.kint_home / "supervisor.log").read_text()[:since]
    assert "2 session(s) handed to the next worker" in old_log, old_log[-3000:]
    assert "(commanded: upgrade)" in old_log and "crash" not in old_log.lower()
    new = _new_log(sb, since)
    assert "took over from supervisor run" in new, new
    assert "2 session(s) taken over from the worker before this one" in new, new
    sb.wait_for(lambda: "poll 700s (kint-server session)" in _new_log(sb, since),
                what="the new worker's watcher, with the newest session's poll")
    assert not session_handoff_path(sb.kint_home, row["space"]).exists()
    assert not succession_path(sb.kint_home).exists()  # read once
    assert sb.call("detach", sb.sibyl_db, args={"session": "one"})["sessions"] == 1
    assert sb.call("detach", sb.sibyl_db, args={"session": "two"})["sessions"] == 0


def test_a_stop_on_command_then_a_start_takes_no_session(machine):
    """`kint supervisor stop` ends the sessions: its workers hand nothing over and it
    leaves no run id, so the next start has the space's worker count none."""
    sb = machine
    sb.call("attach", sb.sibyl_db, args={"session": "s", "watcher": True})
    space16 = sb.wait_for(lambda: (r := sb.row(sb.sibyl_db))["sessions"] == 1 and r,
                          timeout=20, what="the session counted")["space"]
    sb.shutdown()  # sup.stop, as `kint supervisor stop` sends it
    assert not session_handoff_path(sb.kint_home, space16).exists()
    assert not succession_path(sb.kint_home).exists()
    since = len((sb.kint_home / "supervisor.log").read_text())
    sb.start_entitled()
    assert not any(r["store"] == str(sb.sibyl_db) for r in sb.sup_status()["spaces"])
    sb.call("status", sb.sibyl_db, timeout_s=60)
    assert sb.row(sb.sibyl_db)["sessions"] == 0
    new = _new_log(sb, since)
    assert "took over from supervisor run" not in new and "taken over" not in new, new


def test_a_session_attached_after_the_last_beat_is_handed_on_across_an_upgrade(tmp_path):
    """The supervisor learns of sessions from the beats, and an upgrade can come between
    an attach's answer and the first beat that counts it. A space whose last beat is older
    than its last work is handed on all the same (kint/supervisor/daemon.py,
    `begin_shutdown`): the next supervisor starts its worker at once, which takes the
    session. Without it, the space was left to its next request.

    Made certain as in tests/test_idle_with_session.py: the attach starts the worker, whose
    first beat goes out before it reads the attach and its next 3 s later
    (KINT_TEST_BEAT_SECONDS), while the supervisor looks at kint's files every quarter
    second: the upgrade is seen, and the spaces to hand on chosen, on the beat from before
    the attach."""
    sb = make_sandbox(tmp_path / "m", **{**UPGRADE_QUICK, "KINT_TEST_BEAT_SECONDS": "3"},
                      **_own_kint(tmp_path / "m"))
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        attached = sb.call("attach", sb.sibyl_db, timeout_s=60,
                           args={"session": "late", "watcher": False})
        assert attached["sessions"] == 1, attached
        first = sb.row(sb.sibyl_db)
        since = _upgrade_and_start_again(sb)
        old_log = (sb.kint_home / "supervisor.log").read_text()[:since]
        assert "1 session(s) handed to the next worker" in old_log, old_log[-3000:]
        row = sb.wait_for(lambda: (r := _row(sb)) and r["pid"] not in (None, first["pid"])
                          and r["sessions"] == 1 and r, timeout=30, interval=0.2,
                          what="the new supervisor's worker, with the session")
        assert row["state"] == "ready" and row["restarts"] == 0, row
        new = _new_log(sb, since)
        assert f"started the worker of {first['space']}" in new, new
        assert "1 session(s) taken over from the worker before this one" in new, new
    finally:
        sb.shutdown()


def test_a_drift_seen_before_an_upgrade_is_flagged_after_it(tmp_path, chain_home):
    """A row of a connected space changed behind Sibyl's tools while a session was
    attached: `status` holds the push before the upgrade, and after it still, as the new
    worker took over the baseline the session's attach made."""
    sb = new_machine(tmp_path / "drift", chain_home, **UPGRADE_QUICK,
                     **_own_kint(tmp_path / "drift"))
    try:
        write_store(sb.sibyl_db, tenant=sb.tenant)
        ok(sb.kint("connect", "--dev"))
        ok(sb.kint("push"))
        sb.call("attach", sb.sibyl_db, args={"session": "s", "watcher": False})
        write_store(sb.sibyl_db, {"release-gate": {"rule": "always ship on a Friday"}},
                    tenant=sb.tenant)
        held = sb.call("status", sb.sibyl_db, timeout_s=60, args={"chain": True})["held"]
        assert held and "changed behind Sibyl's tools" in held["message"], held
        sb.wait_for(lambda: sb.row(sb.sibyl_db)["sessions"] == 1, timeout=20,
                    what="the beat to count the session")

        since = _upgrade_and_start_again(sb)
        after = sb.call("status", sb.sibyl_db, timeout_s=60, args={"chain": True})["held"]
        assert after and "changed behind Sibyl's tools" in after["message"], after
        assert "rules/release-gate" in after["message"], after
        new = _new_log(sb, since)
        assert "1 session(s) taken over from the worker before this one" in new, new
    finally:
        sb.shutdown()


def _plant(home: Path, **changes) -> Path:
    path = succession_path(home)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = {"version": 1, "run": "ab" * 8, "boot_id": boot_id(),
              "written_mono": time.monotonic(), "spaces": ["cd" * 32]}
    record.update({k: time.monotonic() + v.seconds if isinstance(v, FromNow) else v
                   for k, v in changes.items()})
    path.write_bytes(orjson.dumps(record))
    return path


@pytest.mark.parametrize("changes", [
    {},
    {"boot_id": "an-earlier-boot"},
    {"written_mono": FromNow(-SESSION_TTL_S - 5)},
    {"written_mono": FromNow(60)},
    {"run": "not a run id"},
    {"spaces": ["cd" * 8]},
    {"version": 2},
], ids=lambda c: ",".join(f"{k}={v!r}" for k, v in c.items()) or "as-written")
def test_a_succession_record_is_read_once_and_only_when_fresh(tmp_path, changes):
    """Another boot's record, a stale one, or one not as a supervisor writes it, is
    dropped; any is removed once read, so a second start takes nothing."""
    home = tmp_path / "kint"
    path = _plant(home, **changes)
    got = take_up(home)
    assert not path.exists()
    if changes:
        assert got is None
    else:
        assert got is not None and got.run == "ab" * 8 and got.spaces == ("cd" * 32,)
    assert take_up(home) is None


def test_a_succession_record_is_the_users_alone(tmp_path):
    from kint.supervisor.succession import hand_on

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    hand_on(home, "ab" * 8, ["cd" * 32])
    assert stat.S_IMODE(succession_path(home).stat().st_mode) == 0o600
    assert stat.S_IMODE(succession_path(home).parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("how", ["sup.stop", "signal"])
def test_a_stop_during_an_upgrades_drain_hands_nothing_on(tmp_path, how):
    """kint was upgraded, and the supervisor waits for the requests in flight before it
    stops its workers for the upgrade; a `kint supervisor stop` (or SIGTERM, as systemd's
    stop sends) meanwhile ends the sessions: the workers are stopped for a "stop" and no
    run id is left to the next supervisor; and the process exits 0, as a stop does, not
    the upgrade's 75 that the units in deploy/ restart (tests/test_upgrade.py sends the
    signal to a real one)."""
    from types import SimpleNamespace

    from kint.supervisor.code_watch import EXIT_UPGRADED
    from kint.supervisor.commands import COMMANDS
    from kint.supervisor.daemon import Supervisor
    from kint.supervisor.settings import Settings

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    sup = Supervisor(home, Settings.load())
    try:
        sup.upgraded, sup.exit_code = True, EXIT_UPGRADED
        assert sup._handing_on() and sup.process_exit_code == EXIT_UPGRADED
        if how == "signal":
            sup.request_stop()
        else:
            COMMANDS["sup.stop"](sup, b"client", SimpleNamespace(id="r1", args={}))
        assert not sup._handing_on()
        assert sup.process_exit_code == 0
    finally:
        sup.close()


def test_a_step_down_during_an_upgrades_drain_exits_75_when_a_stop_follows(tmp_path):
    """Its pid file removed during an upgrade's drain, the supervisor steps down (a stop
    that hands nothing on); a SIGTERM during that stop leaves the exit the step-down's 75,
    as without the upgrade. It exited 0: the step-down was told from the upgrade by the
    exit code, and both are 75 (tests/test_upgrade.py drives it on a real one)."""
    from kint.paths import run_dir
    from kint.supervisor.code_watch import EXIT_UPGRADED
    from kint.supervisor.daemon import Supervisor
    from kint.supervisor.housekeeping import EXIT_STEPPED_DOWN
    from kint.supervisor.ownership import Ownership
    from kint.supervisor.pidlock import PID_FILE, hold_pid_lock
    from kint.supervisor.settings import Settings

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    run_dir(home).mkdir(mode=0o700)
    fd = hold_pid_lock(home)
    sup = Supervisor(home, Settings.load(), ownership=Ownership(run_dir(home) / PID_FILE, fd))
    try:
        sup.upgraded, sup.exit_code = True, EXIT_UPGRADED
        assert sup._handing_on() and sup.process_exit_code == EXIT_UPGRADED
        (run_dir(home) / PID_FILE).unlink()
        sup._check_ownership()
        assert sup.stepped_down and sup.shutting_down and not sup._handing_on()
        sup.request_stop()
        assert sup.process_exit_code == EXIT_STEPPED_DOWN
    finally:
        sup.close()
        os.close(fd)
