"""One process's line of /proc/PID/stat, read one way for every part of kint that asks it.

Why one place: the line was parsed in five (the client's closed-door note, the supervisor's
start and stop, a worker's store sharers and holders, the devchain's anvil), two of them
as strict UTF-8. The kernel cuts a process's name (field 2) to 15 bytes, which can split a
multi-byte character: such a name made the strict reads fail, and a client then believed a
killed supervisor's note naming that process's pid ("is stopping"), and a stopped
supervisor was not said stopped. So the line is read as bytes and split at its last ')'
(the name may hold spaces and parentheses), and the fields after it are taken by index
(proc(5)); the name alone is decoded, with undecodable bytes replaced.

Linux only: elsewhere (macOS) there is no /proc, and every look here says "not known".
Imported by the clients: nothing here imports ZeroMQ, the supervisor or the engine.
"""

from __future__ import annotations

import os
from typing import NamedTuple


class ProcStat(NamedTuple):
    """What kint reads of /proc/PID/stat: the process's `name` (field 2, as the kernel cut
    it, undecodable bytes replaced), its `state` (field 3: R, S, T for stopped, t for a
    debugger's stop, Z a zombie...), its parent's pid (field 4) and `start_ticks`, when it
    began in clock ticks after boot (field 22)."""

    name: str
    state: str
    ppid: int
    start_ticks: int


# Field 22 (start time) counted in the fields after the name, which begin with field 3.
_START_AFTER_NAME = 22 - 3


def read_stat(pid: int) -> ProcStat | None:
    """/proc/PID/stat of `pid`, or None when it is gone, unreadable, not a line the kernel
    writes, or there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except (OSError, ValueError):
        return None
    opened, closed = raw.find(b"("), raw.rfind(b")")
    if opened < 0 or closed < opened:
        return None
    fields = raw[closed + 1:].split()
    try:
        return ProcStat(raw[opened + 1:closed].decode(errors="replace"),
                        fields[0].decode(errors="replace"), int(fields[1]),
                        int(fields[_START_AFTER_NAME]))
    except (IndexError, ValueError):
        return None


def process_stopped(pid: int) -> bool:
    """Whether `pid` is stopped (state T: SIGSTOP, a Ctrl-Z) or stopped by a debugger (t);
    False when it is gone, or where /proc does not say."""
    stat = read_stat(pid)
    return stat is not None and stat.state in ("T", "t")


def seconds_after_boot(ticks: int) -> float:
    """`ticks` (clock ticks, as /proc counts a start time) as seconds after boot: the
    clock CLOCK_BOOTTIME counts. Floored by the tick, never later than the moment."""
    return ticks / os.sysconf("SC_CLK_TCK")
