"""What idle workers cost the box: the CPU of the supervisor and of N idle workers (64;
`--quick`: 16), each a Hermes profile store asked `status` once, read from /proc over a
window (15 s; `--quick`: 8 s) once every worker has been idle past its slower cadence.

Two passes, each with a supervisor of its own, alternating over two rounds (`--quick`:
one round):
- baseline: KINT_WORKER_HEARTBEAT_TIMEOUT=4, under which an idle worker beats every
  second (a quarter of 4 s), as every worker did before the idle cadence;
- default: the default timeout (10 s), under which an idle worker beats every 2.5 s.
The same workers, stores and machine; what differs is how often an idle worker beats.
Reported: CPU milliseconds per second of the supervisor and of all workers (the
forkserver included), and default / baseline, each pass's mean over the rounds. No
target: the issue sets none; it is reported as a ratio to the same run's baseline.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import common
import cpu_account

PASSES = {"baseline (beats every 1 s)": {"KINT_WORKER_HEARTBEAT_TIMEOUT": "4"},
          "default (idle beats every 2.5 s)": {}}
# Long enough for every worker to fall to its idle cadence (2.5 s) and a settle after.
SETTLE_S = 6.0


def _cpu_s(pid: int) -> float | None:
    """A process's CPU seconds, every thread (cpu_account's reading), or None: it is gone."""
    if not common.alive(pid):
        return None
    return sum(cpu_account.thread_cpu_s(pid).values())


def _one_pass(n: int, window_s: float, extra_env: dict[str, str]
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """One supervisor with `n` idle workers under `extra_env`: (its figures, env report)."""
    from kint.client import Client
    from kint.spaces import resolve

    with common.hermetic("idle") as env:
        os.environ.update(extra_env)  # hermetic() restores the environment on exit
        profiles = [f"i{i:02d}" for i in range(n)]
        common.make_profile_stores(env, profiles)
        with Client(env.kint_home) as client:
            for profile in profiles:
                ref = resolve(common.TENANT, env.profile_db(profile))
                client.call("status", tenant=ref.tenant, db=ref.db, space=ref.label,
                            timeout_s=60)
            sup = client.call("sup.status", timeout_s=30)["supervisor"]["pid"]
        time.sleep(SETTLE_S)
        before = {pid: _cpu_s(pid) for pid in [sup, *common.descendants(sup)]}
        t0 = time.monotonic()
        time.sleep(window_s)
        after = {pid: _cpu_s(pid) for pid in before}
        elapsed = time.monotonic() - t0
        with Client(env.kint_home, autostart=False) as client:
            rows = client.call("sup.status", timeout_s=30)["spaces"]
    env_report = env.report()  # after the supervisor stopped and its log was read
    gone = [pid for pid in before if before[pid] is None or after[pid] is None]
    used = {pid: after[pid] - before[pid] for pid in before if pid not in gone}
    sup_ms = used.get(sup, 0.0) * 1000 / elapsed
    workers_ms = sum(v for pid, v in used.items() if pid != sup) * 1000 / elapsed
    return {"processes": len(before), "gone_mid_window": len(gone),
            "window_s": elapsed, "supervisor_ms_per_s": sup_ms,
            "workers_ms_per_s": workers_ms, "total_ms_per_s": sup_ms + workers_ms,
            "beat_every_s": sorted({r.get("beat_every_s") or 0.0 for r in rows})}, env_report


def run(quick: bool = False) -> dict[str, Any]:
    n, window_s, rounds = (16, 8.0, 1) if quick else (64, 15.0, 2)
    load_before = list(os.getloadavg())
    passes: dict[str, list[dict[str, Any]]] = {name: [] for name in PASSES}
    env_report: dict[str, Any] = {}
    for _ in range(rounds):
        for name, extra in PASSES.items():
            figures, env_report = _one_pass(n, window_s, extra)
            passes[name].append(figures)
    total = {name: sum(p["total_ms_per_s"] for p in runs) / len(runs)
             for name, runs in passes.items()}
    base, default = (total[name] for name in PASSES)
    return {
        "name": "idle",
        "quick": quick,
        "machine": common.machine(),
        "load_1min_before_after": [load_before[0], os.getloadavg()[0]],
        "params": {"workers": n, "window_s": window_s, "rounds": rounds,
                   "passes": {name: extra for name, extra in PASSES.items()}},
        "passes": passes,
        "mean_total_ms_per_s": total,
        "ratio_default_over_baseline": default / base if base else None,
        "target": {"description": "none set; the idle cadence's CPU against beating every "
                                  "second, same run", "met": None},
        "env": env_report,
    }


def table_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    n = result["params"]["workers"]
    base, default = result["mean_total_ms_per_s"].values()
    return [(f"idle: CPU of supervisor + {n} idle workers (ms/s)", f"{default:.1f}",
             f"beating every 1 s {base:.1f}", "",
             f"{result['ratio_default_over_baseline']:.2f}x")]


def report(result: dict[str, Any], path: Path) -> None:
    for name, runs in result["passes"].items():
        for p in runs:
            print(f"  {name:34s} supervisor {p['supervisor_ms_per_s']:5.1f} ms/s, workers "
                  f"{p['workers_ms_per_s']:5.1f} ms/s, total {p['total_ms_per_s']:5.1f} "
                  f"({p['processes']} processes, {p['window_s']:.0f} s; beats every "
                  f"{p['beat_every_s']} s)")
    print(f"default / baseline {result['ratio_default_over_baseline']:.2f}x  load (1 min) "
          f"before/after {result['load_1min_before_after']}  -> {path}")


def main() -> int:
    return common.bench_main("idle", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
