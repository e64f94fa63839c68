"""How the worker runs an op and answers it: on its own thread or the pool, the reply made
and encoded, the pool's answers queued for the thread that owns the socket.

Why a module of its own: the main thread owns the DEALER socket (a ZeroMQ socket belongs to
one thread), so an op that runs on the pool has its reply encoded there, queued, and a byte
written on the wake pipe the loop already polls; the loop only forwards it. Which ops skip
the pool, what an op's failure becomes (a refusal with a code, BUSY when the box's open
files ran out, INTERNAL for a bug) and what is counted in flight for the heartbeat are the
same concern: an op from its hand-off to its answer on the socket.

`OpReplies` is one of the parts kint.tenant_worker.process.Worker is made of; the
attributes it reads are the worker's, named below.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from kint.open_files import (SYSTEM_FILES_HINT, WORKER_ROOM_HINT, out_of_files_message,
                             ran_out_of_files, system_out_of_files)
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol import worker_wire
from kint.protocol.envelope import Reply, Request, error_reply, ok_reply
from kint.protocol.server_codec import encode_reply
from kint.tenant_worker.handlers import HANDLERS, INLINE_HANDLERS, Handler
from kint.tenant_worker.request_deadline import Deadline, running_until
from kint.tenant_worker.store_errors import StoreNotCounted
from kint.zmq_frames import send_frames

if TYPE_CHECKING:
    import zmq

    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.own_memory import MemoryReading
    from kint.tenant_worker.space import SpaceContext
    from kint.tenant_worker.wake_pipe import WakePipe

log = logging.getLogger("kint.worker")


def runs_inline(request: Request) -> bool:
    """The plain status (a few stats, cached counts) runs on the main thread: a thread
    hand-off would cost more than the op. Only while its counts hold: a store changed
    since is counted on a thread of its own (`OpReplies.run_inline`, the worker's
    `counts`). So does `note_write` (a dict entry under a lock), for its order: a session
    casts it for a write and may send `push` right after; on the pool the push could pass
    the hold's check on another thread before the note was taken, and be HELD for the
    session's own write. Everything else runs on the pool, so a slow op never delays a
    heartbeat."""
    return (request.op == "note_write"
            or (request.op == "status" and not request.args.get("chain")))


class InFlight:
    """The ops running in the pool, for the heartbeat. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[str, tuple[str, float]] = {}

    def start(self, rid: str, op: str) -> None:
        with self._lock:
            self._ops[rid] = (op, time.monotonic())

    def finish(self, rid: str) -> None:
        with self._lock:
            self._ops.pop(rid, None)

    def snapshot(self) -> tuple[int, str | None, float | None]:
        with self._lock:
            if not self._ops:
                return 0, None, None
            op, started = min(self._ops.values(), key=lambda item: item[1])
            return len(self._ops), op, time.monotonic() - started

    def named(self, limit: int) -> list[list[Any]] | None:
        """Every op running, oldest first, as [name, age_s], up to `limit` (the beat's
        `ops`), or None when none runs."""
        with self._lock:
            now = time.monotonic()
            ops = sorted(self._ops.values(), key=lambda item: item[1])[:limit]
        return [[op, round(now - started, 3)] for op, started in ops] or None


class OpReplies:
    """An op's run and its answer, for the worker that owns the socket."""

    # The worker's, set in its __init__.
    config: WorkerConfig
    ctx: SpaceContext
    inflight: InFlight
    memory: MemoryReading
    dealer: zmq.Socket
    _pid: int
    _token: str
    _answers: collections.deque[list[bytes]]
    wake_pipe: WakePipe
    _busy_now: Callable[[], None]

    def _reply_message(self, internal_id: str, reply: Reply,
                       op: str | None = None) -> list[bytes]:
        """The reply's two frames: the header the supervisor routes on (its own id for the
        request), and the reply frame the client gets, under the client's id. An answer
        too large to send becomes TOO_LARGE here (`encode_reply`): the supervisor's back
        socket would drop it, and its client would wait for TIMEOUT."""
        return worker_wire.encode({"kind": "reply", "id": internal_id, "pid": self._pid,
                                   "token": self._token}, encode_reply(reply, op))

    def _run_in_pool(self, internal_id: str, request: Request,
                     deadline: Deadline | None = None) -> tuple[str, list[bytes]]:
        """An op on a pool thread, counted in flight (the heartbeat reports it) until its
        answer is queued, under its request's `deadline` (request_deadline.py). Encoded
        here, once, as the back-socket message, which the pool hands to `_send_reply` once
        this thread is idle again: the main thread only forwards it."""
        try:
            with running_until(deadline):
                reply = self._run(request)
            return internal_id, self._reply_message(internal_id, reply, request.op)
        except BaseException:  # escaped `_run` (logged by the pool): no answer to wait for
            self._done(internal_id)
            raise

    def _done(self, internal_id: str) -> None:
        self.inflight.finish(internal_id)
        self.memory.worked()

    def _send_reply(self, answer: tuple[str, list[bytes]]) -> None:
        """On a pool thread: queue the answer for the main thread and wake its poll. The op
        leaves the in-flight count only once its answer is queued, so a stop that finds
        nothing in flight forwards every answer before the worker exits. The byte goes
        after the answer, so the loop that reads the byte finds the answer; a pipe already
        full of bytes is readable anyway."""
        internal_id, frames = answer
        self._answers.append(frames)
        self._done(internal_id)
        self.wake_pipe.wake()  # nothing once closed: an op outliving the stop grace

    def _forward_answers(self) -> None:
        """Send the pool's answers that wait, in order (main thread)."""
        answers = self._answers
        while answers:
            send_frames(self.dealer, answers.popleft(), block=True)
            self._busy_now()

    def run_inline(self, req: Request) -> Reply | None:
        """`req` run on the main thread (`runs_inline`), or None when it would read the
        store (a status whose counts the store's change outdated): the caller hands it to
        its count thread then, where a count that waits on another process's lock of the
        store (READ_BUSY_WAIT_S) holds no beat, and which no op of the pool holds up. The
        call's settings, which the handler's wrapper takes from its arguments
        (handlers.with_settings), are put back for that run."""
        sent = req.args.get("settings")
        try:
            return self._run(req, INLINE_HANDLERS)
        except StoreNotCounted:
            if sent is not None:
                req.args["settings"] = sent
            return None

    def _run(self, req: Request, handlers: dict[str, Handler] = HANDLERS) -> Reply:
        try:
            handler = handlers.get(req.op)
            if handler is None:
                raise ProtocolError(ErrorCode.UNKNOWN_OP, f"this worker does not serve {req.op!r}",
                                    request_id=req.id)
            reply = ok_reply(req.id, handler(self.ctx, req.args))
        except ProtocolError as err:  # Sibyl's refusals too (handlers.sibyl_refusal)
            if err.code == ErrorCode.INTERNAL and ran_out_of_files(err):
                return self._out_of_files(req, err, err.message)
            reply = error_reply(req.id, err.code, err.message, err.hint)
        except StoreNotCounted:  # an inline status's: `run_inline` hands it to the pool
            raise
        except Exception as err:
            if ran_out_of_files(err):
                return self._out_of_files(req, err, str(err))
            log.error("op failed in space %s", self.config.space16, exc_info=True)
            reply = error_reply(req.id, ErrorCode.INTERNAL, f"{req.op} failed inside the worker")
        return reply

    def _out_of_files(self, req: Request, err: BaseException, what_failed: str) -> Reply:
        """`req` failed because this worker is out of file descriptors (kint/open_files.py):
        the box's limit, said as such, never a bug in kint. One warning line, no traceback.
        The process's limit (EMFILE) has the `ulimit -n` hint; the system's table full
        (ENFILE, `err` or an error in its chain) its own, which no `ulimit -n` mends."""
        system = system_out_of_files(err)
        message = out_of_files_message(
            f"{req.op} in the worker of space {self.config.space16}", what_failed, system)
        log.warning("%s", message)
        return error_reply(req.id, ErrorCode.BUSY, message,
                           SYSTEM_FILES_HINT if system else WORKER_ROOM_HINT)
