"""A tenant whose worker dies at start every time (here a module it needs no longer
imports: tests/support/kint_test_faults.py's KINT_TEST_FAIL_START), on the real supervisor
beside a healthy tenant.

The supervisor restarts it, then quarantines it with a backoff rather than spin; the
QUARANTINED refusal and `kint supervisor status` (text and `--json`) give the reason the
worker failed with, not `exited with code 1` (its traceback was only in the daemon's raw
stderr); the other tenant's calls go on meanwhile; and `kint supervisor stop` during the
backoff stops it for good, no retry started after it.

Every failing worker's reason reaches the supervisor after its exit here, a little later
(the race the worker's message and its exit run, which the message lost once in a while,
made certain: kint_test_faults.py's KINT_TEST_LATE_FATAL, `soon`), and inside the time the
supervisor holds such an exit for its reason (kint/supervisor/exit_hold.py): the first
refusal, and the row read as soon as the retry is over, carry the reason all the same. The
hold is made long here (HOLD_S): the reason's sender is a process the box schedules, and a
stall of it past the default half second would test the box, not the hold; the default's
own hold, and a reason later than it: tests/test_worker_late_fatal.py.
"""

from __future__ import annotations

import json

import pytest

from conftest import make_sandbox, pid_alive, write_store
from kint.client import KintError
from kint.spaces import space_id
from kint.supervisor.pidlock import running_pid

REASON = "the worker could not start: ImportError: No module named 'kint_plugin_gone'"
# The quarantine's first backoff. The checks of the quarantine (two commands) run inside
# it, and the retried row is read inside the doubled one's first half. With 1 s a loaded
# box could outrun both: the second command could find the retry begun (a seventh start,
# a pid), and a row read a second after the retry found less than the first backoff left;
# the test failed once so at load 11, how exactly was not kept.
BACKOFF_S = 5
# The supervisor's hold of an exit for its reason (KINT_TEST_REASON_GRACE_S,
# tests/support/kint_test_timings.py): far over what the sender takes, so a loaded box never
# makes the reason late. Each exit waits for its reason, not the hold, which only bounds it.
HOLD_S = "10"


@pytest.fixture
def box(tmp_path):
    doomed_file, late = tmp_path / "fail-start", tmp_path / "late-fatal"
    late.write_text("soon")
    sb = make_sandbox(tmp_path / "machine", KINT_QUARANTINE_BACKOFF_SECONDS=str(BACKOFF_S),
                      KINT_TEST_FAIL_START=str(doomed_file), KINT_TEST_LATE_FATAL=str(late),
                      KINT_TEST_REASON_GRACE_S=HOLD_S)
    sb.start_entitled()
    good, bad = sb.profile_db("good"), sb.profile_db("broken")
    for db in (good, bad):
        db.parent.mkdir(parents=True)
        write_store(db, tenant=sb.tenant)
    doomed_file.write_text(space_id(sb.label(bad))[:16])
    yield sb, good, bad
    sb.shutdown()


def test_a_worker_that_never_starts_is_quarantined_with_its_reason_and_stops_on_command(box):
    sb, good, bad = box
    with pytest.raises(KintError) as err:
        sb.call("status", bad, timeout_s=20)
    assert err.value.code == "QUARANTINED", err.value
    assert REASON in err.value.message, err.value.message
    assert sb.call("status", good)["store"]["exists"]  # the other tenant, meanwhile

    out = sb.kint("supervisor", "status")
    assert out.returncode == 1, out.stdout
    space16 = space_id(sb.label(bad))[:16]
    assert f"last exit of {space16}: {REASON}" in out.stdout, out.stdout
    row = next(r for r in json.loads(sb.kint("supervisor", "status", "--json").stdout)
               ["spaces"] if r["store"] == str(bad))
    assert row["state"] == "quarantined" and row["last_exit"].startswith(REASON), row
    assert row["restarts"] == 6 and row["pid"] is None, row

    # Not a spin: one retry after the backoff, which then doubles.
    retried = sb.wait_for(lambda: (r := sb.row(bad))["restarts"] == 7
                          and r["state"] == "quarantined" and r, timeout=4 * BACKOFF_S,
                          what="the quarantine's retry")
    assert BACKOFF_S < retried["retry_in_s"] <= 2 * BACKOFF_S, retried
    assert retried["last_exit"].startswith(REASON), retried

    # A stop during the backoff is the end of it: no retry is started after it.
    pid = running_pid(sb.kint_home)
    out = sb.kint("supervisor", "stop")
    assert out.returncode == 0, out.stderr
    assert not pid_alive(pid)
    log = (sb.kint_home / "supervisor.log").read_text()
    after_stop = log[log.index("supervisor stopping"):]
    assert "spawned" not in after_stop and "quarantine retry" not in after_stop, after_stop
    assert "ImportError" in log  # the traceback is in the log, where its reason is said
