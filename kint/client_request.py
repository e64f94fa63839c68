"""What a client's request carries on the wire: its one frame, which reply answers it, and
the caller's settings with or without a secret's proof (kint.settings.secret_proof). Kept
apart from the socket and its waits: `kint.client.Client.call` sends again, without proofs,
to a supervisor older than them, which refuses a proof as a secret's value.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import zmq

from kint.client_errors import KintError
from kint.protocol import ProtocolError, Reply, Request, decode_reply, encode_request


def encoded(request: Request) -> bytes:
    """The request's frame, or the KintError a caller reports when JSON cannot carry it."""
    try:
        return encode_request(request)
    except ProtocolError as err:
        raise KintError(err.code.value, err.message, err.hint) from None


def reply_to(request_id: str, frame: bytes) -> Reply | None:
    """The reply `frame` holds when it answers `request_id` (or says it answers no request
    in particular, as a refusal of a request too broken to read its id), else None: a reply
    to an earlier request that timed out on this side is not the one waited on."""
    try:
        reply = decode_reply(frame)
    except ProtocolError as err:
        raise KintError(err.code.value, err.message, err.hint) from None
    return reply if reply.id in (request_id, None) else None


def waiting(sock: zmq.Socket) -> Iterator[bytes]:
    """The frames that have arrived on `sock` and wait there now, read one at a time as
    they are asked for: the reply a wait's end takes (`kint.client.Client._roundtrip`)
    stops the reading at itself, and a socket about to be dropped is read to the end
    (`kint.client_liveness.LivenessChecks._drop_socket`)."""
    while sock.poll(0, zmq.POLLIN):
        yield sock.recv()


def reply_among(request_id: str, frames: Iterable[bytes]) -> Reply | None:
    """The first of `frames` that answers `request_id` (`reply_to`), or None. One look for
    both places a wait takes a reply that has arrived without a receive of its own: the
    socket at the wait's deadline (`waiting`), and the frames a look kept as it dropped
    the socket (`_dropped_with`)."""
    for frame in frames:
        if (reply := reply_to(request_id, frame)) is not None:
            return reply
    return None


def refused_proof(err: KintError, args: dict[str, Any] | None) -> bool:
    """Whether `err` is how a supervisor older than secret proofs refuses the proof that
    `args` carried among the caller's settings (kint.settings.secret_proof)."""
    sent = (args or {}).get("settings")
    if err.code != "BAD_REQUEST" or not isinstance(sent, dict):
        return False
    from kint.settings.secret_proof import is_proof, refused_as_a_value

    raw = sent.get(refused_as_a_value(err.message))
    return isinstance(raw, str) and is_proof(raw)


def without_proofs(args: dict[str, Any] | None) -> dict[str, Any] | None:
    """`args` with a bare `set` for each secret's proof among the caller's settings."""
    sent = (args or {}).get("settings")
    if not isinstance(sent, dict):
        return args
    from kint.settings.secret_proof import without_proof

    return {**(args or {}), "settings": {name: without_proof(raw) if isinstance(raw, str)
                                         else raw for name, raw in sent.items()}}
