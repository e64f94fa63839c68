"""Bounds on everything a message may carry. One place, so the supervisor, the worker and
the tests agree on what is too large or too long."""

# A request or reply larger than this is refused with TOO_LARGE (a reply by the one who
# made it: kint.protocol.server_codec.encode_reply puts the refusal in its place).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# The supervisor's sockets' ZMQ_MAXMSGSIZE: frames up to here are read (the front answers
# TOO_LARGE past MAX_MESSAGE_BYTES, and so does the back to a worker's reply's client);
# larger ones make ZeroMQ drop the sender's connection before any byte reaches kint.
SOCKET_MAX_MESSAGE_BYTES = 2 * MAX_MESSAGE_BYTES

MAX_ID_CHARS = 64
MAX_TENANT_CHARS = 200
MAX_SPACE_LABEL_CHARS = 512
MAX_PATH_CHARS = 4096
MAX_ARG_STRING_CHARS = 64 * 1024

MIN_TIMEOUT_MS = 1
MAX_TIMEOUT_MS = 60 * 60 * 1000
DEFAULT_TIMEOUT_MS = 30_000

# Requests waiting on one space (queued, in flight, or parked on an exited worker's last
# replies: kint/supervisor/last_words.py) before the next gets BUSY.
MAX_WAITING_PER_SPACE = 32
