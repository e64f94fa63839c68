"""The order a run hands its test files to the pytest-xdist workers: the files known to take
longest first, then the rest as pytest-xdist would order them (most tests first).

`--dist loadfile` gives a file's tests to one worker, a file at a time as a worker runs
low. pytest-xdist orders the files by their number of tests, most first, so the files of a
few long tests, each waiting out a real timeout (an exit push's request TIMEOUT, a
watcher's backoff, doctor's cap on a call, a beat's recount, a real agent's session), came
last: the run ended with a worker or two on those files while the others had nothing left,
the two cores mostly idle. Longest first is the usual cure for jobs of known lengths: the
long waits overlap the other files' CPU work, and the run ends on short files. (Files of
many tests, long in all, come early in xdist's order already.)

Only the order changes: every file and test runs as before, a file's tests together and in
their own order (the sort is stable), so its module fixtures are made once, as before. A
figure gone stale costs some of the gain, never a result; a file renamed or removed is
simply not found (tests/test_file_order.py says so, so the table stays true).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

# Seconds each file's tests took in session 39's whole-suite runs (`-n 4 --dist loadfile`,
# the box shared with other lanes' work at load 10-15; pytest's windows from a file's first
# test to the next file's, the second run's figure scaled by its load to the first's and
# averaged with it): the files of ten tests or fewer of about 35 s or more, the files of one
# or two tests (the end of xdist's order) of about 20 s or more, and session 38's. Taken
# late, a file of a few long tests ended a run with the other workers idle; the figures only
# rank them.
LONG_FILES: dict[str, float] = {
    "test_pending_rotated_elsewhere.py": 120,
    "test_chain_e2e.py": 105,
    "test_wheel.py": 103,
    "test_chain_settings_refused.py": 94,
    "test_reanchor_resume.py": 90,
    "test_exit_push_deadline.py": 73,
    "test_archive_locked.py": 71,
    "test_session_keepalive.py": 66,
    "test_mcp_restore.py": 64,
    "test_setup_clients.py": 60,
    "test_mcp_faults.py": 59,
    "test_devchain_home_id.py": 55,
    "test_call_switches.py": 53,
    "test_dogfood20.py": 49,
    "test_pull_disk_full.py": 49,
    "test_settings_chain.py": 49,
    "test_authorize_other_contract.py": 48,
    "test_typo_binding.py": 48,
    "test_join_as_new_user.py": 45,
    "test_parked_requests.py": 45,
    "test_secrets_stay_secret.py": 44,
    "test_setup_clients_broken.py": 44,
    "test_watcher_look_wake.py": 43,
    "test_exit_push_bound.py": 42,
    "test_upgrade.py": 41,
    "test_many_clients.py": 39,
    "test_dogfood21.py": 38,
    "test_room_settling.py": 38,
    "test_start_beside_silent.py": 38,
    "test_previous_layout_other_contract.py": 36,
    "test_exit_push_settlement_cut.py": 34,
    "test_watcher_uncounted.py": 34,
    "test_salted_vault.py": 29,
    "test_supervisor_status_unanchored.py": 29,
    "test_watcher_push_settings_shown.py": 29,
    "test_doctor_call_cap.py": 28,
    "test_hermes_agent.py": 24,
    "test_watcher_backoff.py": 24,
    "test_session_key_rotation.py": 23,
    "test_cold_start.py": 22,
    "test_no_watcher_timings.py": 21,
    "test_client_reply_at_deadline.py": 19,
    "test_leaked_header_discard.py": 15,
}


def file_rank(counts: Counter[str]) -> dict[str, tuple[float, int]]:
    """Each file's place (lower first): a long file by its seconds, longest first, before
    every other file; the others by their number of tests, most first (xdist's own order),
    files of as many tests in the order pytest collected them (the sort is stable)."""
    return {path: ((0, -LONG_FILES[Path(path).name]) if Path(path).name in LONG_FILES
                   else (1, -count))
            for path, count in counts.items()}


def keep_collected_order(config: pytest.Config) -> None:
    """The xdist controller keeps the order the workers collected (below), where its own
    `--loadscope-reorder` (on by default) sorts the files by their number of tests; called
    from the session's pytest_configure (support/run_hooks.py)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The collected tests, long files first (each xdist worker collects, and sorts, the
    same list: the sort depends on the tests' ids alone)."""
    counts = Counter(item.nodeid.split("::", 1)[0] for item in items)
    rank = file_rank(counts)
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])
