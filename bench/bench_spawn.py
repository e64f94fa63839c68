"""Worker spawn latency: the first request to a brand-new space, including the spawn of its
worker, against a second request to the same space (same run), so the spawn cost is the
difference.

Each space is a Hermes profile store ($HERMES_HOME/sibyl/profiles/<p>/memory.db, label
`<tenant>@hermes:<p>`), so every store is its own space and gets its own worker. All stores
are written before the supervisor starts; requests are sequential, one Client reused.

Before the N measured spaces, one extra space is asked right after the supervisor first
answers `sup.ping` (as a CLI call that autostarts the supervisor would): it is reported on
its own as the cold case and is not among the N.

Target: first request to a new space (spawn included) under 0.5 s at p50.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import common

TARGET_P50_S = 0.5


def _timed_status(client: Any, db: str, label: str) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter_ns()
    result = client.call("status", tenant=common.TENANT, db=db, space=label, timeout_s=10)
    return (time.perf_counter_ns() - t0) / 1e6, result


def run(quick: bool = False) -> dict[str, Any]:
    from kint.client import Client
    from kint.spaces import resolve

    n = 5 if quick else 20
    with common.hermetic("spawn") as env:
        profiles = ["cold"] + [f"p{i:02d}" for i in range(n)]
        common.make_profile_stores(env, profiles)
        spaces = {}
        for profile in profiles:
            spaces[profile] = resolve(common.TENANT, env.profile_db(profile))
            assert spaces[profile].label == f"{common.TENANT}@hermes:{profile}"

        with Client(env.kint_home) as client:
            t0 = time.perf_counter_ns()
            client.call("sup.ping", timeout_s=10)  # autostarts the supervisor
            supervisor_start_ms = (time.perf_counter_ns() - t0) / 1e6

            cold_ms, _ = _timed_status(client, spaces["cold"].db, spaces["cold"].label)
            cold_second_ms, _ = _timed_status(client, spaces["cold"].db, spaces["cold"].label)

            rows = []
            for profile in profiles[1:]:
                ref = spaces[profile]
                first_ms, first = _timed_status(client, ref.db, ref.label)
                second_ms, second = _timed_status(client, ref.db, ref.label)
                if first["worker"]["pid"] != second["worker"]["pid"]:
                    raise RuntimeError(f"space {ref.label} changed worker between requests")
                rows.append({"label": ref.label, "space": ref.space16,
                             "worker_pid": first["worker"]["pid"],
                             "first_ms": first_ms, "second_ms": second_ms,
                             "worker_uptime_at_first_reply_ms":
                                 first["worker"]["uptime_s"] * 1000})
            status = client.call("sup.status", timeout_s=10)
            states = sorted({row["state"] for row in status["spaces"]})

    first = common.summarize([r["first_ms"] for r in rows], "ms")
    second = common.summarize([r["second_ms"] for r in rows], "ms")
    return {
        "name": "spawn",
        "quick": quick,
        "machine": common.machine(),
        "params": {"n_spaces": n},
        "first_request_incl_spawn_ms": first,
        "second_request_same_space_ms": second,
        "spawn_cost_p50_ms": first["p50"] - second["p50"],
        "cold": {"supervisor_autostart_ms": supervisor_start_ms,
                 "first_request_ms": cold_ms, "second_request_ms": cold_second_ms},
        "worker_states_at_end": states,
        "spaces": rows,
        "target": {"description": "first request to a new space, including spawn, "
                                  "under 0.5 s at p50",
                   "max_p50_s": TARGET_P50_S, "met": first["p50"] / 1000 < TARGET_P50_S},
        "env": env.report(),
    }


def report(result: dict[str, Any], path: Path) -> None:
    f, s, c = (result["first_request_incl_spawn_ms"], result["second_request_same_space_ms"],
               result["cold"])
    print(f"first request (spawn)  p50 {f['p50']:7.1f} ms  p99 {f['p99']:7.1f} ms")
    print(f"second request         p50 {s['p50']:7.1f} ms  p99 {s['p99']:7.1f} ms")
    print(f"cold (right after autostart) first {c['first_request_ms']:.1f} ms  -> {path}")


def main() -> int:
    return common.bench_main("spawn", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
