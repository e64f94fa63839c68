"""`python stop_held_mid_stop.py`: kint's own `kint supervisor stop`, whose own `sup.stop`
reaches the supervisor just as that one is held (SIGSTOP, a debugger) with its door
closed for the stop: its call is refused as the supervisor stopped. Once the command's
socket is connected to the socket file, this holds the supervisor and closes its door as
its stop does (the note saying it stops, the socket file moved aside): the moment its
stop has begun and it is held cannot be had from outside the command otherwise. The
liveness bound is cut to a second (KINT_TEST_UNREACHABLE_AFTER_S, set by the test). For
tests/test_stop_meant_for.py."""

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kint_test_timings  # noqa: E402
from closed_by_hand import close_by_hand  # noqa: E402
from kint.client import Client  # noqa: E402
from kint.entry import main  # noqa: E402
from kint.front_closed import FrontClosed  # noqa: E402
from kint.paths import kint_home  # noqa: E402
from kint.socket_paths import socket_dir  # noqa: E402
from kint.supervisor.pidlock import running_pid  # noqa: E402

_call = Client.call


def _call_as_it_is_held(self: Client, op: str, **kw):
    if op == "sup.stop":
        self._socket(self.serving_pid())
        time.sleep(0.3)  # ZeroMQ connects in its own thread
        pid = running_pid(kint_home())
        assert pid is not None and pid > 0
        os.kill(pid, signal.SIGSTOP)
        now = time.time()
        close_by_hand(socket_dir(kint_home()), FrontClosed(pid, 30, 1024, 1, now, now - 5,
                                                           True))
    return _call(self, op, **kw)


if __name__ == "__main__":
    kint_test_timings.install_cli()
    Client.call = _call_as_it_is_held  # type: ignore[method-assign]
    sys.argv[:] = ["kint", "supervisor", "stop"]
    main()
