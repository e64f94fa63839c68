"""Readings for bench_tenants.py beside its throughput: the memory of kint's supervisor,
forkserver and workers and of the bare shape's workers (/proc/<pid>/smaps_rollup, and the
largest worker's mappings), and the wall time of `kint supervisor status` as a person runs
it against the `sup.status` round trip it makes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common
from bare_shape import BareShape


# -- readings --------------------------------------------------------------------------------


def kint_pids(kint_home: Path) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """The pids of the supervisor, its forkserver and every live worker, as `sup.status`
    gives them now, and that status."""
    from kint.client import Client

    with Client(kint_home, autostart=False) as kc:
        status = kc.call("sup.status", timeout_s=30)
    pids = [row["pid"] for row in status["spaces"] if row["pid"] is not None]
    sup_pid = status["supervisor"]["pid"]
    forkservers = sorted({p for p in (common.parent_pid(pid) for pid in pids)
                          if p and p != sup_pid})
    return {"supervisor": [sup_pid], "forkserver": forkservers, "workers": pids}, status


def memory(kint_home: Path) -> dict[str, Any]:
    found, status = kint_pids(kint_home)
    pids, sup_pid, forkservers = found["workers"], found["supervisor"][0], found["forkserver"]
    workers = [common.memory_row(pid) for pid in pids]
    pss = [w["pss_mib"] for w in workers]
    largest = max(workers, key=lambda w: w["pss_mib"])
    largest["label"] = next(r["label"] for r in status["spaces"] if r["pid"] == largest["pid"])
    largest["top_mappings"] = _top_mappings(largest["pid"])
    supervisor = common.memory_row(sup_pid)
    forkserver = [common.memory_row(p) for p in forkservers]
    return {"workers_live": len(workers),
            "pids": found,
            "states": sorted({row["state"] for row in status["spaces"]}),
            "worker_pss_mib": {"mean": sum(pss) / len(pss), "max": max(pss), "min": min(pss)},
            "worker_uss_mib_mean": sum(w["uss_mib"] for w in workers) / len(workers),
            "largest_worker": largest,
            "supervisor": supervisor, "forkserver": forkserver,
            "total_pss_mib": sum(pss) + supervisor["pss_mib"]
            + sum(f["pss_mib"] for f in forkserver),
            "workers": workers}


def bare_memory(bare: BareShape) -> dict[str, Any]:
    """The bare shape's processes after their warm-up: its workers' PSS and USS beside
    kint's (whether one verify costs more in 64 processes than in one loop because of
    64 heaps), the relay's and the forking parent's."""
    workers = [common.memory_row(pid) for pid in bare.worker_pids]
    pss = [w["pss_mib"] for w in workers]
    return {"workers_live": len(workers),
            "worker_pss_mib": {"mean": sum(pss) / len(pss), "max": max(pss), "min": min(pss)},
            "worker_uss_mib_mean": sum(w["uss_mib"] for w in workers) / len(workers),
            "relay": common.memory_row(bare.relay.pid),
            "parent": common.memory_row(bare.parent.pid)}


def _top_mappings(pid: int, top: int = 8) -> list[str]:
    """The mappings of a process that hold most of its PSS (/proc/<pid>/smaps), summed by
    name ([heap], [anon], a library's path): where a large worker's memory sits."""
    by_name: dict[str, list[int]] = {}
    name = "?"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else "[anon]"
        elif head and head[0] in ("Pss:", "Private_Dirty:"):
            slot = by_name.setdefault(name, [0, 0])
            slot[0 if head[0] == "Pss:" else 1] += int(head[1])
    rows = sorted(by_name.items(), key=lambda item: -item[1][0])[:top]
    return [f"{kb[0] / 1024:.1f} MiB PSS ({kb[1] / 1024:.1f} private dirty) {n}"
            for n, kb in rows]


def status_timing(m: common.Machine, runs_cli: int, runs_op: int) -> dict[str, Any]:
    """`kint supervisor status` as a person runs it (a fresh process, the human table) and
    the `sup.status` round trip it makes, from this process; a bare `python -c pass`
    before each CLI run, timed the same way (common.timed_process), and the box's busy
    share over those runs (what else was running: other tenants of the machine, or
    kint's own workers)."""
    import orjson
    from cpu_account import CpuMeter

    from kint.client import Client

    cli, bare = [], []
    codes = set()
    # The console script, as a person runs it (its entry point, kint.entry, is part of
    # the start: `python -m kint.cli` skips it).
    command = [str(Path(sys.executable).with_name("kint")), "supervisor", "status"]
    meter = CpuMeter({})
    meter.start()
    for _ in range(runs_cli):
        bare.append(common.timed_process([sys.executable, "-c", "pass"], m.env())[0])
        ms, code, stdout = common.timed_process(command, m.env(), cwd=str(common.REPO_DIR))
        cli.append(ms)
        codes.add(code)
    box = meter.stop()
    rows = len(stdout.splitlines())
    import_probe = subprocess.run(
        [sys.executable, "-X", "importtime", *command], env=m.env(),
        cwd=str(common.REPO_DIR), capture_output=True, text=True, timeout=120)
    op = []
    with Client(m.kint_home, autostart=False) as kc:
        for _ in range(runs_op):
            t0 = time.monotonic()
            reply = kc.call("sup.status", timeout_s=30)
            op.append((time.monotonic() - t0) * 1000.0)
    return {"cli_ms": common.summarize(cli, "ms"), "cli_exit_codes": sorted(codes),
            "cli_lines": rows, "cli_slowest_imports": _slowest_imports(import_probe.stderr),
            "bare_python_ms": common.summarize(bare, "ms"),
            "box_busy_share": box["box_busy_s"] / max(box["box_capacity_s"], 1e-9),
            "op_ms": common.summarize(op, "ms"), "op_reply_bytes": len(orjson.dumps(reply)),
            "spaces_in_reply": len(reply["spaces"])}


def _slowest_imports(importtime: str, top: int = 8) -> list[str]:
    """The top-level imports (`-X importtime`) that took longest, cumulative."""
    rows = []
    for line in importtime.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            name = parts[2].rstrip()
            if not name.startswith("  "):  # one level under the entry point
                rows.append((int(parts[1]), name.strip()))
    return [f"{us / 1000:.0f} ms {name}" for us, name in sorted(rows, reverse=True)[:top]]
