"""The end of a client's own ZeroMQ context (`kint.client.Client(own_context=True)`, the
context of kint-server's session), at the client's close: ending it waits, up to the
close's linger, for the casts still queued to leave, so that the process may exit next (a
closed socket's queue lives only as long as its context). Kept apart from the client's
calls: what that wait must withstand is no concern of a request's.
"""

from __future__ import annotations

import zmq


def end_context(context: zmq.Context) -> None:
    """End `context`, once: after its queued casts have left, or its sockets' linger ran out."""
    if not context.closed:
        context.term()
