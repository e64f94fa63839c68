"""Memory of idle workers: PSS of each of N=20 workers (one per space) once they have
served a request and sat idle for a few seconds, read from /proc/<pid>/smaps_rollup.

Baseline, same run: a fresh `python -c "import web3, eth_account, sibyl_memory_client; ..."`
process, i.e. what a worker would cost without the forkserver's shared pages. The only
change to the command the issue gives is a `print("ready")` after the imports, so the
reading is taken once the imports have finished rather than at a guessed moment. It is
read after kint has stopped, so it shares no library pages with the forkserver's tree.

PSS charges each shared page to its sharers in equal parts, so a worker's PSS is its
private pages plus 1/k of the pages it shares with the forkserver and the other workers.
USS (Private_Clean + Private_Dirty) and RSS are recorded alongside; so are the
supervisor's and the forkserver's own PSS, for the whole footprint.

Target: an idle worker under 25 MB PSS (judged on the largest of the N, in MiB).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common

TARGET_PSS_MIB = 25.0
IDLE_SETTLE_S = 3.0
BASELINE_CODE = ("import web3, eth_account, sibyl_memory_client; print('ready', flush=True); "
                 "import time; time.sleep(5)")


def _baseline() -> dict[str, Any]:
    proc = subprocess.Popen([sys.executable, "-c", BASELINE_CODE], stdout=subprocess.PIPE,
                            text=True)
    try:
        t0 = time.perf_counter()
        line = proc.stdout.readline() if proc.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError("the baseline interpreter did not finish its imports")
        import_s = time.perf_counter() - t0
        time.sleep(0.5)
        row = common.memory_row(proc.pid)
        row["startup_and_imports_s"] = import_s
        return row
    finally:
        proc.kill()
        proc.wait()


def run(quick: bool = False) -> dict[str, Any]:
    from kint.client import Client
    from kint.spaces import resolve

    n = 5 if quick else 20
    with common.hermetic("memory") as env:
        profiles = [f"m{i:02d}" for i in range(n)]
        common.make_profile_stores(env, profiles)
        refs = [resolve(common.TENANT, env.profile_db(p)) for p in profiles]
        with Client(env.kint_home) as client:
            for ref in refs:
                client.call("status", tenant=common.TENANT, db=ref.db, space=ref.label,
                            timeout_s=10)
            time.sleep(IDLE_SETTLE_S)
            status = client.call("sup.status", timeout_s=10)
            rows = status["spaces"]
            if len(rows) != n or any(row["pid"] is None for row in rows):
                raise RuntimeError(f"expected {n} live workers, sup.status has {rows}")
            states = sorted({row["state"] for row in rows})
            workers = [common.memory_row(row["pid"]) for row in rows]
            supervisor_pid = status["supervisor"]["pid"]
            forkservers = {common.parent_pid(row["pid"]) for row in rows}
            supervisor = common.memory_row(supervisor_pid)
            forkserver = [common.memory_row(pid) for pid in sorted(p for p in forkservers if p)]
        # The baseline is read with kint stopped: a fresh interpreter maps the same .so
        # files as the forkserver and its workers, and PSS would split those pages with them.
        common.stop_supervisor(env)
        baseline = _baseline()

    pss = [w["pss_mib"] for w in workers]
    uss = [w["uss_mib"] for w in workers]
    total = sum(pss) + supervisor["pss_mib"] + sum(f["pss_mib"] for f in forkserver)
    return {
        "name": "memory",
        "quick": quick,
        "machine": common.machine(),
        "params": {"n_workers": n, "idle_settle_s": IDLE_SETTLE_S},
        "worker_states": states,
        "worker_pss_mib": {"mean": sum(pss) / n, "max": max(pss), "min": min(pss)},
        "worker_uss_mib": {"mean": sum(uss) / n, "max": max(uss), "min": min(uss)},
        "workers": workers,
        "supervisor": supervisor,
        "forkserver": forkserver,
        "total_pss_mib": total,
        "baseline_fresh_interpreter": baseline,
        "target": {"description": "idle worker under 25 MB PSS (largest of the N, MiB)",
                   "max_pss_mib": TARGET_PSS_MIB, "met": max(pss) < TARGET_PSS_MIB},
        "env": env.report(),
    }


def report(result: dict[str, Any], path: Path) -> None:
    p, u, b = result["worker_pss_mib"], result["worker_uss_mib"], result["baseline_fresh_interpreter"]
    print(f"worker PSS mean {p['mean']:.1f} MiB  max {p['max']:.1f} MiB  "
          f"(USS mean {u['mean']:.1f} MiB)")
    print(f"baseline fresh interpreter PSS {b['pss_mib']:.1f} MiB  -> {path}")


def main() -> int:
    return common.bench_main("memory", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
