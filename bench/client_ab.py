"""The client's CPU per routed call, kint source trees side by side in the same run (issue
15, item 4: the client's share of a routed status).

Why: perf29 measured its client cut (the reply read by orjson) with a scratch harness,
since `worker_ab.py` and `routed_ab.py` run this checkout's client against each tree's
servers and so see nothing of a change in `kint/client.py` or the codec; and
`run_all.py --only twohop` moves by tens of microseconds a call from one run to the next
on the shared box. Here the servers are one and the same for every tree: a bench
supervisor of this checkout (bench/support/run_supervisor_bench.py), its worker and a
300-row store anchored without a chain (anchor_store.py; status and verify read no chain).
Each tree given as `NAME=PATH` (a checkout, or `git archive main kint | tar -x -C
/tmp/main`) gets a client process of its own, that tree first on its path, holding one
`kint.client.Client` (every kint module it loads checked to be that tree's); it calls
`status`, then `verify` (limit 5, no write-back, over 20 queries that find rows), in blocks
of 100 calls after 10 untimed, the trees' order reversed every round. A client's CPU per
call is its own schedstat over the block, every thread (ZeroMQ's I/O thread too). Per op,
each tree's median, the median over rounds of its difference from the first tree's and of
its ratio to it, and the spread of the differences (their interquartile range; the rounds
in which the tree used less). Name the first tree twice (`m0=... main=...`) to see the
spread of one tree against itself.

A client process loads orjson first, as every command through click, kint-server and the
benchmarks do (kint/protocol/client_codec.py reads replies with it once it is loaded);
`--no-orjson` leaves it out, as the plain `kint supervisor status` does.

    git archive main kint | tar -x -C /tmp/main
    .venv/bin/python bench/client_ab.py --rounds 30 m0=/tmp/main main=/tmp/main branch=.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

BLOCK = 100
WARM = 10
ROWS = 300


class ClientEnded(RuntimeError):
    """A tree's client process ended before its block's answer (its own error is above)."""


def foreign_kint(modules: Mapping[str, Any], src: Path) -> list[str]:
    """Each loaded kint module (`kint`, `kint.*`) whose file is not under the tree at `src`,
    as `name (file)`. The venv's editable kint is a finder on sys.meta_path that serves any
    `kint.X` the tree lacks from the venv's checkout, so a partial tree's `kint` can be its
    own while its client is not: every module is checked, by path components (a tree at
    /tmp/main does not hold /tmp/main2/kint)."""
    root = src.resolve()
    out = []
    for name, module in list(modules.items()):
        if name != "kint" and not name.startswith("kint."):
            continue
        file = getattr(module, "__file__", None)
        files = [file] if file else list(getattr(module, "__path__", None) or [])
        out += [f"{name} ({f})" for f in files if not Path(f).resolve().is_relative_to(root)]
    return out


def refuse_foreign(src: str) -> None:
    """Exit, naming them, when a kint module this client loaded is not the tree's own."""
    foreign = foreign_kint(sys.modules, Path(src))
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise SystemExit(f"not the tree at {src}: kint module(s) {', '.join(foreign[:3])}"
                         f"{more}; is the tree complete (git archive <rev> kint)?")


def child(src: str, spec_json: str, with_orjson: bool) -> None:
    """A client of the tree at `src`: for each op named on stdin, one block; its CPU per
    call (us) on stdout. Every kint module it loaded is checked to be the tree's, after
    the imports and after each block (a call can load more)."""
    sys.path.insert(0, src)
    if with_orjson:  # loaded as a command's click loads it; the codec then reads with it
        importlib.import_module("orjson")
    from kint.client import Client

    from bench_twohop import cpu_ns

    refuse_foreign(src)
    spec = json.loads(spec_json)
    where, queries = spec["where"], spec["queries"]
    client = Client(Path(spec["kint_home"]), autostart=False)

    def call(op: str, i: int) -> None:
        if op == "status":
            client.call("status", **where, timeout_s=30)
        else:
            client.call("verify", **where, timeout_s=30, args={
                "query": queries[i % len(queries)], "limit": 5, "write": False})

    for line in sys.stdin:
        op = line.strip()
        for i in range(WARM):
            call(op, i)
        before = cpu_ns(os.getpid())
        for i in range(BLOCK):
            call(op, i)
        used = cpu_ns(os.getpid()) - before
        refuse_foreign(src)
        print(used / BLOCK / 1e3, flush=True)
    client.close()


class Side:
    """One tree's client process."""

    def __init__(self, name: str, src: Path, spec: dict[str, Any], with_orjson: bool) -> None:
        self.name = name
        argv = [sys.executable, __file__, "--child", str(src.resolve()), json.dumps(spec)]
        self.proc = subprocess.Popen(argv + ([] if with_orjson else ["--no-orjson"]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def block(self, op: str) -> float:
        """CPU us per call of this client over one timed block of `op`. A client that has
        ended is said so whether it ended before the op was written (a broken pipe) or
        while it ran the block (no answer)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(op + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        except BrokenPipeError:
            answer = ""
        if not answer:
            raise ClientEnded(f"the client of {self.name} ended (exit {self.proc.wait()})")
        return float(answer)

    def close(self) -> None:
        """Its stdin closed (the child ends at EOF), waited for; a child that already ended
        leaves the op in the pipe's buffer, whose flush at close is a broken pipe: ignored,
        so that every other side is closed too."""
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line; each tree `NAME=PATH`, at least two, every name its own."""
    from common import summary  # not at the top: a child imports only its own tree

    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--ops", default="status,verify")
    parser.add_argument("--no-orjson", action="store_true",
                        help="the clients do not load orjson (the plain `kint supervisor status`)")
    parser.add_argument("trees", nargs="+", metavar="NAME=PATH")
    a = parser.parse_args(argv)
    if len(a.trees) < 2 or any("=" not in t for t in a.trees):
        parser.error("give two trees or more, each NAME=PATH")
    a.trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1])) for t in a.trees]
    if len({name for name, _ in a.trees}) < len(a.trees):
        parser.error("each tree needs a name of its own (m0=/tmp/main main=/tmp/main)")
    a.ops = a.ops.split(",")
    if not set(a.ops) <= {"status", "verify"} or a.rounds < 1:
        parser.error("--ops is status, verify or both; --rounds at least 1")
    return a


def report(got: dict[tuple[str, str], list[float]], names: list[str], ops: list[str],
           rounds: int) -> None:
    """Per op, each tree's median, its paired difference from the first tree's and its
    ratio to it (medians over rounds), the differences' IQR and the rounds it used less."""
    first = names[0]
    for op in ops:
        base = got[(first, op)]
        for name in names:
            mine = got[(name, op)]
            diffs = [x - y for x, y in zip(mine, base)]
            q = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else [diffs[0]] * 3
            ratio = statistics.median(x / y for x, y in zip(mine, base))
            lower = sum(d < 0 for d in diffs)
            print(f"{op:7s} {name:10s} {statistics.median(mine):7.1f} us  "
                  f"{statistics.median(diffs):+6.1f} us  x{ratio:.3f}  "
                  f"IQR {q[0]:+.1f}..{q[2]:+.1f}  lower in {lower} of {rounds}")


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], "--no-orjson" not in sys.argv[4:])
        return 0
    a = parse(sys.argv[1:])
    import common
    import corpus
    from anchor_store import anchor
    from kint.client import Client

    data = corpus.rows(ROWS)
    load_before = os.getloadavg()
    with common.hermetic("client_ab") as env:
        m = common.Machine("servers", env.root / "servers")
        corpus.write_store(m.sibyl_db, common.TENANT, data)
        anchor(m.kint_home, common.TENANT, m.sibyl_db, common.TENANT, block=100)
        common.start_bench_supervisor(env, m)
        where = {"tenant": common.TENANT, "db": str(m.sibyl_db), "space": common.TENANT}
        with Client(m.kint_home, autostart=False) as client:
            client.call("status", **where, timeout_s=30)  # the worker up before any block
        time.sleep(3)  # past the space's files' settling (file_presence.py)
        spec = {"where": where, "kint_home": str(m.kint_home),
                "queries": [" ".join(r.words[:2]) for r in data if r.words][:20]}
        sides = [Side(name, src, spec, not a.no_orjson) for name, src in a.trees]
        try:
            got: dict[tuple[str, str], list[float]] = {
                (s.name, op): [] for s in sides for op in a.ops}
            for rnd in range(a.rounds):
                for op in a.ops:
                    for s in (sides if rnd % 2 == 0 else sides[::-1]):
                        got[(s.name, op)].append(s.block(op))
        except ClientEnded as ended:
            print(f"client_ab: {ended}", file=sys.stderr)
            return 1
        finally:
            for s in sides:
                s.close()
    load_after = os.getloadavg()
    print(f"client CPU us per call, median of {a.rounds} blocks of {BLOCK}; "
          f"{'json' if a.no_orjson else 'orjson loaded'}; load "
          f"{load_before[0]:.1f} -> {load_after[0]:.1f}")
    print("op      tree       median     vs first  ratio   spread of the difference")
    report(got, [s.name for s in sides], a.ops, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
