"""A supervisor that ends its stop while a successor already serves its home leaves the
successor's socket file where clients find it.

The stopping supervisor moved its socket file aside as its stop began (its door closed
for the stop, kint/supervisor/front_door_stop.py), and a successor may bind a new file at
the socket's path before the old one's stop ends: the old one's pid file removed (`run/`
cleaned), the successor takes the home. The old one then closes its front socket and
ends its ZeroMQ context (daemon.close). Its listener was bound at that very path, and a
close of a bound ipc listener that unlinked its path (libzmq does so only for a wildcard
`ipc://*` endpoint's file, in the 4.x it ships with pyzmq) would take the successor's file
with it: every new client would then find no door while the successor runs.

Real parts: the test supervisor and its worker, the stop held by an `attach` on the
worker's pool (KINT_TEST_HOLD_ATTACH, tests/support/kint_test_faults.py), the successor a
second test supervisor. The old one is held (SIGSTOP) from its door's closing until the
successor serves, so its stop cannot end first on a loaded box.
"""

from __future__ import annotations

import os
import signal
import threading

from conftest import make_sandbox, pid_alive, write_store
from kint.client import Client, KintError
from kint.front_closed import CLOSED_SOCKET, read_note
from kint.socket_paths import FRONT_SOCKET, socket_dir
from kint.supervisor.ownership import file_id
from kint.supervisor.pidlock import running_pid
from support.attach_in_flight import attach_in_flight
from support.successor import take_over_while_held

HOLD = "KINT_TEST_HOLD_ATTACH"


def test_a_stop_that_ends_beside_a_successor_leaves_its_socket_file(tmp_path):
    hold = tmp_path / "hold-attach"
    sb = make_sandbox(tmp_path / "machine", **{HOLD: str(hold)},
                      KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    old = None
    try:
        sb.start_entitled()
        old = running_pid(sb.kint_home)
        assert old is not None and old > 0
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        hold.touch()
        attach_in_flight(sb, {}, timeout_s=90)  # holds the old one's stop: its worker's grace

        def stop() -> None:
            try:
                sb.call("sup.stop", timeout_s=60)
            except KintError:
                pass  # its answer is not what this test is about

        threading.Thread(target=stop, daemon=True).start()
        folder = socket_dir(sb.kint_home)

        def closed_for_the_stop() -> bool:
            """The note says the stop, then the socket file is moved aside: both done."""
            note = read_note(folder, old)
            return (note is not None and note.stopping and (folder / CLOSED_SOCKET).exists()
                    and not (folder / FRONT_SOCKET).exists())

        sb.wait_for(closed_for_the_stop, interval=0.02, what="the door closed for the stop")
        # The premise, held: nothing at the socket's path.
        take_over_while_held(sb, old, HOLD, premise=closed_for_the_stop)
        new = running_pid(sb.kint_home)
        front = socket_dir(sb.kint_home) / FRONT_SOCKET
        bound = file_id(front)
        assert bound is not None and pid_alive(old)  # the old one's stop has not ended
        hold.unlink()
        sb.wait_for(lambda: not pid_alive(old), timeout=60, what="the old supervisor's exit")
        assert file_id(front) == bound  # the successor's file, where the old one had bound
        with Client(sb.kint_home, autostart=False) as client:
            answer = client.ping_answer(5.0)
        assert answer is not None and answer.get("pid") == new, answer
    finally:
        hold.unlink(missing_ok=True)
        sb.shutdown()
        if old is not None and pid_alive(old):
            os.kill(old, signal.SIGKILL)
