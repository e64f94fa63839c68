"""Run as a script by tests/test_forkserver_heap.py: starts kint's worker forkserver (the
real Spawner, its real preload) in this process, runs `report` in one of its children as
a worker would run, and prints what it found as JSON. A script of its own, so the test
process never holds a forkserver."""

from __future__ import annotations

import gc
import json
import sys

# Modules a worker loads on first use; the forkserver must have built them already.
WORKER_OP_MODULES = ("kint.tenant_worker.connect", "kint.tenant_worker.push",
                     "kint.chain.anchor")


def _private_dirty_kb() -> int:
    with open("/proc/self/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    raise RuntimeError("no Private_Dirty in smaps_rollup")


def report(conn) -> None:  # noqa: ANN001 - a multiprocess Connection
    """In a forkserver child: what it inherited, and what one full collection costs it."""
    loaded = {name: name in sys.modules for name in WORKER_OP_MODULES}
    frozen = gc.get_freeze_count()
    before = _private_dirty_kb()
    gc.collect()
    bridge = sys.modules.get("Crypto.Util._raw_api")
    conn.send({"frozen": frozen, "loaded": loaded,
               "full_collection_kb": _private_dirty_kb() - before,
               "pycryptodome": getattr(bridge, "backend", None),
               "cffi_imported": "cffi" in sys.modules, "collecting": gc.isenabled()})
    conn.close()


def main() -> int:
    from kint.supervisor.spawner import Spawner

    from forkserver_probe import report as by_name  # pickled by reference, not by value

    ctx = Spawner()._ctx
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=by_name, args=(child,))
    proc.start()
    result = parent.recv() if parent.poll(120) else None
    proc.join(60)
    print(json.dumps(result))
    return 0 if result is not None else 1


if __name__ == "__main__":
    sys.exit(main())
