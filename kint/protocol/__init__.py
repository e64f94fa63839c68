"""The wire format between kint's processes: envelopes, ops, error codes, limits.

Nothing in this package does I/O or imports the rest of kint, so every process (the CLI,
the supervisor, a worker, a fuzzer) can decode and validate a message the same way.
"""

from kint.protocol.envelope import (
    PROTOCOL_VERSION,
    Reply,
    Request,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
    error_reply,
    ok_reply,
)
from kint.protocol.errors import ErrorCode, ProtocolError
from kint.protocol.ops import OPS, OpSpec

__all__ = [
    "PROTOCOL_VERSION",
    "OPS",
    "ErrorCode",
    "OpSpec",
    "ProtocolError",
    "Reply",
    "Request",
    "decode_reply",
    "decode_request",
    "encode_reply",
    "encode_request",
    "error_reply",
    "ok_reply",
]
