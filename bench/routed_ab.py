"""The supervisor's and the worker's CPU per routed call, kint source trees side by side in
the same run (issue 15, items 2 and 4).

Why: `run_all.py --only twohop` moves by tens of microseconds a call from one run to the next
on the shared box, so a cut of a few shows only when both versions serve at once under the
same load. Each tree given as `NAME=PATH` (a checkout, or `git archive main kint | tar -x -C
/tmp/main`) gets a whole machine of its own: a bench supervisor running that tree's kint
(bench/support/run_supervisor_bench.py, the tree first on PYTHONPATH), its worker, and a
300-row store anchored without a chain (anchor_store.py). One `kint.client.Client` per tree
(this checkout's client for all, so only the servers differ) calls `status`, then `verify`
(limit 5, no write-back, over 20 queries that find rows), in blocks of 100 calls after 10
untimed, the trees' order reversed every round. CPU per call from schedstat (every thread)
of the supervisor and of its worker over each block; per op and process, each tree's median
and the median over rounds of its difference from the first tree's. Name the first tree
twice (`m0=... main=...`) to see the spread of one tree against itself.

    git archive main kint | tar -x -C /tmp/main
    .venv/bin/python bench/routed_ab.py --rounds 20 m0=/tmp/main main=/tmp/main branch=.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import common
import corpus
from anchor_store import anchor
from bench_twohop import cpu_ns

BLOCK = 100
WARM = 10
ROWS = 300


class Side:
    """One tree's machine: its supervisor (that tree's kint), its worker, a client."""

    def __init__(self, env: common.BenchEnv, name: str, src: Path, data: list[Any]) -> None:
        from kint.client import Client

        self.name = name
        m = common.Machine(name, env.root / name)
        db = m.sibyl_db
        corpus.write_store(db, common.TENANT, data)
        anchor(m.kint_home, common.TENANT, db, common.TENANT, block=100)
        path = f"{common.TEST_SUPPORT}:{src.resolve()}"
        self.sup = common.start_bench_supervisor(env, m, extra_env={"PYTHONPATH": path})
        self.where = {"tenant": common.TENANT, "db": str(db), "space": common.TENANT}
        self.client = Client(m.kint_home, autostart=False)
        self.client.call("status", **self.where, timeout_s=30)
        self.worker = next(p for p in common.descendants(self.sup)
                           if _comm(p) == "kint-worker")
        self.queries = [" ".join(r.words[:2]) for r in data if r.words][:20]

    def call(self, op: str, i: int) -> None:
        if op == "status":
            self.client.call("status", **self.where, timeout_s=30)
        else:
            self.client.call("verify", **self.where, timeout_s=30, args={
                "query": self.queries[i % len(self.queries)], "limit": 5, "write": False})

    def block(self, op: str) -> tuple[float, float]:
        """CPU us per call of the supervisor and of the worker over one timed block."""
        for i in range(WARM):
            self.call(op, i)
        s0, w0 = cpu_ns(self.sup), cpu_ns(self.worker)
        for i in range(BLOCK):
            self.call(op, i)
        return ((cpu_ns(self.sup) - s0) / BLOCK / 1000,
                (cpu_ns(self.worker) - w0) / BLOCK / 1000)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=common.summary(__doc__))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--ops", default="status,verify")
    parser.add_argument("trees", nargs="+", metavar="NAME=PATH")
    a = parser.parse_args()
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1])) for t in a.trees]
    ops = a.ops.split(",")
    data = corpus.rows(ROWS)
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    with common.hermetic("routed_ab") as env:
        sides = [Side(env, name, src, data) for name, src in trees]
        time.sleep(3)  # past the space's files' settling (file_presence.py)
        got: dict[tuple[str, str], list[tuple[float, float]]] = {
            (s.name, op): [] for s in sides for op in ops}
        for rnd in range(a.rounds):
            for op in ops:
                for s in (sides if rnd % 2 == 0 else sides[::-1]):
                    got[(s.name, op)].append(s.block(op))
        for s in sides:
            s.client.close()
    out["load_after"] = os.getloadavg()
    first = sides[0].name
    print(f"CPU us per call, median of {a.rounds} blocks of {BLOCK}; load "
          f"{out['load_before'][0]:.1f} -> {out['load_after'][0]:.1f}")
    for op in ops:
        for k, what in ((0, "supervisor"), (1, "worker")):
            base = [b[k] for b in got[(first, op)]]
            cells = []
            for s in sides:
                mine = [b[k] for b in got[(s.name, op)]]
                diff = statistics.median(x - y for x, y in zip(mine, base))
                cells.append(f"{s.name} {statistics.median(mine):7.1f} ({diff:+6.1f})")
            print(f"{op:7s} {what:10s} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
