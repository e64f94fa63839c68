"""A worker process's start: the target the supervisor's spawn runs in the forked process,
from the fork to the loop (kint.tenant_worker.process) and back to its exit.

Before it serves, the worker checks it has open files to spare, names itself, logs to
KINT_HOME's supervisor.log (the one log of the supervisor and its workers), takes its
settings (the config file's, this space's table included, over the supervisor's
environment) and its space's worker lock (kint.tenant_worker.worker_lock),
taken before anything else of the space: the next supervisor's worker of the space waits
for it, and refuses its start rather than run beside it. A start that cannot go on is
told to the supervisor as `fatal` (its reason, and for a lock held by another worker the
code and hint it answers the space's requests with) and an exit code the supervisor reads
(kint.protocol.worker_wire), never a bare crash; one with no files to spare says it by its
exit code alone, as sending would need a file. Once started, it settles the journals
the last worker left and takes over the agent sessions a recycled one handed over.

The worker dies with its supervisor: PR_SET_PDEATHSIG here (its parent is the
forkserver, which exits when the supervisor does), and the loop's check of the
supervisor's pid on every beat.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from typing import Any, NoReturn

import zmq

from kint import settings
from kint.logs import setup_file_logging
from kint.open_files import (WORKER_START_FDS, open_files, ran_out_of_files,
                              system_out_of_files)
from kint.paths import worker_lock_path
from kint.proc_name import WORKER, set_process_name
from kint.protocol import ErrorCode, worker_wire
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.process import Worker
from kint.tenant_worker.store import check_openable
from kint.tenant_worker.store_errors import StoreDenied, StoreUnreadable
from kint.tenant_worker.worker_lock import WorkerLockHeld, hold_worker_lock
from kint.zmq_frames import send_frames

log = logging.getLogger("kint.worker")

# The exit codes of a worker that never served (EXIT_FATAL, EXIT_REFUSED) are the
# supervisor's to read: kint.protocol.worker_wire.
EXIT_FATAL, EXIT_REFUSED = worker_wire.EXIT_FATAL, worker_wire.EXIT_REFUSED


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass


def run_worker(config: WorkerConfig, token: bytes) -> None:
    """The process target. Exits 0 on a stop, EXIT_FATAL when the space cannot be served,
    EXIT_REFUSED when another worker of the space holds its worker lock, EXIT_NO_FILES
    when it began short of open files under its limit, EXIT_NO_SYSTEM_FILES when the
    system's table of them was full (ENFILE): each a refusal, never a crash.
    `token` is this spawn's secret, made by the supervisor (see kint.protocol.worker_wire)."""
    _die_with_parent()
    files = open_files()
    if files is not None and files.limit - files.open < WORKER_START_FDS:
        os._exit(worker_wire.EXIT_NO_FILES)  # before anything that opens one (worker_wire)
    set_process_name(WORKER)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when we stop
    try:
        setup_file_logging(config.home)
        # This process is the daemon, serving one space: its settings are the config
        # file's (this space's table included) over the supervisor's environment, and each
        # request's.
        settings.configure(home=config.home, daemon=True,
                           space=(config.label, config.space16, config.space_id))
        # Before anything of the space is touched, and held until the process ends: no
        # second worker of the space runs beside one an earlier supervisor left.
        hold_worker_lock(worker_lock_path(config.home, config.space16), config.space16,
                         config.supervisor_pid)
        worker = Worker(config, token)
    except WorkerLockHeld as held:
        log.error("space %s cannot start: %s", config.space16, held)
        _tell_supervisor(config, token, {"kind": "fatal", "reason": str(held),
                                         "code": ErrorCode.WORKER_DOWN.value,
                                         "hint": held.hint,
                                         "holder_pid": held.holder.pid}, EXIT_REFUSED)
    except Exception as err:  # noqa: BLE001 - whatever it is, the supervisor is told
        if ran_out_of_files(err):  # the start took more than the check above left free
            # (libzmq's own threads open their pollers and signalers; SQLite the store),
            # or the system's table of open files is full, which no `ulimit -n` mends.
            os._exit(worker_wire.EXIT_NO_SYSTEM_FILES if system_out_of_files(err)
                     else worker_wire.EXIT_NO_FILES)
        _cannot_start(config, token, err)
    signal.set_wakeup_fd(worker.wake_pipe.write_fd)  # first: a SIGTERM from here on wakes the loop
    signal.signal(signal.SIGTERM, lambda *_: worker.stop_requested.set())
    try:
        check_openable(config.db)
    except StoreDenied as err:
        # Nothing says the store is damaged, only closed to this user: the worker serves,
        # its status saying SIBYL_ERROR with how to fix the permission, and the first call
        # after the fix reads it (a fatal exit quarantined the space until a restart).
        log.warning("space %s: %s; the worker serves, and reads the store once it may",
                    config.space16, err)
    except StoreUnreadable as err:
        log.error("space %s cannot start: %s", config.space16, err)
        worker.dealer.connect(config.back_address)
        worker._send({"kind": "fatal", "reason": str(err)})
        worker.close()
        logging.shutdown()
        os._exit(EXIT_FATAL)
    log.info("worker for space %s (%s) serving %s", config.space16, config.label, config.db)
    worker.pool.submit(worker.sharing.look)  # the first look; the beats start the later ones
    from kint.tenant_worker.rekey_settle import rekey_in_progress

    if worker.ctx.state.files["pending"].exists() or rekey_in_progress(worker.ctx):
        worker.pool.submit(worker.settle_at_start)
    from kint.tenant_worker.session_handoff import take_over

    watcher = take_over(worker.ctx)  # the sessions a recycled worker left, before serving
    if watcher is not None:
        worker.pool.submit(watcher.start)
    code = worker.serve()
    log.info("worker for space %s exits (%d)", config.space16, code)
    worker.close()
    logging.shutdown()
    os._exit(code)


def _cannot_start(config: WorkerConfig, token: bytes, err: Exception) -> NoReturn:
    """The worker failed before it could serve (a module that does not import, a file it
    cannot open at start): its traceback goes to the log, and its reason to the supervisor
    as `fatal`, so `kint supervisor status` and the QUARANTINED refusal say why rather than
    `exited with code 1` (the traceback only in the daemon's raw stderr). A crash:
    restarts, and a quarantine with backoff when it fails every time."""
    reason = f"the worker could not start: {type(err).__name__}: {err}"
    log.error("space %s: %s", config.space16, reason, exc_info=True)
    _tell_supervisor(config, token, {"kind": "fatal", "reason": reason}, EXIT_FATAL)


def _tell_supervisor(config: WorkerConfig, token: bytes, fatal: dict[str, Any],
                     exit_code: int) -> NoReturn:
    """Send `fatal` on a socket of its own and exit with `exit_code`. One that carries a
    `code` and a `hint` is a start refused, not a crash (another worker of the space holds
    it: kint.tenant_worker.worker_lock), and exits EXIT_REFUSED: the supervisor answers the
    space's requests with them and restarts nothing, and takes the exit code alone as the
    refusal when it handles the exit before the message."""
    zctx = zmq.Context()
    try:
        dealer = zctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.ROUTING_ID, worker_wire.route_for(token))
        dealer.setsockopt(zmq.LINGER, 2000)  # the reason leaves before the exit
        dealer.connect(config.back_address)
        send_frames(dealer, worker_wire.encode(
            {**fatal, "pid": os.getpid(), "token": worker_wire.token_text(token)}),
            block=False)
        dealer.close()
    except zmq.ZMQError:  # no supervisor to tell: the exit code says what it can
        pass
    finally:
        zctx.term()
    logging.shutdown()
    os._exit(exit_code)
