"""`python stop_begins_after_ping.py`: kint's own `kint supervisor stop`, in which another
stop begins between the command's ping and its `sup.stop` (two stops run at once). The
ping is kint's own; once it answered, this sends the supervisor SIGTERM, as a second
`kint supervisor stop` that sees its door closed does, and waits until its door has
closed for the stop. The race cannot be timed from outside the command otherwise. For
tests/test_front_door_stop.py."""

import os
import signal
import sys
import time

from kint.entry import main
from kint.client import Client
from kint.front_closed import NOTE
from kint.paths import kint_home, socket_dir
from kint.supervisor.pidlock import running_pid

_ping = Client.ping


def _ping_then_a_stop_begins(self: Client, timeout_s: float = 1.0) -> bool:
    answered = _ping(self, timeout_s)
    pid = running_pid(kint_home())
    if answered and pid is not None and pid > 0:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while (not (socket_dir(kint_home()) / NOTE).exists()
               and running_pid(kint_home()) is not None and time.monotonic() < deadline):
            time.sleep(0.01)
    return answered


if __name__ == "__main__":
    Client.ping = _ping_then_a_stop_begins  # type: ignore[method-assign]
    sys.argv[:] = ["kint", "supervisor", "stop"]
    main()
