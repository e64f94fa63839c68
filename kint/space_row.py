"""A space's row of the supervisor's status (`sup.status`), read by a client beside what the
space's worker answers.

The supervisor builds each row from what it holds (the worker's last beat, the requests it
keeps), so the read never waits on a worker. Clients read it for what a worker's answer
cannot carry: the progress line of the call a worker is still running
(`Client.progress_line`), whether a restore's pull runs (kint.agent_server.restore_wait),
and the requests parked on an exited worker's last replies (kint/supervisor/last_words.py),
which `kint status` and memory_status show beside the worker's status: the worker that
answers that status is never the one those requests wait for.

Its functions read (`read_space_row`, `read_parked`), named apart from the supervisor's
own that build the row (kint.supervisor.status `space_row`, `parked_requests`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kint.client_errors import KintError

if TYPE_CHECKING:
    from kint.client import Client

# The read's bound: the supervisor answers a status from memory, at once.
ROW_READ_S = 2.0


def read_space_row(client: "Client", space16: str) -> dict[str, Any] | None:
    """The row of the space `space16` in the status of the supervisor `client` talks to,
    None when it has none (a supervisor started since knows no request of the space).
    A status that cannot be read raises KintError."""
    rows = client.call("sup.status", timeout_s=ROW_READ_S)["spaces"]
    return next((r for r in rows if r["space"] == space16), None)


def read_parked(client: "Client", space16: str) -> list[dict[str, Any]] | None:
    """The space's requests that wait for the last replies of a worker that exited
    cleanly with them unanswered, as `kint supervisor status` names them (`parked`: each
    `op`, that worker's `pid`, `left_s` until it is answered without its reply); [] when
    none waits; None when the supervisor's status could not be read (its answer says
    nothing of them either way)."""
    try:
        row = read_space_row(client, space16)
    except KintError:
        return None
    return list(row.get("parked") or []) if row is not None else []
