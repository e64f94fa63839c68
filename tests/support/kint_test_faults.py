"""Preloaded into the worker forkserver by the test supervisor (run_supervisor.py): lets a
test kill a worker with SIGKILL, or fill a real (small, test-mounted) filesystem, at a
precise step of a push or a pull.

It wraps, inside the worker process only, the functions a push goes through:

- `before_send`:        `Anchor.send_raw`, before the signed transaction is sent;
- `after_send`:         `Anchor.send_raw`, once the endpoint accepted the transaction;
- `after_receipt`:      `Anchor.wait`, once the confirmed receipt is back;
- `after_set_entity`:   Sibyl's `MemoryClient.set_entity`, once one row is written (a pull
                        killed half-way through an epoch's replay);
- `after_mirror_save`:  `record_epoch` as `kint.tenant_worker.pending` imported it, once the
                        epoch is cached, the mirror saved and the watermark raised (the
                        pending file is still there);
- `before_record_epoch`: `record_epoch` as `kint.tenant_worker.pull` imported it, once every
                        row of the epoch a pull applies is in the store and before kint
                        records the epoch in its own state;
- `before_refine`:      `refine_from_cache` as `kint.tenant_worker.pull` imported it, once
                        every epoch of the pull is applied and recorded, before the rows'
                        provenance is refined from the epoch cache;
- `between_mirror_and_watermark`: `SpaceState.save_mirror`, once the mirror is saved (in
                        `record_epoch`, before the watermark is raised).
- `after_discard`:      `discard_released` as `kint.tenant_worker.pull` imported it, once a
                        `pull --discard-local` moved the store aside, before the pull writes
                        the copy into the kept notice (settled_notice.moved_aside).

And the steps of the key commands:

- `after_rekey_journal`: `save_rekey_journal` as `kint.tenant_worker.rekey` imported it,
                        once a rekey's new key is journalled, before its snapshot is built;
- `after_rekey_push`:   `went_through` as `kint.tenant_worker.rekey` imported it, once the
                        rekey's snapshot is anchored and recorded, before any key file is
                        rewritten;
- `before_rekey_recovery_file`: `write_recovery_file` as `kint.tenant_worker.rekey_settle`
                        imported it: the new wraps and key cache written, the recovery file
                        and the enrolment not yet;
- `before_connect_recovery_file`: `write_recovery_file` as `kint.tenant_worker.connect`
                        imported it: a fresh vault's wraps and key cache written, its
                        recovery file and enrolment not yet.

One step is not a crash: `unguarded_reply` makes the worker send its next reply's frame as
it is, over MAX_MESSAGE_BYTES or not (kint's worker refuses its own oversized replies, see
`kint.protocol.server_codec.encode_reply`), so a test reaches the supervisor's own answer
to a reply too large for its client.

Some wrappers hold rather than kill, each while the file an environment variable names
exists (at most HOLD_MAX_S):

- `KINT_TEST_HOLD_SETTLE`: a restarted worker's settlement of the journals the killed one
  left (`rekey_settle.settle_at_start`) waits for it to go, so a test can have another
  machine push between a kill and the settlement, as a worker that comes back late would
  meet it.
- `KINT_TEST_HOLD_DISPATCH`: the worker's main thread, as it decodes the next request it
  read (`decode_request` as `kint.tenant_worker.process` imported it), waits for it to go,
  having first created `<file>.reached`: what the supervisor sends meanwhile stays queued
  in the worker's socket, and no beat goes out until the file is gone.
- `KINT_TEST_HOLD_ATTACH`: the `attach` op (`kint.tenant_worker.sessions.attach`), on a
  pool thread, waits for it to go before it attaches the session.
- `KINT_TEST_HOLD_ARCHIVE`: a read of the store's archive (`archived_entities` as
  `kint.tenant_worker.local_state`, `verify_empty` and `drift` imported it), the store's rows
  already read, waits for it to go, having first created `<file>.reached`: a test takes
  another process's lock of the store in that gap, as a writer that starts there would.
- `KINT_TEST_HOLD_DRIFT_ROWS`: the drift check's read of the store's rows (`export_rows` as
  `kint.tenant_worker.drift` imported it), a push's own read of them made, waits for it to
  go, having first created `<file>.reached`, for the same purpose.

One wrapper shortens rather than holds: while the file `KINT_TEST_RECEIPT_WAIT` names exists,
`Anchor.wait` gives up after the seconds it holds (not kint's 60), so a test meets a receipt
wait that runs out without waiting a minute for it.

One wrapper fails every time rather than once: while the file `KINT_TEST_FAIL_START` names
exists and holds a space's 16 hex characters, a worker of that space fails as it starts
(`Worker.__init__` raises ImportError, as a module that no longer imports would), so a
test sees what the supervisor makes of a worker that can never start, and the other
spaces beside it. Given as `<space16>:enfile`, the start raises ENFILE instead (the
system's table of open files full, which cannot be brought about here: it is the whole
box's), and the worker exits EXIT_NO_SYSTEM_FILES (6) by kint's own code.

One wrapper makes a worker's last words late: while the file `KINT_TEST_LATE_FATAL` names
exists, a worker that cannot start (`_tell_supervisor`, `kint.tenant_worker.worker_start`) exits
at once without its `fatal`, and a child it forked sends that message (its pid and token,
on its route) after the exit: the order the race between a worker's message and its exit
gives rarely (the supervisor reads what waits on the back socket before it handles an exit;
the message has to be still in the kernel's hands then), here every time. The file's word
says how late: `soon`, LATE_FATAL_SOON_S after the worker is gone, well inside the time the
supervisor holds such an exit for its reason (kint/supervisor/exit_hold.py); `late`, once
the supervisor has logged the exit, so after that hold; `impostor`, as `late`, the child
sending first the same message under a wrong token, its reason FORGED_REASON. While the
file `<that file>.hold` exists, the child waits before it sends.

And its last replies: while the file `KINT_TEST_LATE_REPLY` names exists, a worker told to
stop keeps the answers of the ops it finishes from its socket (`Worker._forward_answers`)
and exits 0 without them; when the file says `late`, a child it forked as it closed
(`Worker.close`) sends them, as they were made (its pid and token, on its route), once the
supervisor has logged the exit and the file `<that file>.hold` is gone, and again every
RESEND_S until the supervisor has logged them read (the worker's own connection on that
route may not be gone yet, and the supervisor ignores a second one: `_send_until_read`),
for LATE_FATAL_WAIT_S after its first send; when it says `never`, nobody sends them. The
same race as the late `fatal`'s, for the answers a stopping worker sends just before it
exits.

Either child waits at most LATE_FATAL_WAIT_S for the exit, and at most HOLD_MAX_S for its
`.hold` file, less once the supervisor is gone, then sends anyway. It closes its copy of
the worker's lock first (the worker took it as it began), so the space's next worker never
waits behind a child that only has messages to send.

Nothing happens unless `KINT_TEST_CRASH_FLAG` (set only by tests) names a file that exists
and whose first word is the step. The worker deletes the file before it acts, so it acts
once. A second word, when given, limits it to the space whose 16 hex characters it is.
The action is SIGKILL, unless a third word `fill:FOLDER` is given: then the worker writes a
`ballast` file into FOLDER until the filesystem refuses with ENOSPC (the test mounted a
small tmpfs there), and carries on, so that kint's next real write meets a really full disk
at exactly that step; the test frees the space by deleting the ballast. kint's own code is
unchanged; kint reads none of this.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import signal
from typing import Any, Callable

FLAG_ENV = "KINT_TEST_CRASH_FLAG"
STEPS = ("before_send", "after_send", "after_receipt", "after_mirror_save",
         "after_set_entity", "before_record_epoch", "before_refine",
         "between_mirror_and_watermark", "after_discard", "after_rekey_journal",
         "after_rekey_push", "before_rekey_recovery_file", "before_connect_recovery_file",
         "unguarded_reply")
BALLAST = "ballast"
HOLD_ENV = "KINT_TEST_HOLD_SETTLE"
HOLD_DISPATCH_ENV = "KINT_TEST_HOLD_DISPATCH"
HOLD_ATTACH_ENV = "KINT_TEST_HOLD_ATTACH"
HOLD_ARCHIVE_ENV = "KINT_TEST_HOLD_ARCHIVE"
HOLD_DRIFT_ROWS_ENV = "KINT_TEST_HOLD_DRIFT_ROWS"
HOLD_MAX_S = 120.0
FAIL_START_ENV = "KINT_TEST_FAIL_START"
RECEIPT_WAIT_ENV = "KINT_TEST_RECEIPT_WAIT"
LATE_FATAL_ENV = "KINT_TEST_LATE_FATAL"
LATE_REPLY_ENV = "KINT_TEST_LATE_REPLY"
FORGED_REASON = "forged by an impostor"
# How long the late sender waits for the exit to be logged before it sends anyway (a child
# orphaned by a test that ended is gone soon after), and how long the late reply's sender
# sends it again for, once it first sent it (`_send_until_read`); a test's `.hold` file is
# waited for apart, HOLD_MAX_S at most.
LATE_FATAL_WAIT_S = 10.0
# How long the late reply's sender waits for the supervisor to log it read before it sends
# it again (`_send_until_read`).
RESEND_S = 0.2
# How long after the worker's exit the sender sends in the `soon` mode: well inside the
# supervisor's hold for a reason (exit_hold.REASON_GRACE_S, 0.5 s; a test that needs the
# reason inside it every time lengthens it, KINT_TEST_REASON_GRACE_S).
LATE_FATAL_SOON_S = 0.05


def _fill(folder: str) -> None:
    """Write FOLDER/ballast until its filesystem is full: large blocks first, then single
    bytes, so that not even a page is left."""
    with open(os.path.join(folder, BALLAST), "ab", buffering=0) as fh:
        for block in (1 << 20, 4096, 1):
            chunk = b"\0" * block
            while True:
                try:
                    fh.write(chunk)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break


def _take(step: str) -> list[str] | None:
    """The flag's words when it names `step` (and this space, if it names one), the flag
    deleted so it acts once; else None."""
    path = os.environ.get(FLAG_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            words = fh.read().split()
    except FileNotFoundError:
        return None
    if not words or words[0] != step:
        return None
    if len(words) > 1 and words[1] != _space16():
        return None
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None  # another thread or process took it first
    return words


def _crash_if(step: str) -> None:
    words = _take(step)
    if words is None:
        return
    if len(words) > 2 and words[2].startswith("fill:"):
        _fill(words[2][len("fill:"):])
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _space16() -> str | None:
    import multiprocess

    proc = multiprocess.current_process()
    name = getattr(proc, "name", "") or ""
    return name[len("kint-worker-"):] if name.startswith("kint-worker-") else None


def _around(fn: Callable[..., Any], before: str | None, after: str | None) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            _crash_if(before)
        result = fn(*args, **kwargs)
        if after:
            _crash_if(after)
        return result

    wrapper.__kint_test_faults__ = True  # type: ignore[attr-defined]
    return wrapper


def _held(fn: Callable[..., Any], env: str = HOLD_ENV,
          say_reached: bool = False) -> Callable[..., Any]:
    """`fn`, waiting first while the file `env` names exists (`<file>.reached` created
    when `say_reached` and the file is there)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import time

        hold = os.environ.get(env)
        if hold and os.path.exists(hold) and say_reached:
            open(hold + ".reached", "w").close()
        deadline = time.monotonic() + HOLD_MAX_S
        while hold and os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        return fn(*args, **kwargs)

    return wrapper


def _short_wait(wait: Callable[..., Any]) -> Callable[..., Any]:
    """`Anchor.wait`, with the timeout the KINT_TEST_RECEIPT_WAIT file holds while it
    exists, where the caller gave none."""
    @functools.wraps(wait)
    def wrapper(self: Any, tx_hash: str, *rest: Any, **kwargs: Any) -> Any:
        try:
            with open(os.environ.get(RECEIPT_WAIT_ENV) or "", encoding="utf-8") as fh:
                seconds = float(fh.read())
        except (OSError, ValueError):
            seconds = None
        if seconds is not None and not rest and "timeout_s" not in kwargs:
            kwargs["timeout_s"] = seconds
        return wait(self, tx_hash, *rest, **kwargs)

    return wrapper


def _unguarded(encode: Callable[..., bytes]) -> Callable[..., bytes]:
    @functools.wraps(encode)
    def wrapper(reply: Any, *rest: Any) -> bytes:
        if _take("unguarded_reply") is not None:
            import orjson

            return orjson.dumps(reply.to_dict())
        return encode(reply, *rest)

    return wrapper


def _failing_start(init: Callable[..., None]) -> Callable[..., None]:
    """`Worker.__init__`, raising first in the space the KINT_TEST_FAIL_START file names."""
    @functools.wraps(init)
    def wrapper(self: Any, config: Any, *rest: Any) -> None:
        path = os.environ.get(FAIL_START_ENV)
        try:
            with open(path or "", encoding="utf-8") as fh:
                doomed = fh.read().split()
        except OSError:
            doomed = []
        if config.space16 in doomed:
            raise ImportError("No module named 'kint_plugin_gone' (a test's broken module)")
        if f"{config.space16}:enfile" in doomed:  # the system's table of open files full
            raise OSError(errno.ENFILE, os.strerror(errno.ENFILE))
        init(self, config, *rest)
    return wrapper


def _logged(home: str, pattern: str) -> bool:
    """Whether the supervisor's log has a line matching `pattern`."""
    try:
        with open(os.path.join(home, "supervisor.log"), encoding="utf-8",
                  errors="replace") as fh:
            text = fh.read()
    except OSError:
        return False
    return re.search(pattern, text) is not None


def _exit_logged(home: str, pid: int) -> bool:
    """Whether the supervisor's log says it handled worker `pid`'s exit (its line names
    the worker's pid and the exit's reason: `WorkerExit._exited`)."""
    return _logged(home, rf": worker {pid} (?!spawned)")


def _close_worker_lock(config: Any) -> None:
    """Close this process's copy of the descriptor holding the space's worker lock (found
    by the lock file's inode): a flock is held while any copy is open."""
    from kint.paths import worker_lock_path

    try:
        lock = os.stat(worker_lock_path(config.home, config.space16))
        fds = [int(name) for name in os.listdir("/dev/fd")]
    except OSError:
        return
    for fd in fds:
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (lock.st_dev, lock.st_ino):
            os.close(fd)


def _wait_to_send(config: Any, pid: int, soon: bool = False,
                  hold: str | None = None) -> None:
    """Wait until the supervisor has logged worker `pid`'s exit, or LATE_FATAL_SOON_S after
    it exited (`soon`), LATE_FATAL_WAIT_S at most; then while the file `hold` exists,
    HOLD_MAX_S at most; either no longer than the supervisor lives."""
    import time

    from kint.envsettings import pid_alive

    _close_worker_lock(config)

    def waiting(done: Callable[[], bool], most_s: float) -> None:
        deadline = time.monotonic() + most_s
        while (not done() and time.monotonic() < deadline
               and pid_alive(config.supervisor_pid)):
            time.sleep(0.005 if soon else 0.05)

    if soon:
        waiting(lambda: os.getppid() != pid, LATE_FATAL_WAIT_S)  # the worker is gone
        time.sleep(LATE_FATAL_SOON_S)
    else:
        waiting(lambda: _exit_logged(config.home, pid), LATE_FATAL_WAIT_S)
    if hold is not None:  # the test's own hold: as long as it keeps it (HOLD_MAX_S at most)
        waiting(lambda: not os.path.exists(hold), HOLD_MAX_S)


def _send(config: Any, route: bytes, messages: list[list[Any]]) -> None:
    """Send `messages` (each its frames) on `route`, on a connection of their own."""
    import zmq

    zctx = zmq.Context()
    dealer = zctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.ROUTING_ID, route)
    dealer.setsockopt(zmq.LINGER, 500)
    dealer.connect(config.back_address)
    for frames in messages:
        dealer.send_multipart(frames)
    dealer.close()
    zctx.term()


def _send_late(config: Any, route: bytes, messages: list[list[Any]], pid: int,
               soon: bool = False, hold: str | None = None) -> None:
    """Send the worker `pid`'s `messages` on its `route`, as it would have, once its exit
    is logged, or LATE_FATAL_SOON_S after it exited (`soon`); not while the file `hold`
    exists (`_wait_to_send`)."""
    _wait_to_send(config, pid, soon, hold)
    _send(config, route, messages)


def _send_until_read(config: Any, route: bytes, messages: list[list[Any]], pid: int,
                     hold: str | None = None) -> None:
    """`_send_late`, then again on a fresh connection every RESEND_S until the supervisor's
    log says it read worker `pid`'s late reply (passed on, or dropped as answered already:
    last_words.py), for LATE_FATAL_WAIT_S from the first send: the test's `hold` however
    long, the resends are still there after it. Once was not enough: the child takes the
    exited worker's own routing id, and the supervisor's ROUTER (handover off, daemon.py)
    ignores a peer whose id is still registered; the exit can be logged before the old
    worker's connection is torn down, and the reply was lost about once in 16 runs
    (review30e S2). A copy read after the first is dropped as answered. (A late `fatal` is
    sent once: `_tell_supervisor`'s route was never connected before.)"""
    import time

    from kint.envsettings import pid_alive

    read = rf"worker {pid}'s reply to .* read after its exit|a reply from worker {pid}, "
    _wait_to_send(config, pid, hold=hold)
    deadline = time.monotonic() + LATE_FATAL_WAIT_S
    while time.monotonic() < deadline and pid_alive(config.supervisor_pid):
        _send(config, route, messages)
        resend_at = time.monotonic() + RESEND_S
        while time.monotonic() < resend_at:
            if _logged(config.home, read):
                return
            time.sleep(0.02)


def _in_a_child(send: Callable[[], None]) -> None:
    """Run `send` in a forked child, which exits after it; the caller goes on."""
    if os.fork() == 0:
        try:
            send()
        finally:
            os._exit(0)


def _late_fatal(tell: Callable[..., Any]) -> Callable[..., Any]:
    """`_tell_supervisor`, its message sent after the exit while the KINT_TEST_LATE_FATAL
    file exists: the worker exits at once, a forked child sends for it."""
    @functools.wraps(tell)
    def wrapper(config: Any, token: bytes, fatal: dict[str, Any], exit_code: int) -> Any:
        flag = os.environ.get(LATE_FATAL_ENV)
        if not flag or not os.path.exists(flag):
            return tell(config, token, fatal, exit_code)
        with open(flag, encoding="utf-8") as fh:
            mode = (fh.read().split() or ["late"])[0]
        from kint.protocol import worker_wire

        pid = os.getpid()
        messages = [worker_wire.encode({**fatal, "pid": pid,
                                        "token": worker_wire.token_text(token)})]
        if mode == "impostor":  # first, on the same route, under a token of zeros
            messages.insert(0, worker_wire.encode(
                {**fatal, "reason": FORGED_REASON, "pid": pid,
                 "token": worker_wire.token_text(bytes(len(token)))}))
        _in_a_child(lambda: _send_late(config, worker_wire.route_for(token), messages, pid,
                                       mode == "soon", flag + ".hold"))
        os._exit(exit_code)
    return wrapper


def _late_reply_flag() -> str | None:
    """What the KINT_TEST_LATE_REPLY file says (`late` or `never`), None without it."""
    flag = os.environ.get(LATE_REPLY_ENV)
    try:
        with open(flag or "", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _replies_kept(forward: Callable[..., None]) -> Callable[..., None]:
    """`Worker._forward_answers`: a stopping worker's answers kept from its socket while
    the KINT_TEST_LATE_REPLY file exists, on the worker (`_kept_answers`)."""
    @functools.wraps(forward)
    def wrapper(self: Any) -> None:
        if self.stopping and self._answers and _late_reply_flag() is not None:
            kept = self.__dict__.setdefault("_kept_answers", [])
            answers = self._answers
            while answers:  # the pool's threads append to it: none lost between two calls
                kept.append(answers.popleft())
            return
        forward(self)
    return wrapper


def _replies_late(close: Callable[..., None]) -> Callable[..., None]:
    """`Worker.close`: the answers `_replies_kept` kept, sent by a forked child once the
    supervisor has logged the worker's exit, until it has read them (the file says `late`:
    `_send_until_read`), or never."""
    @functools.wraps(close)
    def wrapper(self: Any) -> None:
        import zmq

        kept = self.__dict__.get("_kept_answers")
        route = self.dealer.getsockopt(zmq.ROUTING_ID)
        close(self)
        if kept and _late_reply_flag() == "late":
            pid = os.getpid()
            hold = f"{os.environ.get(LATE_REPLY_ENV)}.hold"
            _in_a_child(lambda: _send_until_read(self.config, route, kept, pid, hold))
    return wrapper


def _install() -> None:
    from kint.chain.anchor import Anchor
    from kint.tenant_worker import pending, pull
    from kint.tenant_worker.statefiles import SpaceState

    if getattr(Anchor.send_raw, "__kint_test_faults__", False):
        return
    Anchor.send_raw = _around(Anchor.send_raw, "before_send", "after_send")  # type: ignore
    Anchor.wait = _around(_short_wait(Anchor.wait), None, "after_receipt")  # type: ignore
    pending.record_epoch = _around(pending.record_epoch, None, "after_mirror_save")
    pull.record_epoch = _around(pull.record_epoch, "before_record_epoch", None)
    pull.refine_from_cache = _around(pull.refine_from_cache, "before_refine", None)
    pull.discard_released = _around(pull.discard_released, None, "after_discard")
    SpaceState.save_mirror = _around(SpaceState.save_mirror, None,  # type: ignore
                                     "between_mirror_and_watermark")
    from kint.tenant_worker import connect, rekey, rekey_settle

    rekey.save_rekey_journal = _around(rekey.save_rekey_journal, None, "after_rekey_journal")
    rekey.went_through = _around(rekey.went_through, None, "after_rekey_push")
    rekey_settle.write_recovery_file = _around(rekey_settle.write_recovery_file,
                                               "before_rekey_recovery_file", None)
    connect.write_recovery_file = _around(connect.write_recovery_file,
                                          "before_connect_recovery_file", None)
    rekey_settle.settle_at_start = _held(rekey_settle.settle_at_start)
    from kint.tenant_worker import op_replies, process, worker_start

    process.Worker.__init__ = _failing_start(process.Worker.__init__)  # type: ignore
    worker_start._tell_supervisor = _late_fatal(worker_start._tell_supervisor)
    process.Worker._forward_answers = _replies_kept(process.Worker._forward_answers)  # type: ignore
    process.Worker.close = _replies_late(process.Worker.close)  # type: ignore
    op_replies.encode_reply = _unguarded(op_replies.encode_reply)  # type: ignore[assignment]
    process.decode_request = _held(process.decode_request, HOLD_DISPATCH_ENV, True)
    from kint.tenant_worker import sessions

    sessions.attach = _held(sessions.attach, HOLD_ATTACH_ENV)
    from kint.tenant_worker import drift, local_state, verify_empty

    for reader in (local_state, verify_empty, drift):
        reader.archived_entities = _held(reader.archived_entities, HOLD_ARCHIVE_ENV, True)
    drift.export_rows = _held(drift.export_rows, HOLD_DRIFT_ROWS_ENV, True)
    from sibyl_memory_client import MemoryClient

    MemoryClient.set_entity = _around(MemoryClient.set_entity, None,  # type: ignore
                                      "after_set_entity")


_install()
