"""The wire format between kint's processes: envelopes, ops, error codes (`errors`) and the
hints named word for word for them (`hints`), limits.

Nothing in this package does I/O or imports the rest of kint (but kint.outcomes, sentences
that import nothing themselves), so every process (the CLI, the supervisor, a worker, a
fuzzer) can decode and validate a message the same way.

Each side imports its own codec: a client `kint.protocol.client_codec` (exported here),
the supervisor and the workers `kint.protocol.server_codec` (the gate, `decode_request`,
and `encode_reply`; not exported here, as it loads orjson). The table of ops
(`kint.protocol.ops`) is imported by whoever checks a request, not by this package: a
client never needs it, and a fresh `kint supervisor status` pays for every module it
loads.
"""

from kint.protocol.client_codec import decode_reply, encode_request
from kint.protocol.envelope import PROTOCOL_VERSION, Reply, Request, error_reply, ok_reply
from kint.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "PROTOCOL_VERSION",
    "ErrorCode",
    "ProtocolError",
    "Reply",
    "Request",
    "decode_reply",
    "encode_request",
    "error_reply",
    "ok_reply",
]
