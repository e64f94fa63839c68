"""The workers' CPU priority (nice), values side by side in alternating runs of bench_tenants
(issue 15, items 2 and 3).

Why: on two cores, 64 workers each doing a few ms of verify compete for the CPU with the
supervisor, one process that every request and every reply passes through. A worker that
gives up a few steps of priority leaves the supervisor to run first (kint has no setting
for it: BENCH_WORKER_NICE has the bench launcher's worker forkserver lower its own priority,
which every worker it forks inherits; bench/support/bench_worker_nice.py). Whether that moves
the routed tail and the throughput shows only against the other value under the same
load, so each round runs the whole many-tenants benchmark (`bench_tenants.run`, its own
stores, supervisor and devchain) once per value, the values' order reversed every round,
and notes the box's load (1-minute average) before each, the share of the box the other
tenants took and the supervisor's and workers' run-queue wait per verify (schedstat:
ready to run, waiting for a core) in the routed passes. Also counted in each run: the
supervisor's hung judgements (its log's "is hung" lines), of which item 3 makes one (the
stopped worker) and a worker that beat too late under load would make more.

    .venv/bin/python bench/nice_ab.py --rounds 3 0 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

import bench_tenants
import common


def _figures(result: dict[str, Any], load: float) -> dict[str, Any]:
    i2, i3 = result["item2"], result["item3"]
    rt = i2["routed"]
    problems = result["env"]["supervisor_log_problems"]
    return {
        "load_1m_before": load,
        "routed_over_in_process": i2["ratio_throughput_routed_over_in_process"],
        "routed_over_bare_shape": i2["ratio_throughput_routed_over_bare_shape"],
        "bare_shape_over_in_process": i2["ratio_throughput_bare_shape_over_in_process"],
        "routed_per_s": rt["per_s"], "in_process_per_s": i2["in_process"]["per_s"],
        "p50_ms": rt["p50"], "p99_ms": rt["p99"], "p99_over_p50": i2["routed_p99_over_p50"],
        "stretch_p99_over_p50": i2["stretch"]["stretch"]["p99_over_p50"],
        "supervisor_cpu_ms_per_verify": rt["cpu"]["ms_per_verify"].get("supervisor"),
        "supervisor_runq_wait_us_per_verify":
            rt["cpu"]["counts_per_verify"].get("supervisor.runq_wait_us", 0.0),
        "workers_runq_wait_us_per_verify":
            rt["cpu"]["counts_per_verify"].get("workers.runq_wait_us", 0.0),
        "others_share_of_box_routed": rt["cpu"]["others_share_of_box"],
        "others_share_of_box_in_process": i2["in_process"]["cpu"]["others_share_of_box"],
        "routed_over_in_process_from_cpu":
            i2["ratio_throughput_from_cpu"]["routed_over_in_process"],
        "faults_over_clean_p99": i3["ratio_faults_p99_over_clean_p99"],
        "hung_reported": result["target"]["items"]["hanging_reported"],
        "stopped_restarted": result["target"]["items"]["stopped_restarted"],
        "hung_judgements": sum(" is hung " in line for line in problems),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=common.summary(__doc__))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("values", nargs="+", type=int, metavar="NICE")
    a = parser.parse_args()
    runs: dict[int, list[dict[str, Any]]] = {v: [] for v in a.values}
    for rnd in range(a.rounds):
        for v in (a.values if rnd % 2 == 0 else a.values[::-1]):
            load = os.getloadavg()[0]
            result = bench_tenants.run(False, {"BENCH_WORKER_NICE": str(v)})
            runs[v].append(_figures(result, load))
            f = runs[v][-1]
            print(f"round {rnd + 1} nice {v}: load {load:.1f}; routed / in process "
                  f"{f['routed_over_in_process']:.2f}x ({f['routed_per_s']:.0f} / "
                  f"{f['in_process_per_s']:.0f} per s), routed / bare "
                  f"{f['routed_over_bare_shape']:.2f}x; p50 {f['p50_ms']:.1f} p99 "
                  f"{f['p99_ms']:.1f} ms = {f['p99_over_p50']:.2f}x; faults / clean "
                  f"{f['faults_over_clean_p99']:.2f}x; run-queue wait a verify: supervisor "
                  f"{f['supervisor_runq_wait_us_per_verify']:.0f} us, workers "
                  f"{f['workers_runq_wait_us_per_verify']:.0f} us; others took "
                  f"{f['others_share_of_box_routed']:.0%} of the box in the routed passes; "
                  f"hung reported {f['hung_reported']}, "
                  f"stopped restarted {f['stopped_restarted']}, hung judgements "
                  f"{f['hung_judgements']}", flush=True)
    print("medians over rounds:")
    for v, got in runs.items():
        print(f"nice {v}: " + ", ".join(
            f"{k} {statistics.median(r[k] for r in got):.3g}" for k in
            ("routed_over_in_process", "routed_over_bare_shape", "p50_ms", "p99_ms",
             "p99_over_p50", "faults_over_clean_p99", "hung_judgements")))
    common.OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = common.OUT_DIR / "nice_ab.json"
    path.write_text(json.dumps({"rounds": a.rounds, "runs": {str(v): r for v, r in runs.items()}},
                               indent=1))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
