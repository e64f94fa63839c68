"""A client waiting on a request looks, once a second, whether the supervisor holding it is still
there (kint/client_liveness.py `_check_serving`). A supervisor that stops answers what its
workers run, then removes its moved socket and its note (kint/supervisor/front_door_stop.py
`shut`) and exits. A look in the gap after the reply was forwarded found no socket file, no note
(or no process), dropped the socket with the reply queued on it, and said the request "may not
have reached it" or that the supervisor "exited before answering": a request that was
answered, reported as unknown (race37, a fresh-clone run of
tests/test_dogfood19.py::test_a_stop_lets_the_request_its_worker_runs_answer under load).

Real supervisor, worker and files: the request is an agent's `attach` held on the worker's pool
(KINT_TEST_HOLD_ATTACH) until the stop has begun. The gap between a receive that timed out and
the look after it cannot be reached from outside the client: the test wraps the client's real
`_check_serving` in the test process, to hold the look until the supervisor has exited with the
reply queued on the socket (which the wrapper sees with a poll, taking nothing), then looks.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import zmq

from conftest import make_sandbox, pid_alive, write_store
from support.attach_in_flight import attach_in_flight
from kint.client import Client, KintError
from kint.front_closed import CLOSED_SOCKET
from kint.supervisor.pidlock import running_pid


def test_a_reply_queued_as_the_supervisor_exits_is_taken(tmp_path):
    """The look held until the stopping supervisor forwarded the worker's reply and exited:
    the reply on the socket is the call's answer (before, the look dropped the socket with
    it and refused the call, saying the supervisor exited before answering)."""
    hold = tmp_path / "hold-attach"
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_HOLD_ATTACH=str(hold),
                      KINT_WORKER_HEARTBEAT_TIMEOUT="60")
    client = Client(sb.kint_home, autostart=False)
    outcome: dict[str, Any] = {}
    stopped: dict[str, Any] = {}
    armed, held, gone = threading.Event(), threading.Event(), threading.Event()
    real_check = client._check_serving

    def held_look(serving: int | None, op: str) -> int:
        if armed.is_set() and not held.is_set():
            held.set()
            assert gone.wait(120), "the supervisor did not exit"
            assert client._sock is not None
            assert client._sock.poll(60_000, zmq.POLLIN), "no reply came before the look"
        return real_check(serving, op)

    def stop() -> None:
        try:
            stopped["reply"] = sb.call("sup.stop", timeout_s=90)
        except KintError as err:
            stopped["error"] = err

    client._check_serving = held_look  # type: ignore[method-assign]
    pid = caller = stopper = None
    try:
        sb.start_entitled()
        write_store(sb.sibyl_db, tenant=sb.tenant)
        sb.call("status", sb.sibyl_db, timeout_s=60)
        pid = running_pid(sb.kint_home)
        assert pid is not None and pid > 0
        hold.touch()
        caller = attach_in_flight(sb, outcome, client=client)
        folder = Path(client._connected[0]) if client._connected else None
        assert folder is not None
        armed.set()
        sb.wait_for(lambda: held.is_set() or bool(outcome), what="a look held")
        assert not outcome, outcome
        stopper = threading.Thread(target=stop, daemon=True)
        stopper.start()
        # The stop has begun (its door closed) before the worker may answer: else the reply
        # would come while the supervisor still serves, and the look would find it there.
        sb.wait_for(lambda: (folder / CLOSED_SOCKET).exists(), what="the door closed")
        hold.unlink()
        sb.wait_for(lambda: not pid_alive(pid), timeout=90, what="the supervisor exited")
        gone.set()
        caller.join(60)
        assert not caller.is_alive()
        assert "error" not in outcome, outcome["error"].message
        assert outcome["reply"]["sessions"] == 1, outcome
    finally:
        hold.unlink(missing_ok=True)
        gone.set()
        if caller is not None:
            caller.join(60)  # closed under the caller's receive, libzmq aborts the process
        if stopper is not None:
            stopper.join(60)
        client.close()
        sb.shutdown()  # where it failed first; a no-op once it has exited
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
