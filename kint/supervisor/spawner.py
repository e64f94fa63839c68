"""Starting worker processes cheaply.

Workers come from a `multiprocess` forkserver whose preload has already imported the heavy
modules (web3, eth_account, the Sibyl SDK, the worker itself). A fork of that server
shares those pages copy-on-write, so a worker costs a few MB of its own and starts in a
fraction of the seconds a fresh interpreter would need. The preload ends with
kint.supervisor.forkserver_heap: the modules workers load on first use, then a freeze of the
heap, so a worker's garbage collections keep those pages shared.

The preload takes most of a second of CPU (seconds on a loaded box), and most calls a
supervisor answers first need no worker (a ping, a status, the wait of a CLI that started
it). So it runs in the background (`warm_up_in_background`), begun once the supervisor's
sockets are bound (the front door counts what it opens from there,
front_door.FrontDoor.before_warm_up), while the supervisor serves; the loop spawns no
worker until `ready_fd` says it is done (`take_ready`): a fork asked of a forkserver still
importing would block the loop until its preload ended.

The forkserver skips a preload module whose import fails, silently (multiprocess'
`forkserver.main`); a worker then runs without it (for the test suite and `kint demo`,
without their account gate). The warm-up's child, forked from the forkserver, names any
preload module it does not find loaded, with the import's error, and the supervisor says
so in its log and its status.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

import multiprocess
import multiprocess.forkserver

from kint.tenant_worker.config import WorkerConfig

log = logging.getLogger("kint.supervisor")

# The forkserver imports these in order; the first sets the process up (see that module).
PRELOAD = [
    "kint.supervisor.forkserver_start",
    "kint.tenant_worker.worker_start",
    "sibyl_memory_client",
    "eth_account",
    "web3",
]
# Imported after every other preload, the test suite's too (see that module).
HEAP_PRELOAD = "kint.supervisor.forkserver_heap"
# How long the warm-up waits for the forkserver's first child to start, and then to answer.
WARM_UP_BOUND_S = 120.0


def _missing_preloads(names: list[str], conn: Any) -> None:
    """Run in the warm-up's child, forked from the forkserver, whose modules it sees: send
    each of `names` the forkserver did not import, with why (the import's error, tried
    again here; the child exits right after, so what that import loads is never kept)."""
    import importlib
    import sys

    missing = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
            why = "it imports here, but the forkserver's import failed"
        except BaseException as err:  # noqa: BLE001 - any failure is the answer sought
            why = f"{type(err).__name__}: {err}"
        missing.append(f"{name} ({why})")
    try:
        conn.send(missing)
    except (BrokenPipeError, ConnectionResetError):
        # The supervisor that asked has stopped: the forkserver had forked this child just
        # before the stop (a forkserver still importing then is ended, and forks nothing:
        # Spawner.close), or had not yet been recorded for close to end. Nobody is left to
        # tell; a traceback on the supervisor's stderr would read as a crash's.
        pass
    finally:
        conn.close()


def _run_worker(config: WorkerConfig, token: bytes) -> None:
    """The target a spawn names: the worker module is imported here, in the forked worker,
    where the forkserver's preload has it already. Named directly, it would be imported in
    the supervisor to be pickled by reference: web3, eth_account and Sibyl loaded into a
    process that never runs them (~28 -> ~80 MiB resident), and its loop stalled for the
    import (~0.5 s, seconds on a loaded box) at its first spawn. The collector runs in
    every worker, whatever its forkserver's preload did (it pauses it while importing:
    kint.supervisor.forkserver_start; a forkserver that could not import forkserver_heap
    never ran it again)."""
    import gc

    gc.enable()
    from kint.tenant_worker.worker_start import run_worker

    run_worker(config, token)


class Spawner:
    """`extra_preload` names more modules for the forkserver to import first. It is set in
    code only: the test suite and the sandboxed demo use it to install Sibyl's test account
    gate in every worker; nothing a user sets can reach it."""

    def __init__(self, extra_preload: tuple[str, ...] = ()) -> None:
        self._ctx = multiprocess.get_context("forkserver")
        self.preload = [*PRELOAD, *extra_preload, HEAP_PRELOAD]
        self._ctx.set_forkserver_preload(self.preload)
        # The warm-up thread writes one byte here when it is done; the loop polls the
        # other end (`ready_fd`), so it never waits on the thread.
        self._ready_r, self._ready_w = os.pipe()
        os.set_blocking(self._ready_r, False)
        self._thread: threading.Thread | None = None
        self._outcome: list[str] = []
        # Set by `close` before it ends a forkserver still importing: the warm-up's failure
        # that follows is the stop's doing, not news for the log.
        self._closing = False
        # Set by `take_ready`, in the loop's thread only.
        self.ready = False
        self.missing_preload: list[str] = []

    def ready_fd(self) -> int:
        """Readable once the background warm-up has ended, well or not."""
        return self._ready_r

    def warm_up_in_background(self) -> None:
        """Start the forkserver and its preload in a thread of this process, which ends
        with one throwaway child forked from it (`Process.start` returns once the fork is
        made, so after the preload)."""
        self._thread = threading.Thread(target=self._warm_up, name="kint-forkserver-warm-up",
                                        daemon=True)
        self._thread.start()

    def _warm_up(self) -> None:
        try:
            self._outcome = self._check_preload()
        except Exception as err:  # a spawn will fail the same way, and say so for its space
            if not self._closing:
                log.exception("the worker forkserver did not start")
            self._outcome = [f"(the forkserver did not start: {err})"]
        finally:
            os.write(self._ready_w, b"!")

    def _check_preload(self) -> list[str]:
        reader, writer = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=_missing_preloads, args=(self.preload, writer),
                                 name="kint-forkserver-warm-up", daemon=True)
        proc.start()
        writer.close()
        try:
            if not reader.poll(WARM_UP_BOUND_S):
                return ["(the forkserver's first child did not answer)"]
            return list(reader.recv())
        except EOFError:
            return ["(the forkserver's first child exited without an answer)"]
        finally:
            reader.close()
            proc.join(WARM_UP_BOUND_S)

    def take_ready(self) -> list[str]:
        """For the loop, once `ready_fd` is readable: mark the forkserver ready and return
        the preload modules it lacks (empty when it has them all)."""
        try:
            os.read(self._ready_r, 1)
        except BlockingIOError:
            return []
        if self._thread is not None:
            self._thread.join()
        self.ready = True
        self.missing_preload = self._outcome
        return self.missing_preload

    def close(self) -> None:
        """Close the warm-up's pipe, unless its thread still runs (a stop during the
        preload): it would write to a descriptor number the process may have reused. A
        forkserver still importing then is ended (`_end_unready_forkserver`)."""
        if self._thread is not None and self._thread.is_alive():
            self._end_unready_forkserver()
            return
        for fd in (self._ready_r, self._ready_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _end_unready_forkserver(self) -> None:
        """A stop during the warm-up (the thread still runs, so no worker was forked): the
        forkserver would go on with its preload to the end (most of a second of CPU, seconds
        on a loaded box) before it looks whether its supervisor is there, for no worker,
        and then fork the warm-up's child, whose request carries the descriptor that says
        so. SIGTERM ends it at once: nothing it runs takes SIGTERM (multiprocess' forkserver
        sets SIGINT's and SIGCHLD's handlers only, after its preload). Its pid is
        multiprocess' own record of the forkserver it started. With none yet (a stop before
        the thread started the forkserver, or while it does so) it is left alone: one the
        thread starts then imports to the end, as every stopped forkserver did before. The
        SIGTERMed forkserver stays unreaped until this process exits, at once: nothing else
        reaps it, so its pid is never another process's. A multiprocess laid out otherwise
        (no module-level `_forkserver`) is said in one log line, never raised: the stop
        that calls this must go on to release the supervisor's pid file."""
        self._closing = True
        server = getattr(multiprocess.forkserver, "_forkserver", None)
        if server is None:
            log.warning("the stop could not find multiprocess' forkserver record to end the "
                        "forkserver still importing; it imports to the end")
            return
        pid = getattr(server, "_forkserver_pid", None)
        if not pid:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def spawn(self, config: WorkerConfig, token: bytes) -> Any:
        """Start a worker for `config`. `token`, its secret for this spawn, travels with the
        process object through the pipe the forkserver's child reads at start: it never
        appears in argv, the environment or a file another process could read."""
        proc = self._ctx.Process(target=_run_worker, args=(config, token),
                                 name=f"kint-worker-{config.space16}", daemon=False)
        proc.start()
        return proc
