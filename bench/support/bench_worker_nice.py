"""Diagnostic only (bench/nice_ab.py): with BENCH_WORKER_NICE=<n> in its environment, the
benchmarks' supervisor launcher (run_supervisor_bench.py) preloads this module into the
worker forkserver, which then gives up n steps of CPU priority as it starts; every worker
it forks inherits them, so the workers run n steps below the supervisor, the clients and
the bare shape. kint has no such setting: bench/RESULTS.md, session 19, says why."""

import os

_STEPS = int(os.environ.get("BENCH_WORKER_NICE") or 0)
if _STEPS > 0:
    os.nice(_STEPS)
