"""Starting worker processes cheaply.

Workers come from a `multiprocess` forkserver whose preload has already imported the heavy
modules (web3, eth_account, the Sibyl SDK, the worker itself). A fork of that server
shares those pages copy-on-write, so a worker costs a few MB of its own and starts in a
fraction of the seconds a fresh interpreter would need. The preload ends with
kint.supervisor.forkserver_heap: the modules workers load on first use, then a freeze of the
heap, so a worker's garbage collections keep those pages shared.
"""

from __future__ import annotations

import logging
from typing import Any

import multiprocess

from kint.tenant_worker.config import WorkerConfig

log = logging.getLogger("kint.supervisor")

PRELOAD = [
    "kint.tenant_worker.process",
    "sibyl_memory_client",
    "eth_account",
    "web3",
]
# Imported after every other preload, the test suite's too (see that module).
HEAP_PRELOAD = "kint.supervisor.forkserver_heap"


def _noop() -> None:
    return None


def _run_worker(config: WorkerConfig, token: bytes) -> None:
    """The target a spawn names: the worker module is imported here, in the forked worker,
    where the forkserver's preload has it already. Named directly, it would be imported in
    the supervisor to be pickled by reference: web3, eth_account and Sibyl loaded into a
    process that never runs them (~28 -> ~80 MiB resident), and its loop stalled for the
    import (~0.5 s, seconds on a loaded box) at its first spawn."""
    from kint.tenant_worker.process import run_worker

    run_worker(config, token)


class Spawner:
    """`extra_preload` names more modules for the forkserver to import first. It is set in
    code only: the test suite and the sandboxed demo use it to install Sibyl's test account
    gate in every worker; nothing a user sets can reach it."""

    def __init__(self, extra_preload: tuple[str, ...] = ()) -> None:
        self._ctx = multiprocess.get_context("forkserver")
        self._ctx.set_forkserver_preload([*PRELOAD, *extra_preload, HEAP_PRELOAD])

    def warm_up(self) -> None:
        """Start the forkserver and let it finish its imports now: `Process.start` waits for
        the fork, so a cold forkserver would stall the supervisor's loop on its first spawn."""
        proc = self._ctx.Process(target=_noop, name="kint-forkserver-warm-up")
        proc.start()
        proc.join(timeout=60)

    def spawn(self, config: WorkerConfig, token: bytes) -> Any:
        """Start a worker for `config`. `token`, its secret for this spawn, travels with the
        process object through the pipe the forkserver's child reads at start: it never
        appears in argv, the environment or a file another process could read."""
        proc = self._ctx.Process(target=_run_worker, args=(config, token),
                                 name=f"kint-worker-{config.space16}", daemon=False)
        proc.start()
        return proc
