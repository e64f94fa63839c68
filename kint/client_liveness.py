"""What a client does, while it waits on a reply, about the supervisor holding its request:
the half of `kint.client.Client` that looks, once a second, whether that supervisor still
runs, still answers and is not stopped, kept apart from the send and the receive.

A dead supervisor answers nothing, and waiting out the deadline (up to half an hour)
would only hide that: a supervisor that exited mid-request is reported within a second or
so, one stopped (SIGSTOP) within the bound a command's start gives one, each naming the
pid that held the request and that whether it ran is unknown.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kint.client_closed_door import ClosedDoorChecks
from kint.client_errors import EXITED_HINT, NO_SUPERVISOR_HINT, SupervisorUnavailable

if TYPE_CHECKING:
    from kint.supervisor.pidlock import HolderWatch


class LivenessChecks(ClosedDoorChecks):
    """A mixin of `Client`: the looks at the supervisor holding a request. `Client` owns
    the socket, the pid file it keeps open and what it saw stopped; these read them, and
    drop the socket or note the stop when the supervisor is gone (`_drop_socket`, which
    ClosedDoorChecks calls too, `_refuse_if_stopped`)."""

    # Client's own, declared for the type checker.
    _holder: "HolderWatch"
    _stopped_since: tuple[int, float] | None

    def _check_serving(self, serving: int | None, op: str) -> int:
        """While waiting on `op`: the pid of the supervisor that holds the request, or
        SupervisorUnavailable when it exited (or none ever ran): a dead supervisor answers
        nothing, and waiting out the deadline would only hide that."""
        now = self._holder.pid()
        if now is None and serving is None:
            self._drop_socket()  # queued for no one: the next supervisor must not get it
            raise SupervisorUnavailable(f"no supervisor is running for {self.home}",
                                        NO_SUPERVISOR_HINT)
        if now is None or (serving not in (None, -1) and now != serving):
            # A request still queued on the socket (never delivered: the door closed for a
            # stop) would go to the next supervisor to bind there, a minute on.
            self._drop_socket()
            raise SupervisorUnavailable(
                f"the supervisor (pid {serving}) exited before answering {op}; whether "
                f"{op} ran is unknown", EXITED_HINT)
        holding = now if serving is None else serving
        if holding > 0:
            self._refuse_if_stopped(holding, op)
            self._refuse_if_closed(holding, op, sent=True)
        return holding

    def _drop_socket(self) -> None:
        """Close the socket at once (linger 0): nothing queued on it is delivered later."""
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None
        self._connected = self._connected_at = None

    def _refuse_if_stopped(self, pid: int, op: str) -> None:
        """SupervisorUnavailable, naming `pid` and how to resume it, once the supervisor
        holding `op` has been stopped (SIGSTOP) for UNREACHABLE_AFTER_S: it answers nothing
        until someone continues it, which a command cannot tell from the outside. The same
        bound and words as a command's start finds one stopped (kint.supervisor.autostart),
        where waiting out the request's whole deadline (up to 100 s for an agent's tool
        call) said only that no answer came."""
        from kint.proc_stat import process_stopped
        from kint.supervisor.autostart import UNREACHABLE_AFTER_S, silent_supervisor

        if not process_stopped(pid):
            self._stopped_since = None
            return
        now = time.monotonic()
        if self._stopped_since is None or self._stopped_since[0] != pid:
            self._stopped_since = (pid, now)
            return
        if now - self._stopped_since[1] >= UNREACHABLE_AFTER_S:
            silent = silent_supervisor(self.home, pid)
            raise SupervisorUnavailable(f"{silent}; it holds {op}, and whether {op} ran is "
                                        f"unknown", silent.hint)
