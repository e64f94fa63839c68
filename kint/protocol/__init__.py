"""The wire format between kint's processes: envelopes, ops, error codes, limits.

Nothing in this package does I/O or imports the rest of kint, so every process (the CLI,
the supervisor, a worker, a fuzzer) can decode and validate a message the same way.

The table of ops (`kint.protocol.ops`) is imported by whoever checks a request (the
supervisor, `decode_request`), not by this package: a client never needs it, and a fresh
`kint supervisor status` pays for every module it loads.
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

__all__ = [
    "PROTOCOL_VERSION",
    "ErrorCode",
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
