"""The worker forkserver's heap, made ready to share: imported last by its preload, it
imports what a worker's ops load on first use and then freezes every object so far into
the garbage collector's permanent generation (`gc.freeze`).

Why (the many-tenants bench, bench/RESULTS.md, measured a connected worker at 28 MiB PSS
against 15 for an idle one): a worker shares the forkserver's pages copy-on-write, and
every page it writes to becomes its own.

- A full collection in a worker walks every tracked object and writes to its header, so
  each page of web3's, eth_account's and Sibyl's objects (~24 MiB) became the worker's own
  once a worker had allocated enough to run one. Frozen objects are never walked. What a
  worker allocates itself is collected as before.
- A module a worker imports on first use (connect, push and the chain code behind them)
  is built in that worker's private memory, and importing it writes to the shared import
  machinery as well; imported here, it is built once and shared by every worker.

Importing this module freezes the importing process's heap, which only a forkserver
wants: nothing else imports it. The collector, paused since the preload's first module
(kint.supervisor.forkserver_start), runs again from here, also when an import here fails.
"""

from __future__ import annotations

import gc
import importlib

# What the worker's ops import on first use (kint.tenant_worker.handlers, .status): the chain
# ops and the modules behind them, and pycryptodome's CTR mode, which it loads on first use.
WORKER_MODULES = (
    "kint.tenant_worker.connect",
    "kint.tenant_worker.push",
    "kint.tenant_worker.pull",
    "kint.tenant_worker.rekey",
    "kint.tenant_worker.doctor",
    "kint.tenant_worker.sessions",
    "kint.tenant_worker.session_handoff",
    "kint.tenant_worker.pending",
    "kint.tenant_worker.watcher",
    "kint.tenant_worker.cache_check",
    "kint.tenant_worker.data_key",
    "kint.tenant_worker.disk_space",
    "kint.tenant_worker.store_holders",
    "kint.settings.report",
    "Crypto.Cipher._mode_ctr",
    "kint.supervisor.spawner",  # holds the spawn target every worker starts in
)

try:
    from kint.proc_name import FORKSERVER, set_process_name

    for _name in WORKER_MODULES:
        importlib.import_module(_name)
    # Only the forkserver imports this module: the place to name it (kint.proc_name).
    set_process_name(FORKSERVER)
finally:
    gc.freeze()
    gc.enable()
