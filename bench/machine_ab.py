"""Kint source trees side by side on the two machine shapes the test suite starts most
(session 22): `kint supervisor start` then a space's first `kint status` (the forkserver's
preload and the first worker on the way), and `kint supervisor start` then `kint
supervisor status` (no worker asked for); each on a fresh HOME and KINT_HOME, stopped after.

What it reports per tree, median over the rounds: the wall time of each shape's commands,
and the CPU of every process the round started, the detached supervisor, its forkserver
and its workers included. The round runs in a child that is a child subreaper (Linux
PR_SET_CHILD_SUBREAPER), so the daemons it started are reparented to it and reaped by it,
and their CPU counts in its RUSAGE_CHILDREN: `/usr/bin/time` of a command that starts a
daemon sees the command only. On a box shared with other work the wall times move with its
load, the CPU much less: the trees take turns in each round so load hits them alike.

    git archive main kint | tar -x -C /tmp/main
    .venv/bin/python bench/machine_ab.py main=/tmp/main branch=. [--rounds 8]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

PR_SET_CHILD_SUBREAPER = 36
# How long the round waits for the daemons it started to exit after their stop.
REAP_BOUND_S = 60.0


def _kint(env: dict[str, str], *argv: str) -> None:
    subprocess.run([sys.executable, "-m", "kint.cli", *argv], env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd="/", timeout=120)


def _shape(tree: Path, then: list[str]) -> float:
    """`kint supervisor start` then `then` on a fresh home: their wall seconds; the
    supervisor is stopped after, untimed."""
    root = Path(tempfile.mkdtemp(prefix="kint-machine-ab-"))
    env = common.tree_env(tree, root)
    try:
        started = time.monotonic()
        _kint(env, "supervisor", "start")
        _kint(env, *then)
        took = time.monotonic() - started
        _kint(env, "supervisor", "stop")
        return took
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _reap_all() -> None:
    """Wait for every process reparented to this subreaper, within REAP_BOUND_S."""
    deadline = time.monotonic() + REAP_BOUND_S
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)
    raise SystemExit("machine_ab: a daemon outlived its stop")


def one_round(tree: Path) -> dict[str, float]:
    """Run in the child: both shapes on `tree`, every process reaped here."""
    if ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("machine_ab: this needs Linux's PR_SET_CHILD_SUBREAPER")
    worker = _shape(tree, ["status"])
    no_worker = _shape(tree, ["supervisor", "status"])
    _reap_all()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"worker_s": worker, "no_worker_s": no_worker,
            "cpu_s": used.ru_utime + used.ru_stime}


def main() -> None:
    parser = argparse.ArgumentParser(description=common.summary(__doc__))
    parser.add_argument("trees", nargs="*", help="NAME=TREE (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a round's child
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_round(Path(args.one))))
        return
    trees = dict(t.split("=", 1) for t in args.trees) or {
        "this": str(Path(__file__).resolve().parent.parent)}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees.items())
        for name, tree in order if r % 2 == 0 else order[::-1]:
            out = subprocess.run([sys.executable, __file__, "--one", str(Path(tree).resolve())],
                                 check=True, capture_output=True, text=True)
            runs[name].append(json.loads(out.stdout))
    for name, rounds in runs.items():
        cells = []
        for key in ("worker_s", "no_worker_s", "cpu_s"):
            values = [round_[key] for round_ in rounds]
            cells.append(f"{key} {statistics.median(values):.2f} "
                         f"({' '.join(f'{v:.2f}' for v in values)})")
        print(f"{name}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
