"""Where the CPU of a benchmark phase went: each group of processes' user + system time
(/proc/<pid>/stat, every thread included) and the whole box's busy time (/proc/stat),
read before and after the phase. On a shared two-core box this says both what one verify
costs each part of kint (supervisor, workers, clients) and how much of the box the other
tenants of the machine took meanwhile, which a wall-clock ratio alone cannot tell apart."""

from __future__ import annotations

import os
import time
from pathlib import Path

import common

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system seconds of a live process (0.0 once it is gone)."""
    fields = common._stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_cpu_s(pid: int) -> dict[str, float]:
    """A process's CPU seconds by kind of thread: its main thread (the event loop), ZeroMQ's
    background I/O threads (`ZMQbg/...`), and every other thread (a worker's request pool
    and watcher)."""
    out = {"main": 0.0, "zmq_io": 0.0, "other_threads": 0.0}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        kind = "main" if tid == str(pid) else "zmq_io" if comm.startswith("ZMQbg") \
            else "other_threads"
        out[kind] += cpu
    return out


def box_cpu_s() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, every core."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


class CpuMeter:
    """`groups`: name -> pids. `start()` then `stop()` gives each group's CPU seconds by
    kind of thread (`<group>.main`, `<group>.zmq_io`, `<group>.other_threads`), the box's
    busy seconds, and the wall time."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self._start: dict[str, float] = {}
        self._box = (0.0, 0.0)
        self._t0 = 0.0

    def _read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pids in self.groups.items():
            for pid in pids:
                for kind, cpu in thread_cpu_s(pid).items():
                    key = f"{name}.{kind}"
                    out[key] = out.get(key, 0.0) + cpu
        return out

    def start(self) -> None:
        self._start = self._read()
        self._box = box_cpu_s()
        self._t0 = time.monotonic()

    def stop(self) -> dict[str, float | dict[str, float]]:
        wall = time.monotonic() - self._t0
        end = self._read()
        busy, total = box_cpu_s()
        ours = {key: end.get(key, 0.0) - self._start.get(key, 0.0)
                for key in sorted(set(end) | set(self._start))}
        box_busy = busy - self._box[0]
        return {"wall_s": wall, "cpu_s": ours, "box_busy_s": box_busy,
                "box_capacity_s": total - self._box[1],
                "others_cpu_s": max(0.0, box_busy - sum(ours.values()))}
