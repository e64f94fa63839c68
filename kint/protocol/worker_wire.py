"""Messages on the back socket, between the supervisor and its workers.

A worker says `hello`, then `beat`s (every second while it works, every `idle_beat_seconds`
once it has been idle that long; each beat says when the next is due) and sends
`reply`s; before a deliberate non-zero exit it sends `fatal` with the reason (and, for a
start it refuses rather than fails, the code and hint its space's requests get, and the
pid of the worker that holds the space when the worker lock names one). The
supervisor sends `req` and `stop`. A `req` carries its `deadline`: the moment
(time.monotonic(), the box's clock, which both processes read: request_deadline.py says
why they share it) the supervisor answers it TIMEOUT, set once as it routed the request;
the worker bounds the work it may still start for it by that (`req_deadline`), not by when
it began to run it, which is later by however long it waited in the supervisor's queue or
behind the worker's other ops.
Every message carries the sender's pid, so a message from a worker that was already
replaced is recognised and dropped.

Every message is two frames: a small header (an orjson object: the kind, the pid, the
token, the supervisor's id for the request) that the receiver decodes and checks, and a
body that the supervisor passes on without decoding it. For a `req` the body is the
client's request frame exactly as it arrived (the supervisor validated it before routing
it; the worker decodes it again, as it trusts no socket); for a `reply` it is the reply
frame the client gets, encoded once by the worker under the client's own id; every other
kind has an empty body. So a request and its answer cross the supervisor as bytes: it
routes on the header alone.

Any process of the user can reach the back socket, so a worker proves who it is with a
secret it did not choose: the supervisor makes a fresh token for each spawn and hands it
to the child through the spawn's own pipe (never argv, the environment or a file). The
worker's DEALER identity, its route, is derived from the token (`route_for`), so nobody
else can name it, and every message it sends carries the token, which the supervisor
checks before it believes a word.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from typing import Any, Literal

import orjson

from kint.protocol.errors import ErrorCode, ProtocolError
from kint.protocol.limits import MAX_ID_CHARS, MAX_MESSAGE_BYTES

WorkerKind = Literal["hello", "beat", "reply", "fatal"]
_WORKER_KINDS = frozenset({"hello", "beat", "reply", "fatal"})
_SUPERVISOR_KINDS = frozenset({"req", "stop"})
_ERROR_CODES = frozenset(code.value for code in ErrorCode)

# How a worker that never served ends (its `fatal` says why, when it arrives). The exit code
# alone tells the two apart: the supervisor may handle the exit before it reads the
# message, which can sit queued behind another worker's beat.
# A worker that cannot serve its space: a crash (restarts, then a quarantine).
EXIT_FATAL = 3
# A worker that refused to start because another worker of its space holds the space's
# worker lock (kint.tenant_worker.worker_lock): not a crash, nothing restarted.
EXIT_REFUSED = 4
# A worker that began short of open files (its own limit, inherited: fewer than
# open_files.WORKER_START_FDS free): not a crash either, its requests refused BUSY with
# the limit's hint (docs/faults.md), where libzmq aborted it or SQLite could not open the
# store, and the space was quarantined as crashing. Said by the code alone: telling the
# supervisor more takes descriptors it may not have.
EXIT_NO_FILES = 5
# The same, for the system's table of open files found full (ENFILE) as it started: no
# `ulimit -n` mends that, so its hint is another.
EXIT_NO_SYSTEM_FILES = 6

# The fields a beat may carry, with the types each may have (None always allowed).
BEAT_FIELDS: dict[str, tuple[type, ...]] = {
    "op": (str,),
    "op_age_s": (float, int),
    "inflight": (int,),
    # Every op in flight, oldest first, as [name, age_s], up to MAX_OPS_NAMED: `op` is the
    # oldest alone, and a status naming only it hid a verify or a status behind a restore.
    "ops": (list,),
    "rpc": (dict,),
    "head": (dict,),
    # The last count of unanchored row changes, whether the store or the head moved since
    # it was made (a recount is on its way), and its age (kint/tenant_worker/unanchored.py).
    "unanchored": (int,),
    "unanchored_stale": (bool,),
    "unanchored_age_s": (float, int),
    "held": (dict,),
    # The store watcher's last failed push while it waits to try again (push_backoff.py).
    "watcher_failure": (dict,),
    # Why the store watcher cannot count the store's unanchored rows (`message`, naming
    # the file, and `age_s`): its dirty store is then no work that holds off a stop.
    "watcher_uncounted": (dict,),
    # The push settings (KINT_RPC_TIMEOUT, KINT_KEY_TTL, KINT_NONCE_RETRY_SECONDS) the
    # watcher's pushes take from a kint-server session where they differ from the
    # worker's own: [{name, value, source, own, own_source}] (push_settings.differing).
    "watcher_settings": (list,),
    # Work the worker must finish before it may be stopped (ops, a push, a dirty store).
    "has_work": (bool,),
    # Agent sessions attached: no idle stop, but a recycle hands them to the successor.
    "sessions": (int,),
    # Another KINT_HOME's kint workers on the store, as the worker's last look found them
    # (`message`, `hint`: kint.tenant_worker.store_sharers.still_sharing).
    "store_shared": (dict,),
    "progress": (str,),
    # The head op the progress line is of, and how long ago it began.
    "progress_op": (str,),
    "progress_age_s": (float, int),
    "own_mib": (float, int),
    "every_s": (float, int),
    # How many requests the worker has taken from the supervisor since its spawn: a beat
    # made before it took the last one sent tells nothing of what that one left
    # (kint.supervisor.workers.WorkerHandle.beat_tells_after_work).
    "taken": (int,),
}

# The most ops in flight a beat names (`ops`); the count (`inflight`) covers the rest.
MAX_OPS_NAMED = 8

# A worker at work beats every second. One idle for longer beats less often: 64 idle
# workers beating every second cost ~47 ms of CPU a second (supervisor and workers, most
# of it wake-ups), for up to KINT_WORKER_IDLE_SECONDS before they exit. Never less often
# than a quarter of the heartbeat timeout, so a stopped worker is still found hung in time.
BEAT_SECONDS = 1.0
IDLE_BEAT_MAX_SECONDS = 3.0


def beat_seconds_in_range(seconds: float) -> float:
    """`seconds` held to the cadences a worker may beat at (1 to 3 s)."""
    return max(BEAT_SECONDS, min(IDLE_BEAT_MAX_SECONDS, seconds))


def idle_beat_seconds(heartbeat_timeout_s: float) -> float:
    """How often an idle worker beats, for the supervisor's heartbeat timeout."""
    return beat_seconds_in_range(heartbeat_timeout_s / 4)

TOKEN_BYTES = 32
# A header is a few hundred bytes (a beat's state is the largest).
MAX_HEADER_BYTES = 64 * 1024


def new_token() -> bytes:
    """A worker's secret for one spawn, made by the supervisor."""
    return os.urandom(TOKEN_BYTES)


def route_for(token: bytes) -> bytes:
    """The worker's DEALER identity for this spawn, derived from the token one-way: only
    the supervisor and this worker can name it, and it tells nothing of the token. It
    starts with b"w": ZeroMQ keeps identities starting with a zero byte for itself."""
    return b"w" + hashlib.sha256(b"kint worker route\0" + token).digest()[:16]


def token_text(token: bytes) -> str:
    return token.hex()


def token_matches(message: dict[str, Any], token: bytes | None) -> bool:
    """Whether `message` carries this spawn's token (in constant time). Checked by the
    supervisor, against the spawn the message's route belongs to, not by the decoder."""
    given = message.get("token")
    if token is None or not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode(), token.hex().encode())


def encode(header: dict[str, Any], body: bytes = b"") -> list[bytes]:
    """The two frames of one back-socket message."""
    return [orjson.dumps(header), body]


def _load(header: bytes) -> dict[str, Any]:
    if len(header) > MAX_HEADER_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, "back-socket header over the size limit")
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "back-socket header is not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "back-socket header is not an object")
    return obj


def _has_id(obj: dict[str, Any]) -> bool:
    rid = obj.get("id")
    return isinstance(rid, str) and 0 < len(rid) <= MAX_ID_CHARS


def decode_from_worker(header: bytes, body: Any) -> dict[str, Any]:
    """Validate what a worker sent: the header, and that only a reply has a body. The
    body of a reply is the client's, checked by the client (`decode_reply`); the
    supervisor trusts nothing else it did not check. A reply's body over
    MAX_MESSAGE_BYTES is not refused here: once the header's token says which worker
    sent it, the supervisor answers its client TOO_LARGE instead (`reply_too_large`)."""
    obj = _load(header)
    kind = obj.get("kind")
    pid = obj.get("pid")
    # A kind that is not a string (a list, an object) is refused by the same line: it is
    # unhashable, and a set lookup would raise TypeError out of the supervisor's loop.
    if type(kind) is not str or kind not in _WORKER_KINDS:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown worker message kind {kind!r}")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "worker message without a valid pid")
    if kind == "reply":
        if not _has_id(obj):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "reply without an id")
        if not len(body):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "reply without a body")
        return obj
    if len(body):
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"{kind} with a body")
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
    elif kind == "fatal":
        if not isinstance(obj.get("reason"), str):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "fatal without a reason")
        # A start refused rather than failed (kint.tenant_worker.worker_lock) says with
        # what code, and what to do: both or neither.
        code, hint = obj.get("code"), obj.get("hint")
        if (code is None) != (hint is None) or (code is not None and (
                type(code) is not str or code not in _ERROR_CODES or type(hint) is not str)):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "fatal with a bad code or hint")
        # And the pid of the worker holding the space, when known: `kint supervisor
        # status` names it in the space's state.
        holder = obj.get("holder_pid")
        if holder is not None and (code is None or type(holder) is not int or holder <= 0):
            raise ProtocolError(ErrorCode.BAD_REQUEST, "fatal with a bad holder_pid")
    return obj


def reply_too_large(body: Any) -> bool:
    """Whether a reply's body is more than a client reads."""
    return len(body) > MAX_MESSAGE_BYTES


def decode_from_supervisor(header: bytes, body: bytes) -> dict[str, Any]:
    if len(body) > MAX_MESSAGE_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, "back-socket body over the size limit")
    obj = _load(header)
    kind = obj.get("kind")
    if type(kind) is not str or kind not in _SUPERVISOR_KINDS:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"unknown supervisor message kind {kind!r}")
    if kind == "req" and (not _has_id(obj) or not body):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "req without an id or a request")
    return obj


# The refusal of a `req` whose deadline is no number. BAD_REQUEST's default hint sends the
# user to fix a value of the command's, which they never set: the supervisor sets it, and
# kint's own always sends a number, so only a bug (or a peer that is not kint's) gets here.
BAD_DEADLINE = "the supervisor sent the request a deadline that is not a number"
BAD_DEADLINE_HINT = ("the supervisor sets a request's deadline, not the command: this is a bug "
                     "in kint; nothing of the request ran, and the supervisor log has the "
                     "details")


def req_deadline(message: dict[str, Any], timeout_ms: int, now: float) -> float:
    """When the request of a `req` `message` is answered TIMEOUT by the supervisor
    (time.monotonic()), as the worker may trust it at `now`: the deadline the supervisor
    sent, never later than `now` plus the request's own `timeout_ms` (already held to its
    op's bound by the decoder), so no peer stretches an op past the bound it asked for.
    A `req` without one (a supervisor of a kint before it was sent), or with a null one,
    is bounded the same way, from `now`; one that is no finite number is refused
    BAD_REQUEST. A deadline already past is kept as it is: the supervisor has answered, and
    nothing bound by it starts."""
    latest = now + timeout_ms / 1000.0
    given = message.get("deadline")
    if given is None:
        return latest
    if type(given) not in (int, float) or not math.isfinite(given):
        raise ProtocolError(ErrorCode.BAD_REQUEST, BAD_DEADLINE, BAD_DEADLINE_HINT)
    return min(float(given), latest)
