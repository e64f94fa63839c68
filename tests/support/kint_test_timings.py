"""Preloaded into the worker forkserver by the test supervisor (run_supervisor.py): lets a
test shorten a worker's fixed timing that no setting reaches, so that it waits seconds
where a user's worker waits its default, and nothing else changes.

- `KINT_TEST_RECOUNT_INTERVAL_S` (set only by tests): the least time between two recounts
  of a space's unanchored rows for the heartbeat
  (`kint.tenant_worker.unanchored.RECOUNT_MIN_INTERVAL_S`, 5 s). Its other bound, a multiple
  of the last recount's duration, stays as it is.

Unset, nothing changes; kint's own code reads none of this.
"""

from __future__ import annotations

import os

RECOUNT_ENV = "KINT_TEST_RECOUNT_INTERVAL_S"


def _install() -> None:
    value = os.environ.get(RECOUNT_ENV)
    if value:
        from kint.tenant_worker import unanchored

        unanchored.RECOUNT_MIN_INTERVAL_S = float(value)


_install()
