"""A worker's reason read after its exit, later than the supervisor holds the exit for it.

A worker that cannot start sends its reason (`fatal`) and exits EXIT_FATAL. The message can
reach the supervisor after the exit (the race test_worker_start_failure met once): the
supervisor holds such an exit, up to its grace, for the reason (kint/supervisor/
exit_hold.py; test_worker_start_failure has the reason come inside it). One later still,
on a loaded box, comes once the exit is handled as `exited with code 3` and the route
retired (kint/supervisor/last_words.py): with the retired worker's token and pid it puts its reason
where the bare exit was, while the space is where that exit left it (here, quarantined).

The race cannot be had on demand, so the test worker's reason is made late every time:
tests/support/kint_test_faults.py's KINT_TEST_LATE_FATAL has the worker exit without it,
and a child it forked sends it, on the worker's route with its token and pid, once the
supervisor has logged the exit (so after the hold). The supervisor and workers are real.
Each child waits, besides, while the test's hold file stands, so all six are alive when
the space is quarantined: none holds the space's worker lock (a respawn would wait behind
it). With the file saying `impostor`, the child sends first the same message under a wrong
token (the route and pid right): it must change nothing.
"""

from __future__ import annotations

import json

import pytest

from conftest import make_sandbox, write_store
from kint.client import KintError
from kint.paths import worker_lock_path
from kint.spaces import space_id
from kint.supervisor.exit_hold import REASON_GRACE_S
from kint.tenant_worker.worker_lock import held_at

REASON = ("the worker could not start: ImportError: No module named 'kint_plugin_gone' "
          "(a test's broken module)")
# What the impostor's message says (tests/support/kint_test_faults.py, not imported here:
# importing it patches kint in this process).
FORGED_REASON = "forged by an impostor"
# The quarantine's first backoff: every check below runs inside it, no retry meanwhile.
BACKOFF_S = 60


@pytest.fixture(params=["late", "impostor"])
def box(request, tmp_path):
    doomed, late = tmp_path / "fail-start", tmp_path / "late-fatal"
    sb = make_sandbox(tmp_path / "machine", KINT_QUARANTINE_BACKOFF_SECONDS=str(BACKOFF_S),
                      KINT_TEST_FAIL_START=str(doomed), KINT_TEST_LATE_FATAL=str(late))
    sb.start_entitled()
    bad = sb.profile_db("broken")
    bad.parent.mkdir(parents=True)
    write_store(bad, tenant=sb.tenant)
    doomed.write_text(space_id(sb.label(bad))[:16])
    late.write_text(request.param)
    hold = tmp_path / "late-fatal.hold"  # the senders wait while it stands
    hold.touch()
    yield sb, bad, request.param, hold
    hold.unlink(missing_ok=True)
    sb.shutdown()


def quarantined(sb, db, timeout_s: float = 10) -> KintError:
    """The refusal a call for `db`'s space gets."""
    with pytest.raises(KintError) as err:
        sb.call("status", db, timeout_s=timeout_s)
    assert err.value.code == "QUARANTINED", err.value
    return err.value


def test_a_reason_read_after_the_exit_is_the_quarantines_and_the_status(box):
    sb, bad, kind, hold = box
    space16 = space_id(sb.label(bad))[:16]
    # The refusal made at the exit, before the late words come, says the bare exit (the
    # hold's grace passed without them).
    first = quarantined(sb, bad, timeout_s=30).message
    assert "last exit: exited with code 3;" in first, first
    # Six senders wait, and the space's worker lock is free: each respawn took it at once.
    assert held_at(worker_lock_path(sb.kint_home, space16)) is False
    hold.unlink()
    row = sb.wait_for(lambda: (r := sb.row(bad))["last_exit"] == REASON and r, timeout=15,
                      what="the worker's reason as the last exit")
    assert row["state"] == "quarantined" and row["restarts"] == 6, row
    message = quarantined(sb, bad).message
    assert f"last exit: {REASON};" in message, message

    assert f"last exit of {space16}: {REASON}" in sb.kint("supervisor", "status").stdout
    # Every exit but the quarantining one was followed by a restart: those late words
    # came after the space moved on, and were only logged (the senders run side by side:
    # the last five may be read in any order).
    log = sb.wait_for(lambda: (text := (sb.kint_home / "supervisor.log").read_text())
                      .count("read after the space moved on") == 5 and text, timeout=15,
                      what="the five earlier workers' late words")
    assert log.count("read after its exit") == 1, log
    # Each exit held the default's time (no KINT_TEST_REASON_GRACE_S here), then handled:
    # the sender waits for the exit's line, so the hold's end, however slow the box.
    assert log.count(f"did not come within {REASON_GRACE_S:.1f}s") == 6, log
    assert FORGED_REASON not in json.dumps(row) and FORGED_REASON not in log
    if kind == "impostor":
        assert f"the token of space {space16}'s worker is missing or wrong" in log, log
