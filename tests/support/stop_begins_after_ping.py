"""`python stop_begins_after_ping.py [before]`: kint's own `kint supervisor stop`, in which
another stop begins between the command's ping and its `sup.stop` (two stops run at once);
with `before`, between its first look and its ping. The ping is kint's own; once it
answered (or just before it asks), this sends the supervisor SIGTERM, as a second `kint
supervisor stop` that sees its door closed does, and waits until its door has closed for
the stop. The race cannot be timed from outside the command otherwise. For
tests/test_front_door_stop.py."""

import os
import signal
import sys
import time

from kint.entry import main
from kint.client import Client
from kint.front_closed import NOTE
from kint.paths import kint_home
from kint.socket_paths import socket_dir
from kint.supervisor.pidlock import running_pid

_ping = Client.ping


BEFORE = sys.argv[1:] == ["before"]


def _a_stop_begins() -> None:
    pid = running_pid(kint_home())
    if pid is not None and pid > 0:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while (not (socket_dir(kint_home()) / NOTE).exists()
               and running_pid(kint_home()) is not None and time.monotonic() < deadline):
            time.sleep(0.01)


def _ping_and_a_stop_begins(self: Client, timeout_s: float = 1.0) -> bool:
    if BEFORE:
        _a_stop_begins()
    answered = _ping(self, timeout_s)
    if answered and not BEFORE:
        _a_stop_begins()
    return answered


if __name__ == "__main__":
    Client.ping = _ping_and_a_stop_begins  # type: ignore[method-assign]
    sys.argv[:] = ["kint", "supervisor", "stop"]
    main()
