"""Many tenants at once, and a neighbour that hangs (issue 15, items 2 and 3).

One machine, one supervisor (the bench launcher, bench/support/run_supervisor_bench.py, with
KINT_TEST_GATE=null, as bench_verify), 64 spaces (`--quick`: 12): each a Hermes profile
store ($HERMES_HOME/sibyl/profiles/tNN/memory.db, label `<tenant>@hermes:tNN`) of ~500
rows (`--quick`: 200) from `corpus.rows(n, seed)` with a seed of its own, so no two stores
hold the same rows. Every store is written in a staging folder (Sibyl's free-tier cap walks
every store of the machine) and renamed into place.

Every space but one is anchored without a chain (`anchor_store.anchor`: kint's own split,
seal and record_epoch). The last one, the "hanging" space, is connected for real:
`connect` with `dev` on the devchain, its `rpc_urls` a loopback proxy (tests/rpc_proxy.py)
in front of the anvil, then `push`. Its verifies read the chain head through the proxy.

Item 2, many tenants. Queries: for each space, two or three of a row's own words, kept
when verify proceeds on them. The calls: rounds x (queries per space) x (every space), in
that order. They are made
- in process, by one loop: `kint.tenant_worker.verify.verify` on each space's Sibyl
  `MemoryClient.local` (NullEntitlementGate), `connect_ro(db)` and `SpaceState`, with the
  head reading "bench" (as bench_verify; the hanging space's verifies through the
  supervisor read its chain head, the in-process ones do not: 1/64 of the calls cost kint
  one local eth_call more), and
- through the supervisor by 16 client processes (`--quick`: 8; bench/tenant_clients.py),
  op `verify` (limit 5, no write-back) via `kint.client.Client`, client k making calls
  k, k+16, ..., all starting at one instant.
- through the bare shape at the same 64 spaces (bench/bare_shape.py): the same client
  processes, calls and dealing, each call kint's own request bytes sent to a bare Python
  ROUTER-ROUTER relay and on to one bare worker process a space (forked from a parent that
  imported what verify needs, as kint's forkserver; one thread, no pool, no heartbeat, no
  checks), which runs the same in-process verify on its own store and answers with the
  reply bytes kint's supervisor would send (the in-process answer, encoded as kint
  encodes it). Warmed up by the same pass as kint's workers. It is the shape README's "How it runs"
  describes with none of kint's route: routed / bare shape is what kint's route costs at
  64 spaces, bare shape / in process what the shape itself (64 processes sharing two
  cores) allows.
The three alternate (in process, routed, bare shape, twice). Throughput = calls / wall
time (routed and bare: first start to last end); each pass's CPU is read by part
(bench/cpu_account.py), the bare relay and bare workers as parts of their own. The same
ratios are also given from CPU: each pass's own CPU a verify (the processes doing its
work), the loop filling one core and the other two every core, as a box whose cores were
all the benchmark's would give them (on a shared box the wall-clock ratios also carry what
the other tenants took during each pass). Also: the PSS (/proc/<pid>/smaps_rollup) of the
supervisor, the forkserver and every worker, idle (3 s after the warm-up) and after the
load; and the wall time of `kint supervisor status` (a fresh CLI process, as a person runs
it) with every space live, against the `sup.status` round trip in this process.

Item 3, a neighbour that hangs, in the same run: three phases of the same length, in
which the clients cycle through the calls of the 62 other spaces (`--quick`: 10) and a
thread in this process polls `sup.status` twice a second (the same in every phase):
clean, faults, clean again. At the start of the faults phase a row is written to the
hanging space's store, its proxy starts to take calls and never answer, and its `push`
is sent; at the same moment the worker of another space (the "stopped" space) gets
SIGSTOP, and one verify is sent to it. Recorded: what `sup.status` said of both spaces
over time, what the push and the stopped space's verify were answered, `doctor` of the
hanging space while its endpoint hangs, the stopped worker's restart, a verify on the
stopped space after it, and a push of the hanging space once its endpoint answers again.
`--quick` runs the supervisor with KINT_WORKER_HEARTBEAT_TIMEOUT=3 and KINT_RPC_TIMEOUT=3
(defaults 10 and 10) so its phases can be shorter.

Targets: routed throughput >= 1.6x the in-process loop; routed p99 <= 3x its p50; idle
PSS of every worker < 25 MiB; `kint supervisor status` < 100 ms; in the faults phase, the
other spaces' verify p99 <= 1.2x their p99 in the clean phases (both clean phases pooled;
each is reported too); the hanging space reported, the stopped worker restarted.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import common
import corpus
from bare_shape import BareShape
from tenant_clients import BareCall, Call, ClientPool, deal
from tenant_readings import bare_memory, kint_pids, memory, status_timing
from tenant_setup import (InProcess, Space, bare_workers, connect_hanging, pick_queries,
                          write_row_alone, write_stores)

TARGET_THROUGHPUT = 1.6
TARGET_P99_OVER_P50 = 3.0
TARGET_PSS_MIB = 25.0
TARGET_STATUS_MS = 100.0
TARGET_FAULT_P99 = 1.2
IDLE_SETTLE_S = 3.0
ANCHOR_BLOCK = 100
STATUS_POLL_S = 0.5


def _params(quick: bool) -> dict[str, Any]:
    if quick:
        return {"spaces": 12, "rows": 200, "clients": 8, "queries_per_space": 4, "rounds": 2,
                "repeats": 2, "phase_s": 12.0, "status_cli_runs": 5, "status_op_runs": 30,
                "supervisor_env": {"KINT_WORKER_HEARTBEAT_TIMEOUT": "3",
                                   "KINT_RPC_TIMEOUT": "3"}}
    return {"spaces": 64, "rows": 500, "clients": 16, "queries_per_space": 6, "rounds": 3,
            "repeats": 2, "phase_s": 25.0, "status_cli_runs": 10, "status_op_runs": 100,
            "supervisor_env": {}}


def _latency(result: dict[str, Any]) -> dict[str, Any]:
    out = common.summarize(result["latencies_ms"], "ms")
    out["calls"], out["wall_s"] = result["calls"], result["wall_s"]
    out["per_s"] = result["calls"] / result["wall_s"]
    out["not_proceed"] = result["not_proceed"]
    return out


# -- the run ---------------------------------------------------------------------------------


PASSES = ("in_process", "routed", "bare_shape")
# The processes that do each pass's work (its CPU reading's parts): what one verify costs
# it, without what the other passes' idle processes spend meanwhile (kint's workers beat).
PASS_PARTS = {"in_process": ("bench_process",),
              "routed": ("clients", "supervisor", "forkserver", "workers"),
              "bare_shape": ("clients", "bare_relay", "bare_workers")}


def _item2(pool: ClientPool, inproc: InProcess, calls: list[Call], repeats: int,
           kint_home: Path, bare: BareShape, bare_calls: list[BareCall]) -> dict[str, Any]:
    """In process, routed and through the bare shape, alternating, `repeats` times each;
    every sample pooled. The CPU time of every part (this process, the supervisor, the
    forkserver, the workers, the clients, the bare relay and bare workers) and of the
    whole box is read around each pass (bench/cpu_account.py), kint's pids asked anew
    before each (a worker recycled in one pass is replaced in a later one)."""
    from cpu_account import CpuMeter

    shares = deal(calls, pool.n)
    bare_shares = deal(bare_calls, pool.n)
    ours = {"bench_process": [os.getpid()], "clients": pool.pids,
            "bare_relay": [bare.relay.pid], "bare_workers": bare.worker_pids}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in PASSES}
    cpu: dict[str, list[dict[str, Any]]] = {name: [] for name in PASSES}
    for _ in range(repeats):
        for name, go in (("in_process", lambda: inproc.run(calls)),
                         ("routed", lambda: pool.run(shares, "count")),
                         ("bare_shape", lambda: pool.run(bare_shares, "count",
                                                         via=bare.front))):
            meter = CpuMeter({**ours, **kint_pids(kint_home)[0]})
            meter.start()
            runs[name].append(go())
            cpu[name].append(meter.stop())
    out: dict[str, Any] = {}
    for name, results in runs.items():
        merged = {"latencies_ms": [x for r in results for x in r["latencies_ms"]],
                  "wall_s": sum(r["wall_s"] for r in results),
                  "calls": sum(r["calls"] for r in results), "not_proceed": {}}
        for r in results:
            for k, v in r["not_proceed"].items():
                merged["not_proceed"][k] = merged["not_proceed"].get(k, 0) + v
        out[name] = _latency(merged)
        out[name]["per_repeat_per_s"] = [r["calls"] / r["wall_s"] for r in results]
        out[name]["cpu"] = _cpu_per_verify(cpu[name], merged["calls"])
    if out["bare_shape"]["not_proceed"]:
        raise RuntimeError(f"the bare shape did not answer: {out['bare_shape']['not_proceed']}")
    out["stretch"] = _stretch(calls, shares, runs)
    return out


def _stretch(calls: list[Call], shares: list[list[Call]],
             runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each routed call's latency over the in-process latency of the same call (the median
    of its in-process passes). With 16 calls sharing two cores, a call's latency grows with
    its own work, so the routed p99/p50 cannot fall below the spread of the work itself
    (`work_ms`, one value a call); the stretch's p99/p50 is what the route and the sharing
    add on top of it."""
    own: dict[Call, list[float]] = {}
    for result in runs["in_process"]:
        for call, ms in zip(calls, result["latencies_ms"]):
            own.setdefault(call, []).append(ms)
    work = {call: statistics.median(v) for call, v in own.items()}
    order = [call for share in shares for call in share]  # ClientPool.run's sample order

    def stretch(name: str) -> dict[str, Any]:
        return common.summarize([ms / work[call] for result in runs[name]
                                 for call, ms in zip(order, result["latencies_ms"])], "x")
    out = {"stretch": stretch("routed"), "bare_shape_stretch": stretch("bare_shape"),
           "work_ms": common.summarize([work[call] for call in calls], "ms")}
    for v in out.values():
        v["p99_over_p50"] = v["p99"] / v["p50"]
    return out


def _cpu_per_verify(readings: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    """CPU ms per verify by part, and the box's share that went to other tenants."""
    parts = {k: sum(r["cpu_s"].get(k, 0.0) for r in readings) * 1000.0 / calls
             for k in sorted({k for r in readings for k in r["cpu_s"]})}
    capacity = sum(r["box_capacity_s"] for r in readings)
    by_part: dict[str, float] = {}
    for key, ms in parts.items():
        by_part[key.split(".")[0]] = by_part.get(key.split(".")[0], 0.0) + ms
    counts = {k: sum(r["counts"].get(k, 0) for r in readings) / calls
              for k in sorted({k for r in readings for k in r["counts"]})}
    return {"ms_per_verify": by_part, "ms_per_verify_by_thread": parts,
            "counts_per_verify": {k: round(v, 1) for k, v in counts.items() if v},
            "ms_per_verify_all_parts": sum(parts.values()),
            "box_busy_share": sum(r["box_busy_s"] for r in readings) / capacity,
            "processes_gone_mid_pass": sorted({pid for r in readings for pid in r["gone"]}),
            "others_share_of_box": sum(r["others_cpu_s"] for r in readings) / capacity,
            "passes": readings}


def _from_cpu(item2: dict[str, Any]) -> dict[str, Any]:
    """The throughput ratios a box with every core free for the benchmark would give: each
    pass's own CPU a verify (PASS_PARTS), and the cores it can fill. The in-process loop
    fills one core, the routed and bare passes every core; on a shared box the wall-clock
    ratios also carry what the other tenants took during each pass."""
    cores = len(os.sched_getaffinity(0))
    own = {name: sum(item2[name]["cpu"]["ms_per_verify"].get(part, 0.0)
                     for part in PASS_PARTS[name]) for name in PASSES}
    return {"cores": cores, "own_ms_per_verify": own,
            "routed_over_in_process": cores * own["in_process"] / own["routed"],
            "bare_shape_over_in_process": cores * own["in_process"] / own["bare_shape"],
            "routed_over_bare_shape": own["bare_shape"] / own["routed"]}


def _item3(m: common.Machine, pool: ClientPool, others: list[Call], hang: Space,
           stopped: Space, proxy: Any, write_row: Any, phase_s: float) -> dict[str, Any]:
    from tenant_faults import Faults, StatusWatch

    shares = deal(others, pool.n)
    phases: dict[str, Any] = {}
    raw: dict[str, list[float]] = {}
    faults_report = None
    for name in ("clean", "faults", "clean_after"):
        watch = StatusWatch(m.kint_home, [hang.label, stopped.label], STATUS_POLL_S).start()
        faults = None
        if name == "faults":
            faults = Faults(m.kint_home, common.TENANT, hang, stopped, proxy, write_row)
            faults.begin()
        load = os.getloadavg()[0]
        result = pool.run(shares, "duration", phase_s)
        watch.stop()
        phases[name] = _latency(result)
        raw[name] = result["latencies_ms"]
        phases[name]["status_poll_ms"] = common.summarize(watch.op_ms, "ms")
        phases[name]["status_poll_errors"] = watch.errors
        phases[name]["loadavg_1m_at_start"] = load
        if faults is not None:
            faults_report = faults.finish(watch)
            faults_report["status_samples"] = watch.samples
    return {"phases": phases, "faults": faults_report, "raw_ms": raw}


def run(quick: bool = False, supervisor_env: dict[str, str] | None = None) -> dict[str, Any]:
    """`supervisor_env`: more of the supervisor's environment (bench/nice_ab.py's A/B)."""
    from kint.chain import devchain
    from kint.spaces import resolve

    sys.path.insert(0, str(common.REPO_DIR / "tests"))
    from rpc_proxy import RpcProxy  # tests/rpc_proxy.py: the loopback proxy that can hang

    from anchor_store import anchor

    p = _params(quick)
    p["supervisor_env"] = {**p["supervisor_env"], **(supervisor_env or {})}
    n, rows = p["spaces"], p["rows"]
    timings: dict[str, float] = {}
    with common.hermetic("tenants") as env:
        m = common.Machine("m", env.root / "m")
        m.kint_home.mkdir(parents=True, mode=0o700)
        # This process resolves the spaces as the machine does (its HOME, HERMES_HOME).
        os.environ.update(HOME=str(m.home), KINT_HOME=str(m.kint_home),
                          HERMES_HOME=str(m.hermes_home))
        spaces = [Space(f"t{i:02d}", seed=5000 + i, db=Path()) for i in range(n)]
        for s in spaces:
            s.db = m.hermes_home / "sibyl" / "profiles" / s.profile / "memory.db"
        t = time.monotonic()
        written = write_stores(env.root, m.hermes_home, spaces, rows)
        timings["write_stores_s"] = time.monotonic() - t
        for s in spaces:
            ref = resolve(common.TENANT, s.db)
            s.label = ref.label
            s.space16 = ref.space16
            assert s.label == f"{common.TENANT}@hermes:{s.profile}", s.label
        hang, stopped = spaces[-1], spaces[-2]

        t = time.monotonic()
        for s in spaces[:-1]:
            anchor(m.kint_home, s.label, s.db, common.TENANT, block=ANCHOR_BLOCK)
        timings["anchor_s"] = time.monotonic() - t

        chain = common.Machine("chain", env.root / "chain")
        chain.kint_home.mkdir(parents=True, mode=0o700)
        record = devchain.start(chain.kint_home)
        env.on_exit.append(lambda: devchain.stop(chain.kint_home))
        (m.kint_home / "devchain").mkdir(mode=0o700)
        # Copied as kint keeps it, 0600 (a 0644 copy is tightened, with a warning, when the
        # supervisor starts).
        shutil.copy(chain.kint_home / "devchain" / "devchain.json",
                    m.kint_home / "devchain" / "devchain.json")
        proxy = RpcProxy(record["rpc_url"], max_hang_s=120).start()
        env.on_exit.append(proxy.stop)
        common.start_bench_supervisor(env, m, extra_env=p["supervisor_env"])
        t = time.monotonic()
        hanging_setup = connect_hanging(m, hang, proxy.url)
        timings["connect_and_push_hanging_s"] = time.monotonic() - t

        inproc = InProcess(m.kint_home, spaces)
        pool = bare = None
        answers: dict[tuple[str, str], dict[str, Any]] = {}

        def verify_kept(label: str, query: str) -> dict[str, Any]:
            answers[(label, query)] = inproc.verify(label, query)
            return answers[(label, query)]
        try:
            t = time.monotonic()
            dropped = {s.label: pick_queries(s, rows, p["queries_per_space"],
                                             lambda q, s=s: verify_kept(s.label, q))
                       for s in spaces}
            timings["pick_queries_s"] = time.monotonic() - t
            calls: list[Call] = [(str(s.db), s.label, s.queries[qi])
                                 for _ in range(p["rounds"])
                                 for qi in range(p["queries_per_space"]) for s in spaces]

            t = time.monotonic()
            pool = ClientPool(p["clients"], m.kint_home, common.TENANT)
            timings["start_clients_s"] = time.monotonic() - t
            # Warm-up: every space's worker spawned and every query seen once, routed.
            t = time.monotonic()
            warm = pool.run(deal(calls[:len(spaces) * p["queries_per_space"]], pool.n),
                            "count")
            timings["warm_up_s"] = time.monotonic() - t
            if warm["not_proceed"]:
                raise RuntimeError(f"routed verify did not proceed: {warm['not_proceed']}")
            inproc.run(calls[:len(spaces)])  # the in-process loop's own warm-up
            time.sleep(IDLE_SETTLE_S)
            memory_idle = memory(m.kint_home)
            status = status_timing(m, p["status_cli_runs"], p["status_op_runs"])

            t = time.monotonic()
            specs, bare_by_call = bare_workers(m.kint_home, spaces, answers)
            bare = BareShape(env.root, specs, name="shape")
            bare_calls = [bare_by_call[(label, query)] for _, label, query in calls]
            timings["start_bare_shape_s"] = time.monotonic() - t
            t = time.monotonic()  # the same warm-up as kint's workers had
            warm = pool.run(deal(bare_calls[:len(spaces) * p["queries_per_space"]], pool.n),
                            "count", via=bare.front)
            timings["warm_up_bare_shape_s"] = time.monotonic() - t
            if warm["not_proceed"]:
                raise RuntimeError(f"the bare shape did not answer: {warm['not_proceed']}")
            memory_bare = bare_memory(bare)

            load_before = os.getloadavg()
            item2 = _item2(pool, inproc, calls, p["repeats"], m.kint_home, bare, bare_calls)
            load_after = os.getloadavg()
            memory_loaded = memory(m.kint_home)
            bare.close()
            bare = None

            others = [c for c in calls if c[1] not in (hang.label, stopped.label)]
            extra = corpus.rows(rows + 1, seed=hang.seed)[-1]
            item3 = _item3(m, pool, others, hang, stopped, proxy,
                           lambda: write_row_alone(hang.db, env.root / "scratch", extra),
                           p["phase_s"])
        finally:
            if bare is not None:
                bare.close()
            if pool is not None:
                pool.close()
            inproc.close()
            proxy.forward()

    item2["memory_bare_shape"] = memory_bare
    return _result(quick, p, written, timings, hanging_setup, dropped, calls, memory_idle,
                   memory_loaded, status, item2, item3, load_before, load_after, env)


def _result(quick: bool, p: dict[str, Any], written: list[dict], timings: dict[str, float],
            hanging_setup: dict[str, Any], dropped: dict[str, dict[str, int]],
            calls: list[Call], memory_idle: dict[str, Any], memory_loaded: dict[str, Any],
            status: dict[str, Any], item2: dict[str, Any], item3: dict[str, Any],
            load_before: tuple[float, ...], load_after: tuple[float, ...],
            env: common.BenchEnv) -> dict[str, Any]:
    ip, rt, bs = item2["in_process"], item2["routed"], item2["bare_shape"]
    throughput_ratio = rt["per_s"] / ip["per_s"]
    tail = rt["p99"] / rt["p50"]
    raw = item3.pop("raw_ms")
    clean = common.summarize(raw["clean"] + raw["clean_after"], "ms")
    faulted = item3["phases"]["faults"]
    fault_ratio = faulted["p99"] / clean["p99"]
    faults = item3["faults"] or {}
    seen = faults.get("seen_in_status", {})
    answers = faults.get("answers", {})
    doctor = (answers.get("doctor_hanging") or {}).get("result") or {}
    chain_check = [c for c in doctor.get("checks", []) if c["name"] == "rpc primary"]
    hung_reported = ("hanging_push_call_in_flight" in seen
                     and bool(chain_check) and not chain_check[0]["ok"])
    restarted = bool((faults.get("restart") or {}).get("restarted")) and \
        faults.get("verify_stopped_after_restart", {}).get("decision") == "proceed"
    met = {
        "throughput": throughput_ratio >= TARGET_THROUGHPUT,
        "p99_over_p50": tail <= TARGET_P99_OVER_P50,
        "idle_worker_pss": memory_idle["worker_pss_mib"]["max"] < TARGET_PSS_MIB,
        "status_cli": status["cli_ms"]["p50"] < TARGET_STATUS_MS,
        "fault_p99": fault_ratio <= TARGET_FAULT_P99,
        "hanging_reported": hung_reported,
        "stopped_restarted": restarted,
    }
    return {
        "name": "tenants",
        "quick": quick,
        "machine": common.machine(),
        "params": {k: v for k, v in p.items()},
        "setup": {"stores": {"rows_each": p["rows"], "written_rows_per_s_mean":
                             sum(w["rows_per_s"] for w in written) / len(written)},
                  "timings_s": timings, "hanging_space": hanging_setup,
                  "queries_dropped": {k: v for k, v in dropped.items() if v},
                  "calls_per_pass": len(calls)},
        "loadavg_around_item2": {"before": list(load_before), "after": list(load_after)},
        "item2": {
            "in_process": ip, "routed": rt, "bare_shape": bs,
            "ratio_throughput_routed_over_in_process": throughput_ratio,
            "ratio_throughput_routed_over_bare_shape": rt["per_s"] / bs["per_s"],
            "ratio_throughput_bare_shape_over_in_process": bs["per_s"] / ip["per_s"],
            "routed_p99_over_p50": tail,
            "in_process_p99_over_p50": ip["p99"] / ip["p50"],
            "bare_shape_p99_over_p50": bs["p99"] / bs["p50"],
            "ratio_throughput_from_cpu": _from_cpu(item2),
            "stretch": item2["stretch"],
            "memory_idle": memory_idle, "memory_after_load": memory_loaded,
            "memory_bare_shape": item2["memory_bare_shape"],
            "status": status,
        },
        "item3": {"phases": item3["phases"], "clean_pooled_ms": clean,
                  "ratio_faults_p99_over_clean_p99": fault_ratio,
                  "ratio_faults_p99_over_each_clean": {
                      k: faulted["p99"] / item3["phases"][k]["p99"]
                      for k in ("clean", "clean_after")},
                  "faults": faults},
        "target": {"description": "issue 15 items 2 and 3: throughput >= 1.6x in-process, "
                                  "p99 <= 3x p50, idle worker PSS < 25 MiB, status < 100 ms, "
                                  "faulted p99 <= 1.2x clean, hung space reported, stopped "
                                  "worker restarted",
                   "items": met, "met": all(met.values())},
        "env": env.report(),
    }


def report(result: dict[str, Any], path: Path) -> None:
    i2, i3 = result["item2"], result["item3"]
    ip, rt, bs, st = i2["in_process"], i2["routed"], i2["bare_shape"], i2["status"]
    met = result["target"]["items"]
    yes = {True: "met", False: "NOT met"}
    n = result["params"]["spaces"]
    print(f"{n} spaces, {result['params']['clients']} clients, "
          f"{result['setup']['calls_per_pass']} verifies a pass")
    print(f"in process  {ip['per_s']:7.1f}/s  p50 {ip['p50']:6.2f} ms  p99 {ip['p99']:6.2f} ms")
    print(f"routed      {rt['per_s']:7.1f}/s  p50 {rt['p50']:6.2f} ms  p99 {rt['p99']:6.2f} ms")
    print(f"bare shape  {bs['per_s']:7.1f}/s  p50 {bs['p50']:6.2f} ms  p99 {bs['p99']:6.2f} ms")
    print(f"  throughput ratio {i2['ratio_throughput_routed_over_in_process']:.2f}x "
          f"(>= {TARGET_THROUGHPUT}x: {yes[met['throughput']]}); p99/p50 "
          f"{i2['routed_p99_over_p50']:.2f} (<= {TARGET_P99_OVER_P50}: {yes[met['p99_over_p50']]})")
    print(f"  routed / bare shape {i2['ratio_throughput_routed_over_bare_shape']:.2f}x; bare "
          f"shape / in process {i2['ratio_throughput_bare_shape_over_in_process']:.2f}x; bare "
          f"shape p99/p50 {i2['bare_shape_p99_over_p50']:.2f}")
    fc = i2["ratio_throughput_from_cpu"]
    print(f"  from CPU ({fc['cores']} free cores): routed / in process "
          f"{fc['routed_over_in_process']:.2f}x, bare shape / in process "
          f"{fc['bare_shape_over_in_process']:.2f}x, routed / bare shape "
          f"{fc['routed_over_bare_shape']:.2f}x (own CPU ms a verify: " + ", ".join(
              f"{k} {v:.2f}" for k, v in fc["own_ms_per_verify"].items()) + ")")
    sw = i2["stretch"]
    print(f"  p99/p50 of the in-process loop {i2['in_process_p99_over_p50']:.2f}, of each call's "
          f"own work {sw['work_ms']['p99_over_p50']:.2f}, of the routed stretch (routed / "
          f"in-process, call by call) {sw['stretch']['p99_over_p50']:.2f}, of the bare "
          f"shape's {sw['bare_shape_stretch']['p99_over_p50']:.2f}")
    for name in PASSES:
        c = i2[name]["cpu"]
        print(f"  CPU ms a verify, {name}: " + ", ".join(
            f"{k} {v:.2f}" for k, v in c["ms_per_verify_by_thread"].items() if v >= 0.005)
            + f"; other tenants of the box took {c['others_share_of_box']:.0%} of it"
            + (f"; {len(c['processes_gone_mid_pass'])} process(es) ended mid-pass, their CPU "
               "left out" if c["processes_gone_mid_pass"] else ""))
        print(f"  per verify, {name}: " + ", ".join(
            f"{k} {v:g}" for k, v in c["counts_per_verify"].items() if v >= 0.1))
    mi = i2["memory_idle"]
    print(f"idle worker PSS mean {mi['worker_pss_mib']['mean']:.1f} max "
          f"{mi['worker_pss_mib']['max']:.1f} MiB ({yes[met['idle_worker_pss']]}); supervisor "
          f"{mi['supervisor']['pss_mib']:.1f} MiB; total {mi['total_pss_mib']:.0f} MiB")
    mb = i2["memory_bare_shape"]
    print(f"bare shape worker PSS mean {mb['worker_pss_mib']['mean']:.1f} max "
          f"{mb['worker_pss_mib']['max']:.1f} MiB (USS mean {mb['worker_uss_mib_mean']:.1f}; "
          f"kint's {mi['worker_uss_mib_mean']:.1f})")
    print(f"`kint supervisor status` p50 {st['cli_ms']['p50']:.0f} ms (bare python "
          f"{st['bare_python_ms']['p50']:.0f} ms; sup.status op {st['op_ms']['p50']:.2f} ms; "
          f"box {st['box_busy_share']:.0%} busy meanwhile) ({yes[met['status_cli']]})")
    ph = i3["phases"]
    print(f"others' p99: clean {ph['clean']['p99']:.2f} / faults {ph['faults']['p99']:.2f} / "
          f"clean after {ph['clean_after']['p99']:.2f} ms: "
          f"{i3['ratio_faults_p99_over_clean_p99']:.2f}x ({yes[met['fault_p99']]})")
    print(f"hanging space reported: {yes[met['hanging_reported']]}; stopped worker restarted: "
          f"{yes[met['stopped_restarted']]}  -> {path}")


def table_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """This benchmark's lines in run_all.py's table."""
    i2, met = result["item2"], result["target"]["items"]
    ip, rt, bs, fc = (i2["in_process"], i2["routed"], i2["bare_shape"],
                      i2["ratio_throughput_from_cpu"])
    yes = {True: "yes", False: "NO"}
    n, clients = result["params"]["spaces"], result["params"]["clients"]
    return [
        (f"tenants: verifies/s, {n} spaces, {clients} clients, routed / in process",
         f"{i2['ratio_throughput_routed_over_in_process']:.2f}x",
         f"{rt['per_s']:.0f} / {ip['per_s']:.0f}", ">= 1.6x", yes[met["throughput"]]),
        ("  bare shape (relay + a bare worker a space) / in process",
         f"{i2['ratio_throughput_bare_shape_over_in_process']:.2f}x",
         f"{bs['per_s']:.0f} / {ip['per_s']:.0f}", "", ""),
        ("  routed / bare shape", f"{i2['ratio_throughput_routed_over_bare_shape']:.2f}x",
         "", "", ""),
        ("  (context) the same from CPU: routed, bare shape / in process; routed / bare",
         f"{fc['routed_over_in_process']:.2f}x, {fc['bare_shape_over_in_process']:.2f}x; "
         f"{fc['routed_over_bare_shape']:.2f}x", "", "", ""),
        ("  routed p99 / p50 (ms)", f"{i2['routed_p99_over_p50']:.2f}x",
         f"{rt['p99']:.1f} / {rt['p50']:.1f}", "<= 3x", yes[met["p99_over_p50"]]),
        ("  idle worker PSS, largest (MiB)",
         f"{i2['memory_idle']['worker_pss_mib']['max']:.1f}", "", "< 25",
         yes[met["idle_worker_pss"]]),
        ("  `kint supervisor status` p50 (ms)", f"{i2['status']['cli_ms']['p50']:.0f}",
         f"bare python {i2['status']['bare_python_ms']['p50']:.0f}", "< 100",
         yes[met["status_cli"]]),
        ("  others' p99, faults / clean; hung reported; stopped restarted",
         f"{result['item3']['ratio_faults_p99_over_clean_p99']:.2f}x; "
         f"{yes[met['hanging_reported']]}; {yes[met['stopped_restarted']]}", "", "<= 1.2x",
         yes[met["fault_p99"] and met["hanging_reported"] and met["stopped_restarted"]]),
    ]


def main() -> int:
    return common.bench_main("tenants", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
