"""Which process is the recorded anvil: its command line and start time, read from the OS.

Nothing is ever signalled unless the process under the recorded pid still has exactly the
identity recorded when it started: a pid of 0 or below or a reused pid is never signalled.
A copied record pointing at another KINT_HOME's anvil whose identity matches (the same path
seen from another mount namespace sharing the pid namespace) is told apart, and never
signalled, by kint.chain.devchain.whose (the anvil.log the anvil writes to).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from kint.proc_stat import read_stat


def _linux_identity(pid: int) -> dict[str, Any] | None:
    stat = read_stat(pid)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    if stat is None or stat.state in ("Z", "X"):  # gone or exited; a zombie is no anvil
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    cmdline = [part.decode(errors="surrogateescape") for part in raw.split(b"\0")[:-1]]
    # Field 22 (starttime, clock ticks since boot), as /proc writes it.
    return {"cmdline": cmdline, "started": f"{boot}:{stat.start_ticks}"}


def _ps_identity(pid: int) -> dict[str, Any] | None:
    env = {**os.environ, "LC_ALL": "C"}
    try:
        command = subprocess.run(["ps", "-ww", "-o", "command=", "-p", str(pid)], env=env,
                                 capture_output=True, text=True, timeout=10)
        started = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], env=env,
                                 capture_output=True, text=True, timeout=10)
        state = subprocess.run(["ps", "-o", "state=", "-p", str(pid)], env=env,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if command.returncode != 0 or not command.stdout.strip():
        return None
    if state.stdout.strip().startswith("Z"):  # exited; a zombie is no anvil
        return None
    return {"cmdline": command.stdout.strip(), "started": " ".join(started.stdout.split())}


def process_identity(pid: Any) -> dict[str, Any] | None:
    """What runs under `pid`: its command line and its start time, or None when nothing
    (alive) does. Never a signal: a pid that is not a positive int is simply nothing."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    if Path("/proc/self/stat").exists():
        return _linux_identity(pid)
    return _ps_identity(pid)


def _same_cmdline(recorded: Any, current: Any) -> bool:
    if isinstance(recorded, list) and isinstance(current, str):  # ps gives one string
        return " ".join(recorded) == current
    return recorded == current


def _legacy_match(record: dict[str, Any], current: dict[str, Any]) -> bool:
    """A record written before identities were recorded: an anvil serving this record's
    port and state file."""
    argv = current["cmdline"]
    argv = argv.split() if isinstance(argv, str) else argv
    if not any(Path(arg).name.startswith("anvil") for arg in argv[:2]):  # [interpreter,] anvil
        return False
    pairs = dict(zip(argv, argv[1:]))
    return (pairs.get("--state") == record.get("state")
            and pairs.get("--port") == str(record.get("port")))


def recorded_anvil_runs(record: dict[str, Any]) -> bool:
    """True when the process under the record's pid is the anvil the record describes: the
    same command line and the same start time as when it was started."""
    current = process_identity(record.get("pid"))
    if current is None:
        return False
    identity = record.get("identity")
    if not isinstance(identity, dict):
        return _legacy_match(record, current)
    return (_same_cmdline(identity.get("cmdline"), current["cmdline"])
            and identity.get("started") == current["started"])
