"""Which boot of the machine this is, for files whose age is read on the monotonic clock.

A monotonic reading is one clock for the whole system on Linux (a step of the wall clock
does not move it), but it starts again at every boot: a file that records one is taken
only on the boot that wrote it. Both the sessions a worker hands to its successor
(kint.tenant_worker.session_handoff) and the run id a supervisor hands to the next one
on an upgrade (kint.supervisor.succession) carry this id.
"""

from __future__ import annotations

from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot's id (Linux), or None where the OS has none to read (macOS)."""
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None
