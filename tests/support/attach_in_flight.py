"""An agent session's `attach` sent on a thread of its own and held on the worker's pool
(KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py), for tests that stop or restart
a worker with a request in flight (tests/test_worker_late_reply.py,
tests/test_parked_requests.py).
"""

from __future__ import annotations

import threading
from typing import Any

from kint.client import Client, KintError


def attach_in_flight(sb: Any, outcome: dict[str, Any], timeout_s: float = 90,
                     client: Client | None = None, watcher: bool = False) -> threading.Thread:
    """Send `attach` (session `agent-1`, asking for the store watcher if `watcher`) for the
    sandbox `sb`'s store on a thread, and return it once the worker runs it; its result
    goes to `outcome["reply"]`, its refusal to `outcome["error"]`. `client`: the one to
    send it on, for a test that looks at that client while it waits (else a client of the
    call's own)."""

    def attach() -> None:
        args = {"session": "agent-1", "watcher": watcher}
        try:
            if client is None:
                outcome["reply"] = sb.call("attach", sb.sibyl_db, timeout_s=timeout_s,
                                           args=args)
            else:
                outcome["reply"] = client.call(
                    "attach", tenant=sb.tenant, db=str(sb.sibyl_db),
                    space=sb.label(sb.sibyl_db), timeout_s=timeout_s, args=args)
        except KintError as err:
            outcome["error"] = err

    caller = threading.Thread(target=attach, daemon=True)
    caller.start()
    sb.wait_for(lambda: (sb.row(sb.sibyl_db).get("ops_running") or 0) >= 1,
                what="the attach in flight")
    return caller
