"""A client's codec: a request's bytes, and the check of the reply that comes back.

The standard library's `json`, not orjson as the serving side: a client is most often a
process that lives for one command (`kint supervisor status`, run in a loop by people
watching a busy box), and importing orjson loads `dataclasses`, `inspect`, `uuid` and
`datetime` with it, ~13 ms of a command bench/README.md wants under 100 ms
(`bench_cli_start.py`). What `json` costs more per message (10-30 us for a 6 KB verify
reply, ~7 us for a status) is little beside a round trip (0.5 ms for a status, 5 ms for a
verify). The bytes are the same JSON either way; the supervisor's gate decides what it
accepts.

A process that has loaded orjson already (every command through click, kint-server, a
benchmark) encodes a request without arguments with it: the same bytes in a tenth of the
time (0.6 against 5 us hot), in every call of a long-lived client. Anything orjson cannot
carry goes the standard way, which words the refusal. Such a process reads a reply with
orjson too (1.6 against 4 us hot for a status reply) unless the reply holds a run of 19
digits or more: orjson reads an integer past 64 bits as a float, where `json` keeps it
exact, and every integer of up to 18 digits is within 64 bits. A reply orjson refuses is
read again by `json`, so the refusal and its words are `json`'s as before. `json` reads
much that orjson refuses (a number past a double's range, a lone surrogate; NaN neither
reads), but not all that orjson reads: nesting deeper than Python's recursion limit leaves
room for (a little under 1000 levels, where orjson reads 1024) is read on orjson's path and
refused on `json`'s. kint's own server never nests so deep (orjson, its encoder, writes at
most 254 levels), so only a foreign peer's reply could be read one way and refused the other.
"""

from __future__ import annotations

import json
import sys
from json.encoder import c_make_encoder, encode_basestring
from typing import Any

from kint.protocol.envelope import Reply, Request
from kint.protocol.errors import ErrorCode, ProtocolError
from kint.protocol.limits import MAX_MESSAGE_BYTES


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Made once: json.dumps and json.loads given options build a new coder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _c_encoder() -> Any:
    """The C encoder `_ENCODER` builds again for every request, made once with the same
    options (no ASCII escapes, NaN and infinity refused, no spaces) and without the check
    for circular references, which needs a new table of markers per call: arguments that
    hold themselves end in the RecursionError `encode_request` refuses instead. None where
    this Python's `json` has no C encoder of this shape (a private one): `_ENCODER` then."""
    try:
        return c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", False,
                              False, False)
    except TypeError:  # none at all (None is not callable), or other arguments
        return None


_ENCODE = _c_encoder()
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
# The decoder's own scanner: one call where `decode` takes three (it first skips the
# spaces the serving side never sends, and afterwards looks for more).
_SCAN = _DECODER.scan_once


# The integers the serving side's orjson reads as integers; it reads larger ones as
# floats, which would reach a handler as another value than the one sent.
_MIN_INT, _MAX_INT = -(2 ** 63), 2 ** 64 - 1


def _big_int_in(value: Any) -> int | None:
    """An integer in `value` (an argument, nested or not) outside what the gate reads."""
    if type(value) is int:
        return value if not _MIN_INT <= value <= _MAX_INT else None
    children = value.values() if isinstance(value, dict) else (
        value if isinstance(value, (list, tuple)) else ())
    for child in children:
        found = _big_int_in(child)
        if found is not None:
            return found
    return None


def encode_request(request: Request) -> bytes:
    """The request's frame. Text that is not valid Unicode (a lone surrogate), a float JSON
    cannot carry (NaN, infinity), an integer outside 64 bits or arguments that hold
    themselves are refused here, before anything is sent."""
    if not request.args and type(request.timeout_ms) is int:  # no float: orjson writes NaN
        orjson = sys.modules.get("orjson")  # never imported here (see above)
        if orjson is not None:
            try:
                return orjson.dumps(request.to_dict())
            except orjson.JSONEncodeError:  # a lone surrogate, an integer past 64 bits
                pass
    try:
        big = _big_int_in(request.args)
        if big is None:
            obj = request.to_dict()
            text = "".join(_ENCODE(obj, 0)) if _ENCODE is not None else _ENCODER.encode(obj)
            return text.encode()
        why = f"the integer {big} is outside 64 bits"
    except RecursionError:
        why = "its arguments are nested too deep, or hold themselves"
    except (UnicodeEncodeError, ValueError) as err:
        why = str(err)
    raise ProtocolError(ErrorCode.BAD_REQUEST, f"the request cannot be sent as JSON: {why}",
                        request_id=request.id)


# Every byte a digit as b"0", every other a space: a reply holds a run of 19 digits or
# more where its translation holds `_LONG_DIGITS` (0.8 us hot for a status reply, where a
# regular expression's search took 6).
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _read_by_orjson(data: bytes) -> Any:
    """The reply read by orjson, when this process has loaded it and it reads it as `json`
    would; else None (`json` reads it then, and words any refusal)."""
    orjson = sys.modules.get("orjson")  # never imported here (see above)
    if orjson is None or _LONG_DIGITS in data.translate(_DIGITS_AS_ZEROS):
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _reply_object(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(ErrorCode.INTERNAL, f"malformed reply: message of {len(data)} "
                            f"bytes is over the limit of {MAX_MESSAGE_BYTES}")
    obj = _read_by_orjson(data)
    if type(obj) is dict:
        return obj
    try:
        text = data.decode()  # JSON on the wire is UTF-8
        try:
            obj, end = _SCAN(text, 0)
        except StopIteration:  # not a JSON value at 0: `decode` says why (or skips spaces)
            end = -1
        if end != len(text):
            obj = _DECODER.decode(text)
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, NaN, nesting too deep
        raise ProtocolError(ErrorCode.INTERNAL,
                            "malformed reply: message is not valid JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.INTERNAL, "malformed reply: message must be a JSON object")
    return obj


def decode_reply(data: bytes) -> Reply:
    """Check a reply on the client side; a malformed one is an INTERNAL error."""
    obj = _reply_object(data)
    rid = obj.get("id")
    if rid is not None and not isinstance(rid, str):
        raise ProtocolError(ErrorCode.INTERNAL, "malformed reply: 'id' is not a string")
    ok = obj.get("ok")
    if ok is True:
        result = obj.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(ErrorCode.INTERNAL, "malformed reply: 'result' is not an object")
        return Reply(id=rid, ok=True, result=result)
    if ok is False:
        code = obj.get("error")
        try:
            ErrorCode(code)
        except ValueError:
            raise ProtocolError(ErrorCode.INTERNAL,
                                f"malformed reply: unknown error code {code!r}") from None
        message = obj.get("message")
        hint = obj.get("hint")
        return Reply(id=rid, ok=False, error=code,
                     message=message if isinstance(message, str) else "",
                     hint=hint if isinstance(hint, str) else None)
    raise ProtocolError(ErrorCode.INTERNAL, "malformed reply: 'ok' is not true or false")
