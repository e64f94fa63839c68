"""The end of a client's own ZeroMQ context (`kint.client.Client(own_context=True)`, the
context of kint-server's session), at the client's close: ending it waits, up to the
close's linger, for the casts still queued to leave, so that the process may exit next (a
closed socket's queue lives only as long as its context). Kept apart from the client's
calls: what that wait must withstand is no concern of a request's.

It must withstand a stop signal. libzmq's context end returns when a signal reaches the
thread waiting in it (EINTR), and pyzmq (27.3) then takes the context for ended and never
waits again: a second SIGTERM to kint-server, which is only noted once it unwinds
(kint/mcp_server.py), ended the wait at once, and the goodbye still queued went with the
process; a SIGINT raised KeyboardInterrupt from inside it. So the stop signals are held
back from the waiting thread while the context ends, and handled as soon as it has.
"""

from __future__ import annotations

import signal
import threading

import zmq

# The signals that stop a kint process (kint-server's harness, a terminal closing, Ctrl-C).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP, signal.SIGINT})


def end_context(context: zmq.Context) -> None:
    """End `context`, once: after its queued casts have left, or its sockets' linger ran out.

    In the main thread, the stop signals are blocked for the wait and the thread's mask is
    given back after it: one that comes meanwhile stays pending (libzmq's own threads block
    every signal) or reaches another thread, and its Python handler runs in the main thread
    once the mask is back (Python runs handlers only there; the mask's restore looks for
    them), so a noted signal is noted and a KeyboardInterrupt is raised then, the casts
    gone. Only the main thread: Linux gives a signal sent to the process to its main thread
    unless that thread blocks it, so a wait in another thread is not where one lands, and
    that thread's mask is left as its owner set it."""
    if context.closed:
        return
    if threading.current_thread() is not threading.main_thread():
        context.term()
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        context.term()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
