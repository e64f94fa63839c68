"""What every test gets, autouse: the real home untouched (checked at the session's
end), Sibyl's network guard (a test that tried to leave 127.0.0.1 fails even if it
swallowed the refusal), and kint.settings' process-wide state put back after it.
"""

from __future__ import annotations

import shutil

import pytest
from sibyl_memory_client import testing as sibyl_testing

from support.run_env import SESSION_ROOT
from support.settings_kept import settings_kept


@pytest.fixture(scope="session", autouse=True)
def real_home_untouched():
    before = sibyl_testing.real_home_snapshot()
    yield
    changed = sibyl_testing.real_home_changes(before)
    shutil.rmtree(SESSION_ROOT, ignore_errors=True)
    assert not changed, f"tests changed the real home: {changed}"


@pytest.fixture(autouse=True)
def network_guard(monkeypatch):
    sibyl_testing.assert_home_is_not_real()
    sibyl_testing.forbid_external_network(monkeypatch)
    start = len(sibyl_testing.refused_connections())
    yield
    sibyl_testing.assert_no_external_attempts(start)


@pytest.fixture(autouse=True)
def settings_process_kept():
    """kint.settings' process-wide state (what this process is: a command's or the daemon's)
    as it was before the test: a Supervisor built in-process marked the test process the
    daemon's for every later test of its xdist worker (tests/support/settings_kept.py)."""
    with settings_kept():
        yield
