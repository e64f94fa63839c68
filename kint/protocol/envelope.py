"""The request and reply envelopes (kint.protocol): one ZeroMQ frame, one JSON object.

The two types and the replies' constructors live here; the bytes are made and read by
the side that sends them: `kint.protocol.client_codec` (a client: encode a request,
check a reply) and `kint.protocol.server_codec` (the supervisor and a worker: the gate
every inbound request passes, and the reply's bytes).

Plain classes with slots, not dataclasses: this module is on the way of every fresh
`kint supervisor status`, and `dataclasses` loads `inspect` (with `ast`, `dis` and
`tokenize`), ~10 ms of a command issue 15 wants under 100 ms.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from kint.protocol.errors import DEFAULT_HINTS, ErrorCode, ProtocolError
from kint.protocol.limits import DEFAULT_TIMEOUT_MS

PROTOCOL_VERSION = 1


class Request:
    """One request as decoded (or about to be encoded): every field typed and bounded."""

    __slots__ = ("id", "op", "tenant", "db", "space", "args", "timeout_ms", "cast", "v")

    def __init__(self, id: str, op: str, tenant: str | None = None, db: str | None = None,
                 space: str | None = None, args: dict[str, Any] | None = None,
                 timeout_ms: int = DEFAULT_TIMEOUT_MS, cast: bool = False,
                 v: int = PROTOCOL_VERSION) -> None:
        self.id, self.op, self.tenant, self.db, self.space = id, op, tenant, db, space
        self.args: dict[str, Any] = {} if args is None else args
        self.timeout_ms, self.cast, self.v = timeout_ms, cast, v

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "v": self.v, "id": self.id, "op": self.op, "tenant": self.tenant,
            "db": self.db, "space": self.space, "args": self.args,
            "timeout_ms": self.timeout_ms,
        }
        if self.cast:
            out["cast"] = True
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Request({self.to_dict()!r})"


class Reply:
    """One reply: a result, or an error code with its message and hint."""

    __slots__ = ("id", "ok", "result", "error", "message", "hint")

    def __init__(self, id: str | None, ok: bool, result: dict[str, Any] | None = None,
                 error: str | None = None, message: str | None = None,
                 hint: str | None = None) -> None:
        self.id, self.ok, self.result = id, ok, result
        self.error, self.message, self.hint = error, message, hint

    def to_dict(self) -> dict[str, Any]:
        if self.ok:
            return {"v": PROTOCOL_VERSION, "id": self.id, "ok": True, "result": self.result or {}}
        return {"v": PROTOCOL_VERSION, "id": self.id, "ok": False, "error": self.error,
                "message": self.message, "hint": self.hint}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reply) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"Reply({self.to_dict()!r})"


# A request's id has to be unique only among its client's own requests: the client takes
# the reply with its request's id (a late answer to an earlier request is not its), and
# the supervisor routes on ids of its own. So 16 hex characters: a random prefix drawn once
# per process (again in a forked child, which would otherwise count on from its parent's)
# and a counter, not eight random bytes from the kernel for every call.
_prefix = ""
_counter = itertools.count()


def _new_prefix() -> None:
    global _prefix, _counter
    _prefix, _counter = os.urandom(4).hex(), itertools.count()


_new_prefix()
os.register_at_fork(after_in_child=_new_prefix)


def new_request_id() -> str:
    return f"{_prefix}{next(_counter) & 0xFFFFFFFF:08x}"


def ok_reply(request_id: str | None, result: dict[str, Any]) -> Reply:
    return Reply(id=request_id, ok=True, result=result)


def error_reply(
    request_id: str | None, code: ErrorCode, message: str, hint: str | None = None
) -> Reply:
    code = ErrorCode(code)
    return Reply(id=request_id, ok=False, error=code.value, message=message,
                 hint=hint if hint is not None else DEFAULT_HINTS[code])


def reply_from_error(err: ProtocolError) -> Reply:
    return error_reply(err.request_id, err.code, err.message, err.hint)
