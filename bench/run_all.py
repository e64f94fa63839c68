"""Run every kint benchmark in one process and print a summary table.

    .venv/bin/python bench/run_all.py           # the full run (`make bench`)
    .venv/bin/python bench/run_all.py --quick   # fewer iterations, a smoke test
    .venv/bin/python bench/run_all.py --only twohop tenants   # some of them

Each benchmark runs in its own hermetic temp folder with its own supervisor, stopped at
the end whatever happens. Results go to bench/out/<name>.json and bench/out/summary.json;
each supervisor's log is copied to bench/out/<name>.supervisor.log. Exits 1 if a benchmark
failed to run (a missed target is reported, not an error).

Each benchmark is a module of this folder, imported by name when its turn comes: one that
is not in this checkout (a branch that has not merged it yet) is reported "not present"
and the others run. A module gives `run(quick) -> dict` (with `target.met` and `env`, as
`common.BenchEnv.report` makes it) and, for its lines in the table, `table_rows(result)`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402

# (name, module), in the order they run.
BENCHMARKS: list[tuple[str, str]] = [
    ("roundtrip", "bench_roundtrip"),
    ("spawn", "bench_spawn"),
    ("memory", "bench_memory"),
    ("twohop", "bench_twohop"),
    ("verify", "bench_verify"),
    ("chain", "bench_chain"),
    ("mcp", "bench_mcp"),
    ("footprint", "bench_footprint"),
    ("tenants", "bench_tenants"),
    ("idle", "bench_idle"),
    ("front_door", "bench_front_door"),
]
# The benchmarks whose table lines this file writes (below); any other gives its own.
_ROWS_HERE = frozenset({"roundtrip", "spawn", "memory", "verify", "chain", "mcp"})


def load(module: str) -> ModuleType | None:
    """The benchmark's module, or None when this checkout has no such file. A module that
    is there but fails to import raises: that is a benchmark that could not run."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        return None


def _met(flag: bool) -> str:
    return "yes" if flag else "NO"


def table_rows(results: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """(measure, value, same-run baseline, target, met) for every figure the issue asks."""
    rows = []
    rt = results.get("roundtrip")
    if rt:
        b, r, ratio = rt["bare_echo_us"], rt["routed_status_us"], rt["ratio_routed_over_bare"]
        p = rt["context_sup_ping_us"]
        rows += [
            ("status round trip p50 (us)", f"{r['p50']:.0f}", f"bare echo {b['p50']:.0f}",
             "", ""),
            ("status round trip p99 (us)", f"{r['p99']:.0f}", f"bare echo {b['p99']:.0f}",
             "", ""),
            ("  ratio routed/bare p50", f"{ratio['p50']:.2f}x", "", "<= 2x",
             _met(rt["target"]["met"])),
            ("  ratio routed/bare p99", f"{ratio['p99']:.2f}x", "", "", ""),
            ("  (context) sup.ping p50/p99 (us)", f"{p['p50']:.0f} / {p['p99']:.0f}", "", "",
             ""),
        ]
    sp = results.get("spawn")
    if sp:
        f, s = sp["first_request_incl_spawn_ms"], sp["second_request_same_space_ms"]
        rows += [
            ("new space, first request p50 (ms)", f"{f['p50']:.1f}",
             f"2nd request {s['p50']:.1f}", "< 500", _met(sp["target"]["met"])),
            ("new space, first request p99 (ms)", f"{f['p99']:.1f}",
             f"2nd request {s['p99']:.1f}", "", ""),
            ("  spawn cost p50 (first - second, ms)", f"{sp['spawn_cost_p50_ms']:.1f}", "", "",
             ""),
            ("  (context) cold: first space after autostart (ms)",
             f"{sp['cold']['first_request_ms']:.0f}", "", "", ""),
        ]
    mem = results.get("memory")
    if mem:
        pss, base = mem["worker_pss_mib"], mem["baseline_fresh_interpreter"]
        n = mem["params"]["n_workers"]
        rows += [
            (f"idle worker PSS mean, {n} workers (MiB)", f"{pss['mean']:.1f}",
             f"fresh python {base['pss_mib']:.1f}", "", ""),
            (f"idle worker PSS max, {n} workers (MiB)", f"{pss['max']:.1f}", "", "< 25",
             _met(max(w["pss_mib"] for w in mem["workers"]) < 25)),
            ("  (context) worker USS mean (MiB)", f"{mem['worker_uss_mib']['mean']:.1f}",
             f"fresh python {base['uss_mib']:.1f}", "", ""),
            *_connected_rows(mem.get("connected_worker")),
            ("  (context) supervisor + forkserver PSS (MiB)",
             f"{mem['supervisor']['pss_mib']:.1f} + "
             f"{sum(f['pss_mib'] for f in mem['forkserver']):.1f}", "", "", ""),
        ]
    rows += _verify_rows(results.get("verify"))
    rows += _chain_rows(results.get("chain"))
    rows += _mcp_rows(results.get("mcp"))
    for name, module in BENCHMARKS:
        if name in _ROWS_HERE or name not in results:
            continue
        rows += _module_rows(name, module, results[name])
    return rows


def _connected_rows(conn: dict[str, Any] | None) -> list[tuple[str, str, str, str, str]]:
    """The connected worker of bench_memory: PSS at its two idle points, private dirty after
    each step."""
    if not conn:
        return []
    steps = {s["step"]: s for s in conn["steps"]}
    first = steps["idle"]
    again = conn["steps"][-1]
    dirty = " / ".join(f"{s['private_dirty_mib']:.1f}" for s in conn["steps"])
    recycled = conn.get("recycled_after_s")
    then = f"recycled {recycled:.0f} s later" if recycled is not None else "restarted"
    return [(f"connected worker PSS 3 s after connect, push, {conn['verifies']} verifies "
             f"(MiB)", f"{first['pss_mib']:.1f}", f"fresh {conn['steps'][0]['pss_mib']:.1f}",
             "", ""),
            (f"  {then}, its successor idle after {conn['verifies']} verifies (MiB)",
             f"{again['pss_mib']:.1f}", "", "< 25", _met(again["pss_mib"] < 25)),
            ("  (context) its private dirty per step (MiB)", dirty, "", "", "")]


def _module_rows(name: str, module: str, result: dict[str, Any]
                 ) -> list[tuple[str, str, str, str, str]]:
    """A benchmark's own table lines (its `table_rows`), else one line with its target."""
    found = sys.modules.get(module)
    own = getattr(found, "table_rows", None)
    if own is not None:
        return [tuple(str(cell) for cell in row) for row in own(result)]  # type: ignore[misc]
    target = result.get("target") or {}
    return [(f"{name}: {target.get('description', 'see its JSON')}", "", "", "",
             _met(bool(target.get("met"))))]


def _rows_label(size: dict[str, Any]) -> str:
    n, asked = size["rows"], size["rows_requested"]
    instead = size.get("instead_of")
    if instead:
        return (f"{n} rows (largest that restores; A held {instead['rows_a_held']} of "
                f"{instead['rows_requested']} asked)")
    gate = ((size.get("store") or {}).get("cap_gate") or {}).get("kind") or ""
    if "Pro account" in gate:
        # Written past the free-tier cap by a Pro account (bench/pro_account.py).
        return f"{n} rows (Pro account)"
    return f"{n} rows" if n == asked else f"{n} rows (asked {asked}; Sibyl's cap)"


def _verify_rows(ve: dict[str, Any] | None) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    for s in (ve or {}).get("sizes", []):
        i, r = s["in_process_ms"], s["supervisor_ms"]
        ri, rs = s["ratio_in_process"], s["ratio_supervisor"]
        rows += [
            (f"verify, {_rows_label(s)}, in-process p50/p99 (ms)",
             f"{i['verify']['p50']:.2f} / {i['verify']['p99']:.2f}",
             f"search {i['bare']['p50']:.2f} / {i['bare']['p99']:.2f}", "", ""),
            ("  ratio verify/search in-process p50 / p99",
             f"{ri['p50']:.2f}x / {ri['p99']:.2f}x", "", "<= 1.15x",
             _met(s["met"]["in_process"])),
            ("  through the supervisor p50/p99 (ms)",
             f"{r['verify']['p50']:.2f} / {r['verify']['p99']:.2f}",
             f"search {r['bare']['p50']:.2f} / {r['bare']['p99']:.2f}", "", ""),
            ("  ratio routed verify/search p50 / p99",
             f"{rs['p50']:.2f}x / {rs['p99']:.2f}x", "", "<= 1.25x",
             _met(s["met"]["supervisor"])),
        ]
    return rows


def _chain_rows(ch: dict[str, Any] | None) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    for s in (ch or {}).get("sizes", []):
        b, g, t = s["bytes"], s["gas"], s["bytes"]["totals"]
        rows += [
            (f"chain, {_rows_label(s)}: bytes on chain", f"{b['on_chain_envelopes']}",
             f"gzip -9 {b['gzip9']['baseline']}", "", ""),
            (f"  ratio envelopes/gzip -9 ({len(s['push']['epochs'])} epochs)",
             f"{b['ratio_envelopes_over_gzip9']:.3f}x", "", "<= 1.3x", _met(s["met"]["bytes"])),
            ("  padding: bucket bytes / epochs' own gzip",
             f"{t['bucket_over_gzip']:.3f}x",
             f"{t['padding']} B padding, {t['padding_from_ratchet']} from the ratchet", "", ""),
            ("  header + tag bytes (all epochs)", f"{t['header']} + {t['tag']}", "", "", ""),
            ("  gas per row / per epoch", f"{g['per_row']:.0f} / {g['per_epoch_mean']:.0f}",
             f"gzip calldata floor {g['baseline_calldata_floor_of_gzip9_one_tx'] / s['rows']:.0f}"
             " per row", "", ""),
            ("  push wall time, 1 confirmation, automine (s)", f"{s['push']['wall_s']:.2f}", "",
             "", ""),
        ]
        one = s.get("one_row_push") or {}
        if one.get("ok"):
            p = one["epoch_breakdown"][-1]
            rows.append(("  then a one-row push: bytes / gas", f"{p['envelope']} / "
                         f"{one['epochs'][-1]['gas_used']}",
                         f"bucket {p['bucket']} for {p['gzip']} B gzip", "", ""))
        r, w = s["restore"], s["sibyl_write_baseline"]
        if r["median_s"]:
            rows += [
                ("  full restore (pull on a 2nd machine), median (s)", f"{r['median_s']:.2f}",
                 f"Sibyl writes, median {w['median_interleaved_s']:.2f}", "", ""),
                ("  restore throughput / Sibyl write throughput",
                 f"{s['ratio_restore_throughput_over_sibyl_write']:.2f}x", "", ">= 0.8x",
                 _met(s["met"]["restore"])),
            ]
        else:
            first = r["samples"][0]
            rows.append(("  full restore", f"REFUSED ({first.get('code')})",
                         f"Sibyl writes {w['fastest_s']:.2f}", ">= 0.8x", "n/a"))
    return rows


def _mcp_rows(mc: dict[str, Any] | None) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    for s in (mc or {}).get("sizes", []):
        ms, ratio = s["ms"], s["ratio_mcp_verify_over_mcp_search"]
        decisions = s["memory_verify_decisions"]
        rows += [
            (f"MCP, {_rows_label(s)}: memory_verify p50/p99 (ms)",
             f"{ms['mcp_verify']['p50']:.2f} / {ms['mcp_verify']['p99']:.2f}",
             f"memory_search {ms['mcp_search']['p50']:.2f} / {ms['mcp_search']['p99']:.2f}",
             "", ""),
            ("  ratio memory_verify/memory_search p50 / p99",
             f"{ratio['p50']:.2f}x / {ratio['p99']:.2f}x", "", "<= 1.3x (p50)", _met(s["met"])),
            ("  (context) op verify / in-process search p50 (ms)",
             f"{ms['routed_verify']['p50']:.2f}", f"search {ms['bare_search']['p50']:.2f}", "",
             ""),
            ("  memory_verify decisions; store unchanged",
             ", ".join(f"{k} {v}" for k, v in decisions.items())
             + f"; {'yes' if s['store_unchanged_by_timed_calls'] else 'NO'}", "", "", ""),
        ]
    return rows


def print_table(rows: list[tuple[str, str, str, str, str]]) -> None:
    header = ("measure", "value", "same-run baseline", "target", "met")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format(*header))
    print(line.format(*("-" * w for w in widths)))
    for row in rows:
        print(line.format(*row))


def main() -> int:
    parser = argparse.ArgumentParser(description="Run kint's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="fewer iterations and spaces")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        choices=[name for name, _ in BENCHMARKS],
                        help="run only these benchmarks")
    args = parser.parse_args()

    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    absent: list[str] = []
    for name, module in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        t0 = time.monotonic()
        print(f"running {name}{' (quick)' if args.quick else ''} ...", flush=True)
        try:
            found = load(module)
            if found is None:
                absent.append(name)
                print(f"  not present: bench/{module}.py is not in this checkout", flush=True)
                continue
            result = found.run(args.quick)
        except Exception:  # noqa: BLE001 - report it, run the others, exit 1
            failed[name] = traceback.format_exc()
            print(failed[name], file=sys.stderr)
            continue
        result["wall_s"] = time.monotonic() - t0
        results[name] = result
        common.write_json(name, result)
        print(f"  done in {result['wall_s']:.1f} s", flush=True)

    print()
    print(f"kint benchmarks{' (quick)' if args.quick else ''}: "
          f"{common.machine()['nproc']} cpu, Python {common.machine()['python']}, "
          f"{time.monotonic() - started:.0f} s")
    print_table(table_rows(results))

    problems = [(name, line) for name, r in results.items()
                for line in (r.get("env", {}).get("supervisor_log_problems", [])
                             + r.get("env", {}).get("cleanup_notes", []))]
    if problems:
        print("\nsupervisor log warnings/errors and clean-up notes:")
        for name, line in problems:
            print(f"  [{name}] {line}")
    if absent:
        print(f"\nnot present in this checkout: {', '.join(absent)}")
    if failed:
        print(f"\nFAILED: {', '.join(failed)}")

    common.write_json("summary", {
        "quick": args.quick,
        "machine": common.machine(),
        "wall_s": time.monotonic() - started,
        "targets_met": {name: (r.get("target") or {}).get("met")
                        for name, r in results.items()},
        "wall_s_by_benchmark": {name: r["wall_s"] for name, r in results.items()},
        "not_present": absent,
        "failed": failed,
        "table": [dict(zip(("measure", "value", "baseline", "target", "met"), row))
                  for row in table_rows(results)],
    })
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
