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

# Seconds each file took run alone (`pytest -p no:xdist`, pytest's own figure without its
# start, or its tests' set-ups, calls and tear-downs summed) on the two-core box beside other
# work, session 38: the files of ten tests or fewer among CI's slowest, and the files of one
# or two tests (the end of xdist's order) of about 20 s or more. The figures only rank them.
LONG_FILES: dict[str, float] = {
    "test_exit_push_deadline.py": 79,
    "test_watcher_uncounted.py": 78,
    "test_hermes_agent.py": 72,
    "test_exit_push_bound.py": 60,
    "test_exit_push_settlement_cut.py": 46,
    "test_supervisor_status_unanchored.py": 44,
    "test_watcher_push_settings_shown.py": 43,
    "test_watcher_backoff.py": 34,
    "test_setup_clients.py": 30,
    "test_no_watcher_timings.py": 29,
    "test_doctor_call_cap.py": 26,
    "test_client_reply_at_deadline.py": 26,
    "test_salted_vault.py": 23,
    "test_cold_start.py": 20,
    "test_leaked_header_discard.py": 20,
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
