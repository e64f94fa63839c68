"""Messages on the back socket, between the supervisor and its workers.

A worker connects a DEALER whose identity is its space's 16 hex characters and says
`hello`, then `beat`s every second and sends `reply`s; before a deliberate non-zero exit
it sends `fatal` with the reason. The supervisor sends `req` (a validated request under
the supervisor's own id) and `stop`. Every message carries the sender's pid, so a message
from a worker that was already replaced is recognised and dropped.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson

from kint.protocol.errors import ErrorCode, ProtocolError
from kint.protocol.limits import MAX_MESSAGE_BYTES

WorkerKind = Literal["hello", "beat", "reply", "fatal"]
_WORKER_KINDS = frozenset({"hello", "beat", "reply", "fatal"})
_SUPERVISOR_KINDS = frozenset({"req", "stop"})

# The fields a beat may carry, with the types each may have (None always allowed).
BEAT_FIELDS: dict[str, tuple[type, ...]] = {
    "op": (str,),
    "op_age_s": (float, int),
    "inflight": (int,),
    "rpc": (dict,),
    "head": (dict,),
    "unanchored": (int,),
    "held": (dict,),
    "last_error": (str,),
    "has_work": (bool,),
    "progress": (str,),
}


def encode(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message)


def _load(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, "back-socket message over the size limit")
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "back-socket message is not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "back-socket message is not an object")
    return obj


def decode_from_worker(data: bytes) -> dict[str, Any]:
    """Validate what a worker sent. The supervisor trusts nothing it did not check."""
    obj = _load(data)
    kind = obj.get("kind")
    pid = obj.get("pid")
    if kind not in _WORKER_KINDS:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown worker message kind {kind!r}")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "worker message without a valid pid")
    if kind == "beat":
        state = obj.get("state")
        if not isinstance(state, dict):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "beat without a state object")
        for name, value in state.items():
            types = BEAT_FIELDS.get(name)
            if types is None:
                raise ProtocolError(ErrorCode.BAD_REQUEST, f"beat field {name!r} is unknown")
            if value is not None and (not isinstance(value, types)
                                      or (isinstance(value, bool) and bool not in types)):
                raise ProtocolError(ErrorCode.BAD_REQUEST, f"beat field {name!r} has a bad type")
    elif kind == "reply":
        reply = obj.get("reply")
        if not isinstance(reply, dict) or not isinstance(reply.get("id"), str):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "reply without an id")
        if not isinstance(reply.get("ok"), bool):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "reply without ok")
    elif kind == "fatal":
        if not isinstance(obj.get("reason"), str):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "fatal without a reason")
    return obj


def decode_from_supervisor(data: bytes) -> dict[str, Any]:
    obj = _load(data)
    kind = obj.get("kind")
    if kind not in _SUPERVISOR_KINDS:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown supervisor message kind {kind!r}")
    if kind == "req" and not isinstance(obj.get("request"), dict):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "req without a request")
    return obj
