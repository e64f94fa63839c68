"""A client waiting on a request whose supervisor steps down (its pid file removed) looks, once
a second, for proof that the request reached it (kint/client_liveness.py `_reached`): the
socket file it connected to, or the note of the door that supervisor closed for its stop. The
door closes in two steps, the note written and then the socket file moved aside
(kint/supervisor/front_door_stop.py `close_for_stop`). A look that read the note first (none
yet, the socket file there) and the socket file after (moved meanwhile) found neither, and
dropped a request the supervisor had let in, saying it "may not have reached it" (review37a,
S2).

Real supervisor, worker and files: the request is an agent's `attach` held on the worker's pool
(KINT_TEST_HOLD_ATTACH), the door held between its two steps by the test supervisor
(KINT_TEST_HOLD_DOOR, tests/support/run_supervisor.py). One look's moment cannot be reached
from outside the client: the test wraps the real `read_stepped_down_note` the look calls, to let
the door go on as that read returns and give back what it read once the socket file has moved.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from conftest import make_sandbox, pid_alive, write_store
from support.attach_in_flight import attach_in_flight
from kint import client_liveness
from kint.client import Client
from kint.front_closed import CLOSED_SOCKET, FrontClosed
from kint.paths import run_dir
from kint.supervisor.pidlock import PID_FILE, running_pid


def test_a_look_as_the_door_closes_waits_on_the_request(tmp_path, monkeypatch):
    """The door held with its note written and its socket file still there: a look then
    takes the file as proof and waits on (with the fix's order it never reads the note
    there; the old order read no note, the door moved the file, and the look dropped the
    request), and once the door has closed the note proves it; the worker's reply arrives."""
    hold, door = tmp_path / "hold-attach", tmp_path / "hold-door"
    reached = Path(f"{door}.reached")
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_TEST_HOLD_DOOR=str(door), KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    client = Client(sb.kint_home, autostart=False)
    outcome: dict[str, Any] = {}
    looks: list[bool] = []
    moved = threading.Event()
    read = client_liveness.read_stepped_down_note

    def read_as_the_door_closes(folder: Path) -> FrontClosed | None:
        found = read(folder)
        if reached.exists() and door.exists():
            door.unlink()  # the door goes on: its socket file moved aside
            sb.wait_for(lambda: (folder / CLOSED_SOCKET).exists(), interval=0.01,
                        what="the socket file moved aside")
            moved.set()
        return found

    def look(pid: int) -> bool:
        looks.append(reached_now := real_reached(pid))
        return reached_now

    monkeypatch.setattr(client_liveness, "read_stepped_down_note", read_as_the_door_closes)
    real_reached = client._reached
    client._reached = look  # type: ignore[method-assign]
    pid = caller = None
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        pid = running_pid(sb.kint_home)
        assert pid is not None and pid > 0
        hold.touch()
        door.touch()
        caller = attach_in_flight(sb, outcome, client=client)
        folder = Path(client._connected[0]) if client._connected else None
        assert folder is not None
        (run_dir(sb.kint_home) / PID_FILE).unlink()
        sb.wait_for(reached.exists, what="the door held, its note written")
        assert not (folder / CLOSED_SOCKET).exists()
        seen = len(looks)
        # Two looks on: the second began after the first ended, so wholly in the hold.
        sb.wait_for(lambda: len(looks) >= seen + 2 or bool(outcome),
                    what="a look while the door is held")
        assert "error" not in outcome, outcome["error"].message
        assert not moved.is_set()  # the socket file there: no note was read
        door.unlink(missing_ok=True)
        sb.wait_for(lambda: client._reached_by == pid or bool(outcome),
                    what="a look that read the note of the closed door")
        assert "error" not in outcome, outcome["error"].message
        hold.unlink()
        caller.join(60)
        assert not caller.is_alive()
        assert "error" not in outcome, outcome["error"].message
        assert outcome["reply"]["sessions"] == 1, outcome
    finally:
        hold.unlink(missing_ok=True)
        door.unlink(missing_ok=True)
        if caller is not None:
            caller.join(60)  # closed under the caller's receive, libzmq aborts the process
        client.close()
        sb.shutdown()  # where it failed first; a no-op with its pid file gone
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
