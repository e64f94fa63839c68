"""The time from a `kint` call to its first answer when no supervisor runs yet (session 21):
the call autostarts one and waits for it, as every first command of a day, of a box's boot
and of most test-suite machines does.

Three cases, each on a fresh HOME and KINT_HOME, each command a fresh `python -m kint.cli`
process (click, the same entry for every tree): `kint supervisor start` (the supervisor
answers a ping), `kint status` (the first answer of a space's worker: the forkserver's
preload and the worker's spawn included), and the two one after the other, as a script or
a test does (the second command's own start can overlap the preload). After each, `kint
supervisor stop`, untimed. Wall time per process, spawn to exit (common.timed_process).

`NAME=TREE` arguments set kint source trees side by side in the same rounds (each run with
PYTHONPATH=TREE, so it imports that tree's kint), e.g. a checkout of `main` for a
before/after:

    git archive main kint | tar -x -C /tmp/main
    .venv/bin/python bench/bench_cold_start.py main=/tmp/main branch=.

Without arguments: this checkout alone. Rounds: 8 (`--quick`: 4), the trees taking turns
in each, so load on the shared box hits them alike. No target: reported as measured.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import common

# Each case: the commands run one after the other on one fresh home, timed together.
CASES: dict[str, list[list[str]]] = {
    "start": [["supervisor", "start"]],
    "status": [["status"]],
    # What a script, and many tests, do: start the supervisor, then ask a space.
    "start+status": [["supervisor", "start"], ["status"]],
}


def _one(tree: Path, commands: list[list[str]]) -> tuple[float, int]:
    """The wall time of `commands` run one after the other on a fresh home, and the
    highest exit code among them."""
    root = Path(tempfile.mkdtemp(prefix="kint-cold-"))
    env = common.tree_env(tree, root)
    kint = [sys.executable, "-m", "kint.cli"]
    total, worst = 0.0, 0
    try:
        for argv in commands:
            ms, code, _ = common.timed_process([*kint, *argv], env)
            total, worst = total + ms, max(worst, code)
        return total, worst
    finally:
        subprocess.run([*kint, "supervisor", "stop"], env=env, cwd="/", timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)


def run(quick: bool = False, trees: list[str] | None = None) -> dict[str, Any]:
    named = dict(t.split("=", 1) for t in (trees or [])) or {"branch": str(common.REPO_DIR)}
    paths = {name: Path(p).resolve() for name, p in named.items()}
    rounds = 4 if quick else 8
    wall: dict[str, dict[str, list[float]]] = {c: {n: [] for n in paths} for c in CASES}
    codes: dict[str, set[int]] = {n: set() for n in paths}
    for _ in range(rounds):
        for case, argv in CASES.items():
            for name, tree in paths.items():
                ms, code = _one(tree, argv)
                wall[case][name].append(ms)
                codes[name].add(code)
    return {"machine": common.machine(), "code": common.code_info(), "rounds": rounds,
            "trees": {n: str(p) for n, p in paths.items()},
            "exit_codes": {n: sorted(c) for n, c in codes.items()},
            "wall_ms": {case: {n: common.summarize(v, "ms") for n, v in by.items()}
                        for case, by in wall.items()}}


def report(result: dict[str, Any], path: Path) -> None:
    print(f"{'case':13} {'tree':10} {'p50 ms':>8} {'min ms':>8} {'max ms':>8}")
    for case, by in result["wall_ms"].items():
        for name, s in by.items():
            print(f"{case:13} {name:10} {s['p50']:8.0f} {s['min']:8.0f} {s['max']:8.0f}")
    print(f"exit codes: {result['exit_codes']}; written {path}")


def _add_args(parser: Any) -> None:
    parser.add_argument("trees", nargs="*", metavar="NAME=TREE",
                        help="kint source trees to time side by side (default: this one)")


if __name__ == "__main__":
    sys.exit(common.bench_main("cold_start", __doc__, run, report, _add_args))
