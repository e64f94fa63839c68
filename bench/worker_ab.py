"""A worker's CPU per plain `status`, two (or more) kint source trees side by side in the
same run (issue 15, item 4: the worker's share of a routed status).

Why: on the shared 2-core box the two hops' CPU per call moves by tens of microseconds from
one `run_all.py --only twohop` to the next, so a cut of a few microseconds in the worker
shows only when both versions run at once under the same load. Each tree given as
`NAME=PATH` (a checkout, or `git archive main kint | tar -x -C /tmp/main`) gets a worker
process of its own (`kint.tenant_worker.process.Worker.serve`, that tree's code), its own
KINT_HOME and a store of its own in WAL mode; this process plays the supervisor (a ROUTER
on each worker's back socket, sending kint's own status request as the supervisor forwards
it), and calls the workers in turn, blocks of 100 timed calls after 20 untimed, the order
reversed every round. CPU per call is the worker's schedstat (every thread) over a block;
each tree's median, and the median over rounds of its difference from the first tree's.

`--pin same` runs everything on CPU 1 (the steadiest figures: no cross-core wake-ups),
`--pin cross` this process on CPU 0 and the workers on CPU 1 (as the hops run: every
message wakes another core). Name the first tree twice (`m0=... main=...`) to see the
spread of one tree against itself.

    .venv/bin/python bench/worker_ab.py --pin same m0=/tmp/main main=/tmp/main branch=.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BLOCK = 100
WARM = 20


def child(src: str, spec_json: str, pin: bool) -> None:
    """A worker of the tree at `src` (first on the path), serving until killed."""
    sys.path.insert(0, src)
    if pin:
        os.sched_setaffinity(0, {1})
    import kint
    from kint import settings
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    if not kint.__file__.startswith(src):
        raise SystemExit(f"kint imported from {kint.__file__}, not {src}")
    cfg = WorkerConfig(**json.loads(spec_json))
    settings.configure(home=cfg.home, daemon=True, space=(cfg.label, cfg.space16, cfg.space_id))
    Worker(cfg, b"\x01" * 32).serve()


class Side:
    """One tree's worker and the ROUTER that stands in for its supervisor."""

    def __init__(self, zctx: Any, name: str, src: str, index: int, pin: str | None) -> None:
        import zmq

        from kint.protocol import Request
        from kint.protocol.client_codec import encode_request

        self.name = name
        root = self.root = Path(tempfile.mkdtemp(prefix="kint-worker-ab-"))
        home = root / "kint"
        home.mkdir(mode=0o700)
        db = root / "memory.db"
        self.store = sqlite3.connect(db)  # held open: the WAL stays, as under a live Sibyl
        self.store.execute("PRAGMA journal_mode=WAL")
        self.store.execute("CREATE TABLE t (x)")
        self.store.commit()
        spec = {"space_id": f"{index:02x}" * 32, "label": "t", "tenant": "t", "db": str(db),
                "kint_home": str(home), "back_address": f"ipc://{root}/back",
                "supervisor_pid": os.getpid(), "idle_beat_s": 2.5}
        self.router = zctx.socket(zmq.ROUTER)
        self.router.bind(spec["back_address"])
        env = {**os.environ, "KINT_HOME": str(home), "HOME": str(root),
               "SIBYL_MEMORY_TELEMETRY": "0"}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", src, json.dumps(spec)]
            + (["--pinned"] if pin else []), env=env)
        self.route = self.router.recv_multipart()[0]  # its hello
        self.body = encode_request(Request(id="0" * 16, op="status", tenant="t", db=str(db),
                                           space="t", timeout_ms=60_000))
        self.per_call_us: list[float] = []

    def call(self) -> None:
        self.router.send_multipart([self.route, b'{"kind":"req","id":"i0000001"}', self.body])
        while b'"reply"' not in self.router.recv_multipart()[1]:  # a beat: not the answer
            pass

    def block(self) -> None:
        from bench_twohop import cpu_ns  # not at the top: a child imports only its own tree

        for _ in range(WARM):
            self.call()
        before = cpu_ns(self.proc.pid)
        for _ in range(BLOCK):
            self.call()
        self.per_call_us.append((cpu_ns(self.proc.pid) - before) / BLOCK / 1e3)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.router.close(linger=0)
        self.store.close()
        shutil.rmtree(self.root, ignore_errors=True)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], "--pinned" in sys.argv[4:])
        return 0
    from common import summary  # not at the top: a child imports only its own tree

    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("trees", nargs="+", metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--pin", choices=("same", "cross"))
    a = parser.parse_args()
    trees = [t.split("=", 1) for t in a.trees]
    sys.path.insert(0, str(Path(trees[0][1]).resolve()))
    import zmq

    if a.pin:
        os.sched_setaffinity(0, {1} if a.pin == "same" else {0})
    zctx = zmq.Context()
    sides = [Side(zctx, name, str(Path(src).resolve()), i, a.pin)
             for i, (name, src) in enumerate(trees)]
    try:
        for side in sides:
            for _ in range(300):
                side.call()
        time.sleep(4)  # KINT_HOME still for 3 s: the files' presence is kept (file_presence.py)
        for r in range(a.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                side.block()
    finally:
        for side in sides:
            side.close()
        zctx.term()
    first = sides[0].per_call_us
    print(f"worker CPU per status (us), {a.rounds} rounds of {BLOCK} calls, pin {a.pin}, "
          f"load {os.getloadavg()[0]:.1f}")
    for side in sides:
        diffs = [x - y for x, y in zip(side.per_call_us, first)]
        print(f"  {side.name:12s} median {statistics.median(side.per_call_us):6.1f}   "
              f"- {sides[0].name}: {statistics.median(diffs):+5.1f} "
              f"(lower in {sum(d < 0 for d in diffs)}/{len(diffs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
