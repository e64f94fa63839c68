"""Sum the garbage-collection probe's records (bench/support/gc_probe) by process name.

    BENCH_GC_PROBE=/tmp/gcp .venv/bin/python bench/run_all.py --only tenants
    .venv/bin/python bench/gc_probe_report.py /tmp/gcp

Per process name (kint-supervisor, kint-forkserver, kint-worker, ...): how many processes,
collections per generation, the collector's CPU ms per generation and its share of those
processes' CPU, the longest single collection's CPU, and its wall ms (what callers waited,
preemption included), and the five longest collections (over 1 ms of CPU) with their time,
to place them against the bench's passes. A forked worker's counts start at its fork.
"""

from __future__ import annotations

import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def summarize(folder: Path) -> dict[str, dict[str, Any]]:
    by_name: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "processes": 0, "n": [0, 0, 0], "cpu_ms": [0.0, 0.0, 0.0], "wall_ms": [0.0, 0.0, 0.0],
        "cpu_max_ms": [0.0, 0.0, 0.0], "process_cpu_s": 0.0, "frozen": set(),
        "threshold": set(), "slow": []})
    for path in sorted(folder.glob("*.json")):
        r = json.loads(path.read_text())
        s = by_name[r["comm"]]
        s["processes"] += 1
        s["process_cpu_s"] += r["process_cpu_s"]
        s["frozen"].add(r["frozen"])
        s["threshold"].add(tuple(r["threshold"]))
        s["slow"].extend(r["slow"])
        for g in range(3):
            s["n"][g] += r["n"][g]
            s["cpu_ms"][g] += r["cpu_ms"][g]
            s["wall_ms"][g] += r["wall_ms"][g]
            s["cpu_max_ms"][g] = max(s["cpu_max_ms"][g], r["cpu_max_ms"][g])
    return dict(by_name)


def main() -> int:
    folder = Path(sys.argv[1])
    for name, s in sorted(summarize(folder).items()):
        gc_s = sum(s["cpu_ms"]) / 1000
        share = gc_s / s["process_cpu_s"] if s["process_cpu_s"] else 0.0
        print(f"{name}: {s['processes']} processes, collections by generation {s['n']}, "
              f"CPU ms {[round(x, 1) for x in s['cpu_ms']]} ({share:.2%} of their CPU), "
              f"longest CPU ms {[round(x, 2) for x in s['cpu_max_ms']]}, "
              f"wall ms {[round(x, 1) for x in s['wall_ms']]}, "
              f"frozen {sorted(s['frozen'])}, thresholds {sorted(s['threshold'])}")
        for at, gen, cpu, wall in sorted(s["slow"], key=lambda x: -x[2])[:5]:
            print(f"  over 1 ms of CPU: generation {gen}, {cpu} ms CPU, {wall} ms wall, "
                  f"at {time.strftime('%H:%M:%S', time.gmtime(at))} UTC")
    return 0


if __name__ == "__main__":
    sys.exit(main())
