"""The end of a client's own ZeroMQ context (`kint.client.Client(own_context=True)`, the
context of kint-server's session), at the client's close: ending it waits, up to the
close's linger, for the casts still queued to leave, so that the process may exit next (a
closed socket's queue lives only as long as its context). Kept apart from the client's
calls: what that wait must withstand is no concern of a request's.

It must withstand a stop signal. libzmq's context end returns when a signal reaches the
thread waiting in it (EINTR), and pyzmq (27.3) then takes the context for ended and never
waits again: a second SIGTERM to kint-server, which is only noted once it unwinds
(kint/mcp_server.py), ended the wait at once, and the goodbye still queued went with the
process; a SIGINT raised KeyboardInterrupt from inside it. So the wait is done by a thread
of its own that blocks the stop signals: the caller waits for that thread, and a signal
meanwhile reaches the caller (or another thread), never the wait.

The caller's own signal mask is never changed. Blocking the signals in the caller instead
(as this module first did) left them blocked for good when a pending handler raised between
the block and the restore (`signal.pthread_sigmask` is a Python frame: a handler can run
at its entry, before its C call): a Hermes host, whose Ctrl-C raises, then had SIGINT,
SIGTERM and SIGHUP blocked in its main thread, and every child it started after inherited
that. A mask no code of ours changes cannot be left changed; calling the C function itself
(`_signal.pthread_sigmask`) would close that window only while CPython looks for handlers
where it does today, and would still hold a Ctrl-C back for the whole linger.
"""

from __future__ import annotations

import signal
import threading

import zmq

# The signals that stop a kint process (kint-server's harness, a terminal closing, Ctrl-C).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGHUP, signal.SIGINT})


def end_context(context: zmq.Context) -> None:
    """End `context`, once: after its queued casts have left, or its sockets' linger ran out.

    The wait is a thread's that blocks the stop signals; this call waits for it on a plain
    lock. A signal that comes meanwhile runs its handler in the main thread as ever (the
    lock's wait goes on after it, PEP 475): a noted one (kint-server unwinding) is noted
    and the wait goes on; a raising one (KeyboardInterrupt in a Hermes host) raises from it
    at once, and the thread ends the context still: not a daemon, it has the interpreter's
    exit wait for the casts. (Not `Thread.join`: one cut by an exception takes the live
    thread for ended, CPython 3.11's bpo-45274 handling, and the exit then would not wait.)
    Where no thread starts (at the interpreter's end, 3.12 and later), the context is ended
    here, unguarded: what a signal cuts short then is the linger of a process on its way
    out."""
    if context.closed:
        return
    claim = threading.Lock()  # taken by whoever ends the context: one, never two
    ended = threading.Lock()  # held until the ender has ended it
    ended.acquire()
    ender = threading.Thread(target=_end_guarded, args=(context, claim, ended),
                             name="kint-context-end")
    try:
        ender.start()
    except RuntimeError as err:
        # No thread, or a start a signal's exception cut short inside threading's own
        # code, the thread maybe running: it ends the context unless this takes it first
        # (a second end of a context is libzmq's use after free, EFAULT at best). That
        # exception (a Ctrl-C's KeyboardInterrupt, attached to the RuntimeError) is raised
        # again once the context is ended: a caller's Ctrl-C is never swallowed here.
        if claim.acquire(blocking=False):
            context.term()
        cut_by = err.__context__
        if isinstance(cut_by, BaseException) and not isinstance(cut_by, Exception):
            raise cut_by from None
        return
    ended.acquire()


def _end_guarded(context: zmq.Context, claim: threading.Lock, ended: threading.Lock) -> None:
    """The ender thread: its own mask blocks the stop signals (a thread's mask is its own,
    and Python runs no handler outside the main thread), so none cuts the wait short."""
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        if claim.acquire(blocking=False):
            context.term()
    finally:
        ended.release()
