"""The two hops (issue 15, item 4): kint's routed round trip, client -> supervisor ->
worker -> back, against a bare two-hop relay of the same shape, in the same run.

kint: one reused `kint.client.Client` on the bench supervisor (bench/support/
run_supervisor_bench.py, KINT_TEST_GATE=null) of one machine whose default Sibyl store holds
1,000 rows (`--quick`: the same 1,000 rows, fewer calls), anchored through kint's own
split, seal and record (bench/anchor_store.py). Two ops:

- `status` (no args): the worker's plain status, a few stats;
- `verify` (limit 5, no write-back) over queries it proceeds on: its ~7.5 KB answer
  (hits, checks with proofs) is what the large reply measures.

Bare (bench/bare_shape.py): three processes, as kint has. This process's DEALER, which
sends a route frame (the worker's name, as kint's request names its space) and the
request; a relay child, a Python ROUTER-ROUTER loop (front for clients, back for its
worker) that forwards each message as its bytes, the client's identity as a frame; a
worker, a DEALER forked from a parent (as kint's workers are forked from its forkserver)
that answers each request with the reply it was given for it. The request and reply bytes are kint's
own: for each op (and each verify query), the exact request frame kint's client sends (the same
fields, a fixed id) and the exact reply frame kint's supervisor sent back. It is the limit of the
shape README's "How it runs" describes: two IPC round trips, a Python loop in the middle, no work at
either end beyond moving the bytes.

The four series (bare status, kint status, bare verify, kint verify) are timed in
alternating blocks, with every process up throughout, so all see the same machine; the
1-minute load average is sampled before and after.

Target: kint at most 1.5x the bare two-hop at p50, for each op (p99 reported too). verify
through kint also runs verify itself (a few ms at 1,000 rows: Sibyl's own two-stage search
is most of it), which the bare worker above does not, so a fifth series sets kint against
the bare shape doing the same work: the same relay, and the same worker given each
request's query, which runs kint's `verify` function in-process on the same store, state
files and query before it answers with the same reply bytes (its parent imported what
verify needs before the fork). kint over that series is what kint's route adds to a verify; kint
over the plain bare relay is the issue's literal ratio, reported beside it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import common
import corpus
from bare_shape import BareShape, WorkerSpec

TARGET_RATIO_P50 = 1.5
LIMIT = 5
ROWS = 1000
ANCHOR_BLOCK = 100
STATUS_BLOCK = 50  # calls per block of the status series

ROUTE = b"bare-worker"  # the bare relay's one worker


def cpu_ns(pid: int, *, proc: Path = Path("/proc")) -> int:
    """CPU time a process has run, all its threads (ZeroMQ's I/O thread too), in ns: the
    first field of each task's schedstat, which the scheduler keeps to the nanosecond.
    A process that has run has some: none read at all is a kernel that keeps no schedstat
    (or writes 0 there), refused by name, where every block's 0 made the ratio of two a
    ZeroDivisionError."""
    total = 0
    for task in os.listdir(proc / str(pid) / "task"):
        try:
            total += int((proc / str(pid) / "task" / task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    if total == 0:
        raise RuntimeError(f"{proc}/{pid}/task/*/schedstat gave no CPU time: this kernel keeps "
                           f"none there (CONFIG_SCHED_INFO), so this benchmark cannot measure")
    return total


def _timed(fn: Callable[[], Any], into: list[float] | None) -> None:
    t0 = time.perf_counter_ns()
    fn()
    if into is not None:
        into.append((time.perf_counter_ns() - t0) / 1000.0)


def _queries(kc: Any, call: Callable[[str], dict[str, Any]], data: list[corpus.Row],
             n_rows: int, keep: int) -> list[str]:
    """Queries verify proceeds on through kint (bench_verify's candidates: a row's own
    words), so every timed verify does the same work as it would for a caller."""
    from bench_verify import _candidate_queries

    out = []
    for q in _candidate_queries(data, n_rows, keep * 3, seed=ROWS):
        if call(q)["decision"] == "proceed":
            out.append(q)
        if len(out) == keep:
            return out
    raise RuntimeError(f"only {len(out)} queries proceed: {out}")


def _ratio(kint: dict[str, Any], bare: dict[str, Any]) -> dict[str, float]:
    return {p: kint[p] / bare[p] for p in ("p50", "p99")}


def run(quick: bool = False) -> dict[str, Any]:
    from kint.client import Client
    from kint.protocol import Request, encode_request
    from kint.protocol.envelope import ok_reply
    from kint.protocol.server_codec import encode_reply

    from anchor_store import anchor

    n_status, n_queries, verify_rounds, warm = (300, 20, 5, 1) if quick else (2000, 40, 20, 2)
    tenant = common.TENANT
    load = {"before": list(os.getloadavg())}
    with common.hermetic("twohop") as env:
        m = common.Machine("m", env.root / "m")
        db, label = m.sibyl_db, tenant  # Sibyl's default store: the space label is the tenant
        data = corpus.rows(ROWS)
        written = corpus.write_store(db, tenant, data)
        anchor(m.kint_home, label, db, tenant, block=ANCHOR_BLOCK)
        common.start_bench_supervisor(env, m)
        where = {"tenant": tenant, "db": str(db), "space": label}
        timeout_ms = 60_000

        def status(kc: Client) -> dict[str, Any]:
            return kc.call("status", **where, timeout_s=timeout_ms / 1000)

        def verify(kc: Client, q: str) -> dict[str, Any]:
            return kc.call("verify", **where, args={"query": q, "limit": LIMIT, "write": False},
                           timeout_s=timeout_ms / 1000)

        def frames(op: str, args: dict[str, Any], result: dict[str, Any]) -> tuple[bytes, bytes]:
            """kint's request frame for this call (a fixed id of the client's length) and
            the reply frame the supervisor sent back for it."""
            rid = "0" * 16
            req = encode_request(Request(id=rid, op=op, args=args, timeout_ms=timeout_ms,
                                         **where))
            return req, encode_reply(ok_reply(rid, result))

        from kint.supervisor.pidlock import running_pid

        with Client(m.kint_home, autostart=False) as kc:
            queries = _queries(kc, lambda q: verify(kc, q), data, written.written, n_queries)
            status_req, status_reply = frames("status", {}, status(kc))
            verify_frames = {q: frames("verify", {"query": q, "limit": LIMIT, "write": False},
                                       verify(kc, q)) for q in queries}
            replies = {status_req: status_reply, **dict(verify_frames.values())}
            bare_requests = {q: req for q, (req, _) in verify_frames.items()}
            bare = BareShape(env.root, [WorkerSpec(ROUTE, replies)])
            work = BareShape(env.root, [WorkerSpec(
                ROUTE, replies, work={req: q for q, req in bare_requests.items()},
                verify_on=(str(m.kint_home), str(db), tenant, label))], name="work")
            samples: dict[str, list[float]] = {k: [] for k in ("bare_status", "kint_status",
                                                               "bare_verify", "work_verify",
                                                               "kint_verify")}
            # CPU of each process of each series, summed over its timed blocks: ns.
            cpu: dict[str, list[int]] = {k: [0, 0, 0] for k in samples}
            try:
                first_pid = status(kc)["worker"]["pid"]
                sup_pid = running_pid(m.kint_home)
                pids = {"kint": (os.getpid(), sup_pid, first_pid),
                        "bare": (os.getpid(), bare.relay.pid, bare.worker_pids[0]),
                        "work": (os.getpid(), work.relay.pid, work.worker_pids[0])}
                series = [
                    ("bare_status", lambda keep: [_timed(lambda: bare.call(status_req),
                                                         samples["bare_status"] if keep
                                                         else None)
                                                  for _ in range(STATUS_BLOCK)]),
                    ("kint_status", lambda keep: [_timed(lambda: status(kc),
                                                         samples["kint_status"] if keep
                                                         else None)
                                                  for _ in range(STATUS_BLOCK)]),
                    ("bare_verify", lambda keep: [_timed(lambda q=q: bare.call(bare_requests[q]),
                                                         samples["bare_verify"] if keep
                                                         else None)
                                                  for q in queries]),
                    ("work_verify", lambda keep: [_timed(lambda q=q: work.call(bare_requests[q]),
                                                         samples["work_verify"] if keep
                                                         else None)
                                                  for q in queries]),
                    ("kint_verify", lambda keep: [_timed(lambda q=q: verify(kc, q),
                                                         samples["kint_verify"] if keep
                                                         else None)
                                                  for q in queries]),
                ]
                for r in range(warm):
                    for _, block in series:
                        block(False)
                status_blocks = n_status // STATUS_BLOCK
                for r in range(max(status_blocks, verify_rounds)):
                    # Alternate the order each round, so no series always follows another.
                    for name, block in (series if r % 2 == 0 else series[::-1]):
                        if name.endswith("status") and r >= status_blocks:
                            continue
                        if name.endswith("verify") and r >= verify_rounds:
                            continue
                        who = pids[name.split("_")[0]]
                        before = [cpu_ns(pid) for pid in who]
                        block(True)
                        after = [cpu_ns(pid) for pid in who]
                        cpu[name] = [c + a - b for c, a, b in zip(cpu[name], after, before)]
                if status(kc)["worker"]["pid"] != first_pid:
                    raise RuntimeError("the space's worker changed during the run")
            finally:
                bare.close()
                work.close()
        load["after"] = list(os.getloadavg())

    summary = {k: common.summarize(v, "us") for k, v in samples.items()}
    cpu_us = {k: dict(zip(("client", "middle", "worker"),
                          (round(ns / 1000 / len(samples[k]), 1) for ns in v)))
              for k, v in cpu.items()}
    for v in cpu_us.values():
        v["total"] = round(v["client"] + v["middle"] + v["worker"], 1)
    ratios = {op: _ratio(summary[f"kint_{op}"], summary[f"bare_{op}"])
              for op in ("status", "verify")}
    same_work = _ratio(summary["kint_verify"], summary["work_verify"])
    met = {op: r["p50"] <= TARGET_RATIO_P50 for op, r in ratios.items()}
    return {
        "name": "twohop",
        "quick": quick,
        "machine": common.machine(),
        "load_1min": load,
        "rows": written.written,
        "params": {"status_calls": n_status, "status_block": STATUS_BLOCK,
                   "verify_queries": len(queries), "verify_rounds": verify_rounds,
                   "warmup_rounds": warm, "limit": LIMIT,
                   "status_request_bytes": len(status_req),
                   "status_reply_bytes": len(status_reply),
                   "verify_request_bytes_mean": sum(len(r) for r, _ in verify_frames.values())
                                                / len(queries),
                   "verify_reply_bytes_mean": sum(len(r) for _, r in verify_frames.values())
                                              / len(queries)},
        "us": summary,
        "ratio_kint_over_bare": ratios,
        "cpu_us_per_call": {"note": "CPU time per timed call of each process, all threads, "
                                    "from /proc/<pid>/task/*/schedstat: the client (this "
                                    "process), the middle (kint's supervisor or the bare "
                                    "relay) and the worker",
                            **cpu_us},
        "verify_same_work": {
            "note": "the bare relay whose worker runs kint's verify in-process on the same "
                    "store and query before answering with the same reply bytes: kint over "
                    "it is what the route adds to the same work",
            "ratio_kint_over_same_work": same_work,
            "verify_work_us_p50": summary["work_verify"]["p50"] - summary["bare_verify"]["p50"],
            "met_p50": same_work["p50"] <= TARGET_RATIO_P50},
        "target": {"description": "kint's routed round trip within 1.5x of a bare two-hop "
                                  "relay of the same shape and message sizes, at p50, for "
                                  "status and for verify",
                   "max_ratio_p50": TARGET_RATIO_P50, "met_by_op": met,
                   "met": all(met.values())},
        "env": env.report(),
    }


def table_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """This benchmark's lines in run_all.py's table."""
    us, p, met = result["us"], result["params"], result["target"]["met_by_op"]
    rows = []
    for op, size in (("status", f"{p['status_reply_bytes']} B reply"),
                     ("verify", f"{p['verify_reply_bytes_mean']:.0f} B reply")):
        k, b, r = us[f"kint_{op}"], us[f"bare_{op}"], result["ratio_kint_over_bare"][op]
        rows += [
            (f"two hops, {op} ({size}) p50/p99 (us)", f"{k['p50']:.0f} / {k['p99']:.0f}",
             f"bare two-hop {b['p50']:.0f} / {b['p99']:.0f}", "", ""),
            ("  ratio kint/bare p50 / p99", f"{r['p50']:.2f}x / {r['p99']:.2f}x", "",
             "<= 1.5x (p50)", "yes" if met[op] else "NO"),
        ]
    for op in ("status", "verify"):
        k, b = result["cpu_us_per_call"][f"kint_{op}"], result["cpu_us_per_call"][f"bare_{op}"]
        rows.append((f"  (context) {op} CPU per call: client + middle + worker (us)",
                     f"{k['client']:.0f} + {k['middle']:.0f} + {k['worker']:.0f}",
                     f"bare {b['client']:.0f} + {b['middle']:.0f} + {b['worker']:.0f}", "", ""))
    c = result["cpu_us_per_call"]["work_verify"]
    rows.append(("  (context) same-work verify CPU per call (us)",
                 f"{c['client']:.0f} + {c['middle']:.0f} + {c['worker']:.0f}", "", "", ""))
    w, same = us["work_verify"], result["verify_same_work"]
    r = same["ratio_kint_over_same_work"]
    rows.append(("  verify, kint / bare two-hop doing the same verify, p50 / p99",
                 f"{r['p50']:.2f}x / {r['p99']:.2f}x",
                 f"same work {w['p50']:.0f} / {w['p99']:.0f} us", "<= 1.5x (p50)",
                 "yes" if same["met_p50"] else "NO"))
    return rows


def report(result: dict[str, Any], path: Path) -> None:
    us, p = result["us"], result["params"]
    for op in ("status", "verify"):
        b, k, r = us[f"bare_{op}"], us[f"kint_{op}"], result["ratio_kint_over_bare"][op]
        size = (f"{p['status_request_bytes']} / {p['status_reply_bytes']}" if op == "status"
                else f"{p['verify_request_bytes_mean']:.0f} / {p['verify_reply_bytes_mean']:.0f}")
        print(f"{op:7s} ({size} B)  bare p50 {b['p50']:8.1f} p99 {b['p99']:8.1f} us   "
              f"kint p50 {k['p50']:8.1f} p99 {k['p99']:8.1f} us   "
              f"ratio {r['p50']:.2f}x / {r['p99']:.2f}x")
    for k, v in result["cpu_us_per_call"].items():
        if k != "note":
            print(f"cpu per call, {k:12s} client {v['client']:6.0f}  middle {v['middle']:6.0f}  "
                  f"worker {v['worker']:6.0f}  total {v['total']:6.0f} us")
    w, same = us["work_verify"], result["verify_same_work"]
    print(f"verify, bare two-hop doing the same verify: p50 {w['p50']:.1f} p99 {w['p99']:.1f} us"
          f"   kint / it {same['ratio_kint_over_same_work']['p50']:.2f}x / "
          f"{same['ratio_kint_over_same_work']['p99']:.2f}x")
    print(f"load (1 min) {result['load_1min']}  -> {path}")


def main() -> int:
    return common.bench_main("twohop", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
