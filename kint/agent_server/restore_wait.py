"""A restore (`memory_pull` with `discard_local`) still running in the space's worker after
the tool call answered.

A restore moves the store aside and rebuilds it, which can take longer than any client
waits for a tool call (Codex gives up at the `tool_timeout_sec` `kint setup` writes, 180 s;
Hermes at 120 s). The call once waited for it up to 30 minutes, so the client gave up on it
and every later tool call waited behind it. Now it answers within the bound every kint tool
keeps (kint.agent_server.tools.TOOL_WAIT_S) with RESTORE_RUNNING, and the server keeps its
client closed, so nothing opens the store under the restore, until the worker no longer
runs that pull. Each later tool call looks (kint.agent_server.wrapped_client): the tools
that need the store are refused RESTORE_RUNNING meanwhile, the others are served, and the
first call after the restore ends opens the store again.

Whether the pull still runs is read from the supervisor's status (the worker's last beat:
its oldest op in flight and how long ago it began), which never waits on the worker. A
pull begun after the call was sent is the restore (or a later pull, which the store must
not be opened under either). A status that cannot be read says "still running": the next
look asks again, and a supervisor that died took its worker, and the restore, with it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from kint.client import PROGRESS_AGE_SLACK_S, Client, KintError

log = logging.getLogger("kint.server")

RESTORE_RUNNING = "RESTORE_RUNNING"
RESTORE_RUNNING_HINT = ("call memory_status in a minute: `restore_running` says whether it "
                        "still runs; until it ends, Sibyl's tools, memory_verify and "
                        "memory_push answer RESTORE_RUNNING, and the first call after it "
                        "opens the restored store")


class RestoreUnderWay:
    """One restore the server stopped waiting for: `sent_at` is time.monotonic() when its
    call was sent to the worker."""

    def __init__(self, home: Path, space16: str, sent_at: float) -> None:
        self.home, self.space16, self.sent_at = home, space16, sent_at

    def message(self) -> str:
        return (f"a memory_pull with discard_local began "
                f"{int(time.monotonic() - self.sent_at)} s ago and is still restoring the "
                f"store in the space's worker; this server opens the store when it ends")

    def running(self) -> bool:
        """Whether the space's worker still runs a pull begun since the call was sent."""
        client = Client(self.home, autostart=False)
        try:
            rows = client.call("sup.status", timeout_s=2)["spaces"]
        except KintError as err:
            log.info("the restore's state is unknown (%s); still treated as running",
                     err.message)
            return True
        finally:
            client.close()
        row = next((r for r in rows if r["space"] == self.space16), None)
        if row is None or row.get("uptime_s") is None:  # no worker runs it any more
            return False
        op = row.get("op") or {}
        return (op.get("name") == "pull" and op.get("age_s") is not None
                and op["age_s"] <= time.monotonic() - self.sent_at + PROGRESS_AGE_SLACK_S)
