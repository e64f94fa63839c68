"""The state kint.settings keeps for the whole process, saved before a test and put back
after it (tests/support/hermetic.py's autouse `settings_process_kept`).

Why: `kint.settings.configure` says what the process is, once, at the start of a supervisor
or a worker. A test that builds a `Supervisor` in-process (tests/test_upgrade_sessions.py)
runs that in the test process, which then read as the daemon's for every later test of the
same xdist worker: the environment said "the supervisor's environment" where a command's
says "this call", complaints were the daemon's, and which test saw it
depended on the order the worker ran files in. Put back here: `loader._process` (what the
process is, the config watches, the warnings given once), the daemon's shared view of the
settings, and `complaints`' own copy of "the daemon" and the lines it printed once.

Cheap: a handful of attributes and shallow copies of two small sets and a dict, per test.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from kint.settings import complaints, loader


def _copy(value: Any) -> Any:
    """A container the code fills in place (the watches, the warnings given) as a copy of
    its own, so what a test adds is not in the one put back."""
    return value.copy() if isinstance(value, (dict, set, list)) else value


@contextmanager
def settings_kept() -> Iterator[None]:
    """Run the block, then put kint.settings' process-wide state back as it was."""
    process = loader._process
    with process.lock:
        saved = {name: _copy(value) for name, value in vars(process).items()
                 if name != "lock"}
    view = loader._shared_view
    in_daemon, printed = complaints.in_daemon, set(complaints.printed)
    try:
        yield
    finally:
        with process.lock:
            for name, value in saved.items():
                setattr(process, name, value)
        loader._shared_view = view
        complaints.in_daemon, complaints.printed = in_daemon, printed
