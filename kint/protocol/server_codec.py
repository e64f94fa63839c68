"""The serving side's codec: the gate every inbound request passes (`decode_request`, run
by the supervisor and again by the worker), and the bytes of a reply (`encode_reply`),
which never exceed what a client reads.

orjson here: every request is decoded twice on its way and every reply encoded once, in
the processes that serve every space. A client, a short-lived process, reads its replies
with the standard library instead (`kint.protocol.client_codec`).

`decode_request` either returns a `Request` whose every field has the declared type and
bounds, or raises `ProtocolError` with the code to answer with. It never raises anything
else, whatever the bytes.
"""

from __future__ import annotations

from typing import Any

import orjson

from kint.protocol.envelope import PROTOCOL_VERSION, Reply, Request, error_reply
from kint.protocol.errors import ErrorCode, ProtocolError
from kint.protocol.limits import (
    DEFAULT_TIMEOUT_MS,
    MAX_ID_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_PATH_CHARS,
    MAX_SPACE_LABEL_CHARS,
    MAX_TENANT_CHARS,
    MAX_TIMEOUT_MS,
    MIN_TIMEOUT_MS,
)

_loads = orjson.loads
_REQUEST_KEYS = frozenset(
    {"v", "id", "op", "tenant", "db", "space", "args", "timeout_ms", "cast"}
)


# What to ask for instead when an op's answer is too large to send, by op.
_SMALLER_ASK = {
    "history": "ask for the one version live at a block (`kint history ... --block N`)",
    "verify": "ask for fewer rows (`kint verify --limit N`)",
}


def too_large_reply(request_id: str | None, op: str | None, size: int) -> Reply:
    """The TOO_LARGE refusal that replaces an answer of `size` bytes, naming `op`."""
    what = f"the {op} reply" if op else "the reply"
    ask = _SMALLER_ASK.get(op or "", "ask for less at once")
    return error_reply(
        request_id, ErrorCode.TOO_LARGE,
        f"{what} is {size} bytes, over the limit of {MAX_MESSAGE_BYTES}; it was not sent",
        f"{ask}: a reply carries at most {MAX_MESSAGE_BYTES} bytes")


def encode_reply(reply: Reply, op: str | None = None) -> bytes:
    """The reply's frame, or, when that is over MAX_MESSAGE_BYTES, a TOO_LARGE refusal
    naming `op` and the size in its place: a larger frame would never reach the client
    (ZeroMQ drops a frame over the socket's limit, the client refuses one over this), so
    it would wait for TIMEOUT instead of learning why."""
    data = orjson.dumps(reply.to_dict())
    if len(data) <= MAX_MESSAGE_BYTES:
        return data
    return orjson.dumps(too_large_reply(reply.id, op, len(data)).to_dict())


def _load_object(data: bytes) -> dict[str, Any]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "a message must be bytes")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            ErrorCode.TOO_LARGE,
            f"message of {len(data)} bytes is over the limit of {MAX_MESSAGE_BYTES}",
        )
    try:
        obj = _loads(data)
    except orjson.JSONDecodeError:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "message is not valid JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "message must be a JSON object")
    return obj


def _readable_id(obj: dict[str, Any]) -> str | None:
    rid = obj.get("id")
    if isinstance(rid, str) and 0 < len(rid) <= MAX_ID_CHARS:
        return rid
    return None


def _fine(value: Any, max_chars: int) -> bool:
    """Whether an optional string field is None or a string of 1 to `max_chars`
    characters without NUL (orjson gives exact types: `type(x) is str`)."""
    return value is None or (type(value) is str and 0 < len(value) <= max_chars
                             and "\x00" not in value)


def _opt_str(obj: dict[str, Any], key: str, max_chars: int, rid: str | None) -> str | None:
    """The optional string field `key`, or the refusal naming what is wrong with it."""
    value = obj.get(key)
    if _fine(value, max_chars):  # the common case, in one expression
        return value
    if not isinstance(value, str) or not value:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{key!r} must be a non-empty string or null",
                            request_id=rid)
    if len(value) > max_chars:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{key!r} is longer than {max_chars} characters",
                            request_id=rid)
    if "\x00" in value:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{key!r} contains a NUL character",
                            request_id=rid)
    return value


# The ops' table, loaded on the first request decoded: a client encodes requests and
# decodes replies and never needs it (see `kint supervisor status`'s imports).
_OPS: dict[str, Any] | None = None


def _ops_table() -> dict[str, Any]:
    global _OPS
    from kint.protocol.ops import OPS

    _OPS = OPS
    return OPS


def decode_request(data: bytes) -> Request:
    """Validate one inbound frame completely: a `Request` whose every field has the
    declared type and bounds, or the `ProtocolError` to answer with.

    Every request is decoded twice on its way (by the supervisor, then by the worker,
    which trusts no socket), so a well-formed request is accepted here in one expression
    of every check, without a function call per field (a status request: ~400 Python
    opcodes in a dozen calls, 7 us hot; now ~300 in one, 3 us). orjson gives exact types
    (`type(x) is int` is "an int, not a bool"). Anything this does not accept goes to
    `_decode_checked`, which makes the same checks one by one, in the order a reply code
    is decided, and words the refusal: the two give the same request or the same refusal
    (tests/test_protocol.py holds them to it)."""
    try:
        obj = _loads(data) if type(data) is bytes and len(data) <= MAX_MESSAGE_BYTES else None
    except orjson.JSONDecodeError:
        obj = None
    if type(obj) is dict and _REQUEST_KEYS.issuperset(obj):
        get = obj.get
        rid, op, tenant, db, space = get("id"), get("op"), get("tenant"), get("db"), get("space")
        args, timeout_ms = get("args"), get("timeout_ms", DEFAULT_TIMEOUT_MS)
        cast = get("cast", False)
        spec = (_OPS or _ops_table()).get(op) if type(op) is str else None
        if (spec is not None and type(get("v")) is int and get("v") == PROTOCOL_VERSION
                and type(rid) is str and 0 < len(rid) <= MAX_ID_CHARS
                and (tenant is None or (type(tenant) is str and 0 < len(tenant) <= MAX_TENANT_CHARS
                                        and "\x00" not in tenant))
                and (db is None or (type(db) is str and 0 < len(db) <= MAX_PATH_CHARS
                                    and db[0] == "/" and "\x00" not in db))
                and (space is None or (type(space) is str
                                       and 0 < len(space) <= MAX_SPACE_LABEL_CHARS
                                       and "\x00" not in space))
                and (args is None or type(args) is dict)
                and type(timeout_ms) is int and MIN_TIMEOUT_MS <= timeout_ms <= MAX_TIMEOUT_MS
                and type(cast) is bool
                and not (spec.needs_space and (tenant is None or db is None))):
            if args is None:
                args = {}
            if args or spec.required:
                spec.validate_args(args, rid)
            max_ms = spec.max_timeout_ms
            return Request(rid, op, tenant, db, space, args,
                           timeout_ms if timeout_ms < max_ms else max_ms, cast, PROTOCOL_VERSION)
    return _decode_checked(data)


def _decode_checked(data: Any) -> Request:
    """`decode_request` one check at a time, in the order a reply code is decided: size,
    JSON, version, id, op, then field types and bounds, then the op's arguments. Reached
    by every request the one-expression check did not accept: the refusal's words are
    made here."""
    obj = _load_object(data)
    rid = _readable_id(obj)
    version = obj.get("v")
    if type(version) is not int:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'v' must be an integer", request_id=rid)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"protocol version {version} is not supported (this supervisor speaks "
            f"{PROTOCOL_VERSION})",
            request_id=rid,
        )
    if rid is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"'id' must be a string of 1 to {MAX_ID_CHARS} characters")
    if not _REQUEST_KEYS.issuperset(obj):
        raise ProtocolError(ErrorCode.BAD_REQUEST,
                            f"unknown field(s): {sorted(set(obj) - _REQUEST_KEYS)}",
                            request_id=rid)
    op = obj.get("op")
    if type(op) is not str:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'op' must be a string", request_id=rid)
    spec = (_OPS or _ops_table()).get(op)
    if spec is None:
        shown = op if len(op) <= 64 else op[:64] + "..."
        raise ProtocolError(ErrorCode.UNKNOWN_OP, f"unknown op {shown!r}", request_id=rid)
    tenant = _opt_str(obj, "tenant", MAX_TENANT_CHARS, rid)
    db = _opt_str(obj, "db", MAX_PATH_CHARS, rid)
    if db is not None and not db.startswith("/"):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'db' must be an absolute path",
                            request_id=rid)
    space = _opt_str(obj, "space", MAX_SPACE_LABEL_CHARS, rid)
    args = obj.get("args")
    if args is None:
        args = {}
    elif type(args) is not dict:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'args' must be an object", request_id=rid)
    timeout_ms = obj.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if type(timeout_ms) is not int:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'timeout_ms' must be an integer",
                            request_id=rid)
    if not MIN_TIMEOUT_MS <= timeout_ms <= MAX_TIMEOUT_MS:
        raise ProtocolError(
            ErrorCode.BAD_REQUEST,
            f"'timeout_ms' must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS}",
            request_id=rid,
        )
    cast = obj.get("cast", False)
    if type(cast) is not bool:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "'cast' must be true or false",
                            request_id=rid)
    if spec.needs_space and tenant is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{op} needs a 'tenant'", request_id=rid)
    if spec.needs_space and db is None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{op} needs a 'db'", request_id=rid)
    if args or spec.required:
        spec.validate_args(args, rid)
    return Request(id=rid, op=op, tenant=tenant, db=db, space=space, args=args,
                   timeout_ms=min(timeout_ms, spec.max_timeout_ms), cast=cast, v=version)
