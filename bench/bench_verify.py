"""Verify latency against Sibyl's `multi_record_search` alone, on the same store, in the
same run (issue 3).

For each size (1,000 and 10,000 rows asked; `--quick`: 200 and 1,000), in its own hermetic
folder:

1. A real Sibyl store at machine m's `~/.sibyl-memory/memory.db` (space label = the
   tenant) is written through Sibyl's own methods from `corpus.rows(n)` (85% entities,
   3% state documents, 12% journal events). At 1,000 rows (and `--quick`'s sizes) the
   writer is a free-tier client; 1,000 rows fit under its 5 MiB cap. At 10,000 rows,
   which the free tier stops at ~2,047, the fixture is written by a Pro account on a
   throwaway signing key (bench/pro_account.py): Sibyl's real EntitlementGate and
   CapGate, uncapped for that account. What is timed only reads the store. The JSON says
   which gate wrote the store (`store.cap_gate`) and whether anything stopped it
   (`store.written`, `store.stopped_by`).
2. Every row is anchored through kint's own split, seal and recording function
   (`bench/anchor_store.py: anchor`: `split_diff`, `seal`, `record_epoch`; as many epochs
   as push would make, no chain), so the mirror, watermark and epoch cache are the real
   files verify reads.
3. Queries: two or three of a row's distinctive words, for rows sampled from the store.
   A query is kept only when verify proceeds on it (Sibyl's verdict is ok and a hit is
   verified): the set "hits anchored rows". How many were tried and why others were
   dropped is recorded.
4. In-process: `verify(client=MemoryClient, conn=connect_ro(db), state=SpaceState(...),
   head=HeadReading(None, "bench"), write_refusal=False, limit=5)` against
   `multi_record_search(client, q, limit=5)` on the same MemoryClient (Sibyl's
   `MemoryClient.local` with its NullEntitlementGate). The two are timed in alternating
   order, query by query, round after round, after warm-up rounds.
5. Through the supervisor: the bench supervisor (bench/support/run_supervisor_bench.py,
   KINT_TEST_GATE=null) for machine m; op `verify` with `write: False` through one reused
   `kint.client.Client`, against the same in-process bare search, interleaved the same
   way. That ratio includes two IPC hops, the protocol's encode/decode at each end, the
   worker's thread pool, the worker's head read (not connected: a file lookup) and
   encoding the whole verify answer (hits, checks with proofs).

Targets (issue 3): verify within 1.15x of the bare search in-process, within 1.25x
through the supervisor; p50 and p99 are both reported and both must be under the target
for "met". When a target is missed, the benchmark records a cProfile of the verify calls
(top entries by cumulative and by own time) so the cost can be located.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import random
import sys
import time
from pathlib import Path
from typing import Any

import common
import corpus
from pro_account import ProAccount

TARGET_IN_PROCESS = 1.15
TARGET_SUPERVISOR = 1.25
LIMIT = 5
ANCHOR_BLOCK = 100
# Sizes whose fixture store is written by a Pro account (bench/pro_account.py: Sibyl's
# real gates, no cap); the free tier's 5 MiB cap stops at ~2,047 rows. Fixture only.
PRO_ACCOUNT_SIZES = frozenset({10000})


def _anchor_fn() -> Any:
    from anchor_store import anchor  # bench/anchor_store.py: kint's split, seal, record_epoch

    return anchor


def _candidate_queries(data: list[corpus.Row], n_written: int, count: int,
                       seed: int) -> list[str]:
    rng = random.Random(seed)
    written = data[:n_written]
    picks = rng.sample(range(len(written)), min(len(written), count))
    out = []
    for i in picks:
        words = written[i].words
        k = 3 if len(words) >= 3 and rng.random() < 0.5 else 2
        out.append(" ".join(w.lower() for w in words[:k]))
    return list(dict.fromkeys(out))


def proceeding_queries(tried: list[str], verify: Any, keep: int, n_rows: int
                       ) -> tuple[list[str], dict[str, int]]:
    """The first `keep` queries verify proceeds on, and why the others were dropped (Sibyl's
    verdict, or the start of verify's reason). Fewer than 5 is not a benchmark."""
    queries: list[str] = []
    dropped: dict[str, int] = {}
    for q in tried:
        out = verify(q)
        if out["decision"] == "proceed":
            queries.append(q)
        else:
            why = out["verdict"]["code"] if out["verdict"]["code"] != "ok" else \
                out["reason"][:60]
            dropped[why] = dropped.get(why, 0) + 1
    if len(queries[:keep]) < 5:
        raise RuntimeError(f"only {len(queries)} queries proceed at n={n_rows}: {dropped}")
    return queries[:keep], dropped


def _ms(t0: int) -> float:
    return (time.perf_counter_ns() - t0) / 1e6


def _alternate(queries: list[str], bare: Any, verify: Any, into: dict[str, list[float]],
               warmup: int, rounds: int, what: str, after_each: Any = None) -> None:
    """Time `bare` and `verify` on every query, round after round, alternating which goes
    first (so drift in the machine lands on both); the warm-up rounds are not kept. A verify
    that stops proceeding ends the run: the timings would no longer be of the same work."""
    for r in range(warmup + rounds):
        keep = r >= warmup
        for i, q in enumerate(queries):
            order = ("bare", "verify") if (i + r) % 2 == 0 else ("verify", "bare")
            for which in order:
                t0 = time.perf_counter_ns()
                out = bare(q) if which == "bare" else verify(q)
                took = _ms(t0)
                if which == "verify" and out["decision"] != "proceed":
                    raise RuntimeError(f"{what} stopped proceeding on {q!r}: {out['reason']}")
                if keep:
                    into[which].append(took)
            if after_each is not None:
                after_each(q, keep)


def _profile(fn: Any, queries: list[str], rounds: int) -> dict[str, Any]:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(rounds):
        for q in queries:
            fn(q)
    prof.disable()
    out: dict[str, Any] = {}
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(25)
        out[f"top_by_{key}"] = buf.getvalue().splitlines()
    return out


def _overhead_split(env: common.BenchEnv, m: common.Machine, queries: list[str], tenant: str,
                    db: str, label: str, rounds: int) -> dict[str, Any]:
    """Diagnostic pass, after the headline figures: the same routed verify calls through a
    supervisor whose workers time their verify handler and request runner
    (bench/support/bench_worker_probe.py), to split the routed time into the handler,
    the worker's own wrapping of it (the reply object) and the rest (client <->
    supervisor <-> worker transport, decoding and encoding at each end, the pool
    hand-off, the supervisor's routing)."""
    from kint.client import Client

    common.stop_supervisor_at(m.kint_home, env.cleanup_notes, m.name)
    timing = env.root / "worker-timing.txt"
    common.start_probed_supervisor(env, m, {"KINT_BENCH_TIMING": str(timing)})
    routed: list[float] = []
    with Client(m.kint_home, autostart=False) as kc:
        for r in range(rounds + 1):
            for q in queries:
                t0 = time.perf_counter_ns()
                kc.call("verify", tenant=tenant, db=db, space=label,
                        args={"query": q, "limit": LIMIT, "write": False}, timeout_s=60)
                if r:
                    routed.append(_ms(t0))
    lines = timing.read_text().split("\n")
    pairs = [tuple(map(float, line.split())) for line in lines if line.strip()]
    pairs = pairs[len(pairs) - len(routed):]  # drop the warm-up round
    handler = [h for h, _ in pairs]
    transport = [t - r for t, (_, r) in zip(routed, pairs)]
    return {
        "note": "diagnostic pass with timers inside the worker; not the headline figures",
        "routed_verify_ms": common.summarize(routed, "ms"),
        "worker_handler_ms": common.summarize(handler, "ms"),
        "worker_run_minus_handler_ms": common.summarize([r - h for h, r in pairs], "ms"),
        "transport_and_routing_ms": common.summarize(transport, "ms"),
    }


def _one_size(n: int, quick: bool) -> dict[str, Any]:
    from sibyl_memory_client.multi_record import multi_record_search

    from kint.client import Client
    from kint.rows.export import connect_ro
    from kint.spaces import space_id
    from kint.tenant_worker.chain_head import HeadReading
    from kint.tenant_worker.statefiles import SpaceState
    from kint.tenant_worker.verify import decide, verify

    rounds = 4 if quick else 6
    warmup = 1 if quick else 2
    tenant = common.TENANT
    with common.hermetic(f"verify-{n}") as env:
        m = common.Machine("m", env.root / "m")
        db, label = m.sibyl_db, tenant  # Sibyl's default store: the space label is the tenant
        data = corpus.rows(n)
        written = corpus.write_store(db, tenant, data,
                                     account=ProAccount.signed_in_here()
                                     if n in PRO_ACCOUNT_SIZES else None)
        n_rows = written.written
        t0 = time.perf_counter()
        anchored_epochs = _anchor_fn()(m.kint_home, label, db, tenant, block=ANCHOR_BLOCK)
        anchor_s = time.perf_counter() - t0

        client = corpus.open_client(db, tenant)
        conn = connect_ro(str(db))
        state = SpaceState(m.kint_home, space_id(label))
        head = HeadReading(None, "bench")
        try:
            def bare(q: str) -> Any:
                return multi_record_search(client, q, limit=LIMIT)

            def in_process(q: str) -> dict[str, Any]:
                return verify(client=client, conn=conn, tenant=tenant, state=state, query=q,
                              limit=LIMIT, head=head, write_refusal=False)

            # The query set: rows' own words, kept when verify proceeds on them.
            tried = _candidate_queries(data, n_rows, 60 if quick else 120, seed=n)
            queries, dropped = proceeding_queries(tried, in_process, 20 if quick else 40,
                                                  n_rows)
            hits_per_query = [len(bare(q)) for q in queries]

            # In-process: bare search vs verify, alternating which goes first; and the same
            # verify in its two halves (context: where its time goes).
            def halves(q: str, keep: bool) -> None:
                t0 = time.perf_counter_ns()
                results = bare(q)
                t1 = time.perf_counter_ns()
                decide(results, client=client, conn=conn, tenant=tenant, state=state,
                       query=q, head=head, write_refusal=False)
                if keep:
                    samples["search_part"].append((t1 - t0) / 1e6)
                    samples["decide_part"].append(_ms(t1))

            samples: dict[str, list[float]] = {"bare": [], "verify": [], "search_part": [],
                                               "decide_part": []}
            _alternate(queries, bare, in_process, samples, warmup, rounds, "verify",
                       after_each=halves)
            in_proc = {k: common.summarize(v, "ms") for k, v in samples.items()}
            ratio_in = {p: in_proc["verify"][p] / in_proc["bare"][p] for p in ("p50", "p99")}

            # Through the supervisor.
            common.start_bench_supervisor(env, m)
            routed: dict[str, list[float]] = {"bare": [], "verify": []}
            reply_bytes = []
            with Client(m.kint_home, autostart=False) as kc:
                def via_supervisor(q: str) -> dict[str, Any]:
                    return kc.call("verify", tenant=tenant, db=str(db), space=label,
                                   args={"query": q, "limit": LIMIT, "write": False},
                                   timeout_s=60)

                t0 = time.perf_counter_ns()
                first = via_supervisor(queries[0])
                first_call_ms = _ms(t0)
                _alternate(queries, bare, via_supervisor, routed, warmup, rounds,
                           "routed verify")
                import orjson

                reply_bytes = [len(orjson.dumps(via_supervisor(q))) for q in queries]
            sup = {k: common.summarize(v, "ms") for k, v in routed.items()}
            ratio_sup = {p: sup["verify"][p] / sup["bare"][p] for p in ("p50", "p99")}
            del first
            split = _overhead_split(env, m, queries, tenant, str(db), label,
                                    rounds=2 if quick else 3)

            met_in = all(v <= TARGET_IN_PROCESS for v in ratio_in.values())
            met_sup = all(v <= TARGET_SUPERVISOR for v in ratio_sup.values())
            profiles: dict[str, Any] = {}
            if not met_in or not met_sup:
                profiles["in_process_verify"] = _profile(in_process, queries, 2)
                profiles["bare_search"] = _profile(bare, queries, 2)
                found = {q: bare(q) for q in queries}
                profiles["decide_only"] = _profile(
                    lambda q: decide(found[q], client=client, conn=conn, tenant=tenant,
                                     state=state, query=q, head=head, write_refusal=False),
                    queries, 5)
        finally:
            conn.close()
            client.storage.close()

        from sibyl_memory_client.storage import db_size_bytes

        from kint.paths import footprint_bytes

        store = {**written.to_json(), "size_bytes": db_size_bytes(db),
                 "kint_home_bytes": footprint_bytes(m.kint_home),
                 "mix": {k: sum(1 for r in data[:n_rows] if r.kind == k)
                         for k in ("entity", "state", "event")}}
    return {
        "rows_requested": n,
        "rows": n_rows,
        "store": store,
        "anchor_s": anchor_s,
        "anchored_epochs": anchored_epochs,
        "queries": {"tried": len(tried), "kept": len(queries), "dropped": dropped,
                    "examples": queries[:8], "hits_per_query_mean":
                        sum(hits_per_query) / len(hits_per_query)},
        "params": {"rounds": rounds, "warmup_rounds": warmup, "limit": LIMIT},
        "in_process_ms": in_proc,
        "ratio_in_process": ratio_in,
        "supervisor_ms": sup,
        "ratio_supervisor": ratio_sup,
        "supervisor_first_call_ms": first_call_ms,
        "supervisor_overhead_split": split,
        "verify_reply_bytes_mean": sum(reply_bytes) / len(reply_bytes),
        "met": {"in_process": met_in, "supervisor": met_sup},
        "profiles": profiles,
        "env": env.report(),
    }


def run(quick: bool = False) -> dict[str, Any]:
    sizes = [200, 1000] if quick else [1000, 10000]
    per_size = [_one_size(n, quick) for n in sizes]
    env = {"supervisor_log_problems": [p for s in per_size
                                       for p in s["env"]["supervisor_log_problems"]],
           "cleanup_notes": [p for s in per_size for p in s["env"]["cleanup_notes"]],
           "supervisor_log_copy": None,
           "machine_log_copies": [s["env"].get("machine_log_copies") for s in per_size]}
    return {
        "name": "verify",
        "quick": quick,
        "machine": common.machine(),
        "sizes": per_size,
        "target": {"description": "verify p50 and p99 within 1.15x of multi_record_search "
                                  "in-process, within 1.25x through the supervisor",
                   "in_process_max_ratio": TARGET_IN_PROCESS,
                   "supervisor_max_ratio": TARGET_SUPERVISOR,
                   "met": all(s["met"]["in_process"] and s["met"]["supervisor"]
                              for s in per_size)},
        "env": env,
    }


def report(result: dict[str, Any], path: Path) -> None:
    for s in result["sizes"]:
        i, r = s["in_process_ms"], s["supervisor_ms"]
        print(f"{s['rows']} rows (asked {s['rows_requested']}), {s['queries']['kept']} queries"
              f", store {s['store']['size_bytes'] / 1e6:.2f} MB written through "
              f"{s['store']['cap_gate']['kind'].split(':')[0]}")
        print(f"  in-process  bare p50 {i['bare']['p50']:.2f} p99 {i['bare']['p99']:.2f} ms"
              f"  verify p50 {i['verify']['p50']:.2f} p99 {i['verify']['p99']:.2f} ms  "
              f"ratio {s['ratio_in_process']['p50']:.3f}x / {s['ratio_in_process']['p99']:.3f}x")
        print(f"  supervisor  bare p50 {r['bare']['p50']:.2f} p99 {r['bare']['p99']:.2f} ms"
              f"  verify p50 {r['verify']['p50']:.2f} p99 {r['verify']['p99']:.2f} ms  "
              f"ratio {s['ratio_supervisor']['p50']:.3f}x / {s['ratio_supervisor']['p99']:.3f}x")
    print(f"-> {path}")


def main() -> int:
    return common.bench_main("verify", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
