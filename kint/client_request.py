"""What a client's request carries on the wire: its one frame, which reply answers it, and
the caller's settings with or without a secret's proof (kint.settings.secret_proof). Kept
apart from the socket and its waits: `kint.client.Client.call` sends again, without proofs,
to a supervisor older than them, which refuses a proof as a secret's value.
"""

from __future__ import annotations

from typing import Any

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
