"""Diagnostic: time every cyclic garbage collection of each Python process the bench
supervisor starts (the supervisor, its forkserver, every worker), when the bench runs with
BENCH_GC_PROBE=<folder> (bench/common.py then puts this folder first on the
supervisor's PYTHONPATH, so each fresh interpreter imports this module at start-up, and a
forked worker inherits it from the forkserver). Never used for headline figures.

Why (issue 15, item 2: is the routed p99 a collector's pause?): `gc.callbacks` sees each
collection start and stop; both the wall time (what a caller waits, preemption included)
and the thread's CPU time (the collector's own work) are kept per generation. Each process
rewrites `<folder>/<pid>.json` after every collection (a worker is stopped by a signal, so
nothing is left for exit; a worker collects a few times a minute under the bench's load);
bench/gc_probe_report.py sums them by process name.
"""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

_FOLDER = os.environ.get("BENCH_GC_PROBE", "")
_SLOW_CPU_MS = 1.0


class _Counts:
    """One process's collections; reset in a forked child (its pid differs)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.n = [0, 0, 0]
        self.wall_ms = [0.0, 0.0, 0.0]
        self.cpu_ms = [0.0, 0.0, 0.0]
        self.cpu_max_ms = [0.0, 0.0, 0.0]
        self.slow: list[tuple[float, int, float, float]] = []
        self.started_wall = 0.0
        self.started_cpu = 0.0


_counts = _Counts()


def _comm() -> str:
    try:
        with open("/proc/self/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _dump() -> None:
    c = _counts
    if not _FOLDER or c.pid != os.getpid():
        return
    record: dict[str, Any] = {
        "pid": c.pid, "comm": _comm(), "n": c.n, "wall_ms": c.wall_ms, "cpu_ms": c.cpu_ms,
        "cpu_max_ms": c.cpu_max_ms, "slow": c.slow[-50:], "process_cpu_s": time.process_time(),
        "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
    path = os.path.join(_FOLDER, f"{c.pid}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def _on_collection(phase: str, info: dict[str, int]) -> None:
    global _counts
    if phase == "start":
        if _counts.pid != os.getpid():
            _counts = _Counts()
        _counts.started_wall = time.perf_counter()
        _counts.started_cpu = time.thread_time()
        return
    c = _counts
    wall = (time.perf_counter() - c.started_wall) * 1000
    cpu = (time.thread_time() - c.started_cpu) * 1000
    g = info["generation"]
    c.n[g] += 1
    c.wall_ms[g] += wall
    c.cpu_ms[g] += cpu
    c.cpu_max_ms[g] = max(c.cpu_max_ms[g], cpu)
    if cpu > _SLOW_CPU_MS:
        c.slow.append((round(time.time(), 3), g, round(cpu, 3), round(wall, 3)))
    _dump()


if _FOLDER:
    gc.callbacks.append(_on_collection)
