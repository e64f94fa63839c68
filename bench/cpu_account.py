"""Where the CPU of a benchmark phase went: each group of processes' user + system time
(/proc/<pid>/stat, every thread included) and the whole box's busy time (/proc/stat),
read before and after the phase. On a shared two-core box this says both what one verify
costs each part of kint (supervisor, workers, clients) and how much of the box the other
tenants of the machine took meanwhile, which a wall-clock ratio alone cannot tell apart."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterator

import common

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _tasks(pid: int, *files: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Each thread of a live process: its id and the text of the /proc files asked for
    (`stat`, `comm`, `status`); a thread that ends meanwhile is skipped."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return
    for tid in tids:
        try:
            yield tid, {name: Path(f"/proc/{pid}/task/{tid}/{name}").read_text()
                        for name in files}
        except (FileNotFoundError, ProcessLookupError):
            continue


def _stat_after_name(stat: str) -> list[str]:
    # The command name may hold spaces and parentheses; the fields follow the last ')'.
    return stat[stat.rindex(")") + 2:].split()


def thread_cpu_s(pid: int) -> dict[str, float]:
    """A process's CPU seconds by kind of thread: its main thread (the event loop), ZeroMQ's
    background I/O threads (`ZMQbg/...`), and every other thread (a worker's request pool
    and watcher)."""
    out = {"main": 0.0, "zmq_io": 0.0, "other_threads": 0.0}
    for tid, text in _tasks(pid, "stat", "comm"):
        fields = _stat_after_name(text["stat"])
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        kind = "main" if tid == str(pid) else "zmq_io" if text["comm"].startswith("ZMQbg") \
            else "other_threads"
        out[kind] += cpu
    return out


def process_counts(pid: int) -> dict[str, int]:
    """A process's minor page faults and context switches (voluntary: it waited;
    involuntary: the scheduler took the core), every thread summed. Where one verify costs
    more CPU in a worker than in one loop, these say whether it went to faulting pages in
    or to being switched out. Also the microseconds its threads were ready to run but
    waited for a core (`runq_wait_us`, schedstat's second field): what a process that
    every call passes through (the supervisor) loses to the others on a busy box."""
    out = {"minflt": 0, "ctxsw_voluntary": 0, "ctxsw_involuntary": 0, "runq_wait_us": 0}
    for _, text in _tasks(pid, "stat", "status", "schedstat"):
        out["minflt"] += int(_stat_after_name(text["stat"])[7])
        out["runq_wait_us"] += int(text["schedstat"].split()[1]) // 1000
        for line in text["status"].splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                out["ctxsw_voluntary"] += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                out["ctxsw_involuntary"] += int(line.split()[1])
    return out


def box_cpu_s() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, every core."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    idle = values[3] + values[4]
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


class CpuMeter:
    """`groups`: name -> pids. `start()` then `stop()` gives each group's CPU seconds by
    kind of thread (`<group>.main`, `<group>.zmq_io`, `<group>.other_threads`), its page
    faults and context switches (`counts`), the box's busy seconds, and the wall time.

    A process that ended between the two readings (a worker recycled mid-phase) is left out
    of both, so a group's figure never goes below zero; its pid is listed in `gone`, and
    the CPU it spent in the phase is missing from its group's."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups
        self._start: dict[tuple[str, int], dict[str, float]] = {}
        self._start_counts: dict[tuple[str, int], dict[str, int]] = {}
        self._box = (0.0, 0.0)
        self._t0 = 0.0

    def _read(self) -> dict[tuple[str, int], dict[str, float]]:
        return {(name, pid): thread_cpu_s(pid)
                for name, pids in self.groups.items() for pid in pids}

    def _read_counts(self) -> dict[tuple[str, int], dict[str, int]]:
        return {(name, pid): process_counts(pid)
                for name, pids in self.groups.items() for pid in pids}

    def start(self) -> None:
        self._start_counts = self._read_counts()
        self._start = self._read()
        self._box = box_cpu_s()
        self._t0 = time.monotonic()

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self._t0
        end = self._read()
        end_counts = self._read_counts()
        busy, total = box_cpu_s()
        gone = sorted({pid for _, pid in end if not common.alive(pid)})
        ours = _deltas(self._start, end, gone)
        box_busy = busy - self._box[0]
        return {"wall_s": wall, "cpu_s": ours,
                "counts": _deltas(self._start_counts, end_counts, gone),
                "box_busy_s": box_busy, "box_capacity_s": total - self._box[1],
                "others_cpu_s": max(0.0, box_busy - sum(ours.values())), "gone": gone}


def _deltas(start: dict[tuple[str, int], dict[str, Any]],
            end: dict[tuple[str, int], dict[str, Any]], gone: list[int]) -> dict[str, Any]:
    """`<group>.<kind>` -> end - start, summed over the group's processes alive at both."""
    out: dict[str, Any] = {}
    for (name, pid), reading in end.items():
        for kind, value in reading.items():
            key = f"{name}.{kind}"
            out.setdefault(key, 0)
            if pid not in gone:
                out[key] += value - start[(name, pid)][kind]
    return dict(sorted(out.items()))
