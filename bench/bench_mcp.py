"""`memory_verify` through MCP against `memory_search` through MCP, on the same store, in
the same run (issue 5).

For each size (10,000 rows asked; `--quick`: 1,000), in its own hermetic folder:

1. Machine m's space is what `kint.spaces.resolve()` gives under m's HOME, HERMES_HOME and
   KINT_HOME: Sibyl's default store `~/.sibyl-memory/memory.db`, Sibyl's default tenant
   (no credentials), the space labelled by that tenant. That is the store kint-server
   serves when started with m's environment. The store is written from `corpus.rows(n)`
   through Sibyl's own methods. At 10,000 rows, which Sibyl's free-tier cap (5 MiB for
   every store it resolves) stops at ~2,047, the fixture is written by a Pro account on a
   throwaway signing key (bench/pro_account.py: Sibyl's real gates, uncapped for that
   account). What is timed only reads the store; kint-server and the worker keep the
   machine's own (free-tier) gates. `--quick`'s 1,000 rows are written on the free tier
   (they fit). The JSON says which gate wrote the store and whether anything stopped it
   (`rows` vs `rows_requested`, `store.cap_gate`, `store.stopped_by`).
2. Every row is anchored through kint's own `split_diff`, `seal` and `record_epoch`
   (`bench/anchor_store.py: anchor`; as many epochs as push would make, no chain), so
   verify reaches its real checks (mirror, watermark, epoch cache are the real files).
3. The bench supervisor (bench/support/run_supervisor_bench.py, KINT_TEST_GATE=null) for m, then
   one kint-server (tests/support/run_kint_server.py: kint's own `kint.mcp_server.main`
   with the test gate) driven by a real `mcp` SDK stdio client (`tests/mcp_session.py:
   AgentProcess`), with m's environment plus KINT_TEST_GATE=null, KINT_NO_WATCHER=1 and
   KINT_BOOTSTRAP_SECONDS=1. The space is not connected to a chain, so verify's head read
   is "not connected" (a file lookup) and the bootstrap pull and the exit push are refused
   at once.
4. First checks, before anything else asks the worker to verify: the worker keeps each
   row's checked proof on its loaded mirror (the mirror is immutable once parsed), so a
   row verified again costs less than a row verified the first time, and the headline
   loop below asks each query 14 times. Here other queries (a second seeded pool, kept
   when kint's `verify` run in this process on its own mirror proceeds, so choosing them
   leaves the worker's mirror untouched) are each asked ONCE, `memory_search` and
   `memory_verify` in alternating order, after a few warm-up queries; each reply's hits
   are compared with the rows the worker had already checked, so the series where every
   hit is a first check is reported apart. Context, not the target.
5. Queries for the headline: two or three of a row's distinctive words, for rows sampled
   from the store, kept when the worker's verify proceeds on them (op `verify` with
   `write: False` through `kint.client.Client`, so choosing queries can never write a
   refusal).
6. Timed, query by query, round after round, after warm-up rounds:
   - headline: `memory_search(query=q, limit=5)` and `memory_verify(query=q, limit=5)`,
     both through the same MCP session, in alternating order;
   - context (same loop, same minutes): op `verify` (`write: False`) through
     `kint.client.Client` to the same worker, Sibyl's `multi_record_search(client, q,
     limit=5)` in this process on the same store, and MCP's own `ping` on the same
     session (no tool behind it), in alternating order. They split each MCP figure into
     the work and the MCP path around it.
   Every `memory_verify` reply is checked: its decision is counted, and any that is not
   "proceed" is recorded. `memory_verify` writes a refusal back only when it refuses over a
   drifted or missing row; the store's rows (every canonical id and leaf) and its
   `kint_refusal` entities are compared before and after the timed calls.

Target (issue 5): `memory_verify` p50 within 1.3x of `memory_search` p50, both through MCP.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import common
import corpus
from pro_account import ProAccount
from bench_verify import _candidate_queries, proceeding_queries  # issue 3's recipe

TARGET_P50 = 1.3
LIMIT = 5
ANCHOR_BLOCK = 100
# Sizes whose fixture store is written by a Pro account (bench/pro_account.py: Sibyl's
# real gates, no cap); the free tier's 5 MiB cap stops at ~2,047 rows. Fixture only.
PRO_ACCOUNT_SIZES = frozenset({10000})
REFUSAL_CATEGORY = "kint_refusal"
TESTS_DIR = common.REPO_DIR / "tests"
HEADLINE = ("mcp_search", "mcp_verify")
CONTEXT = ("bare_search", "routed_verify", "mcp_ping")


def _tests_import(name: str) -> Any:
    """A module of tests/ (mcp_session), imported with tests/ on the path."""
    import importlib

    sys.path.insert(0, str(TESTS_DIR))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(TESTS_DIR))


@contextmanager
def _as_machine(m: common.Machine) -> Iterator[None]:
    """m's HOME, HERMES_HOME and KINT_HOME in os.environ, for resolving its space as its
    kint-server will (hermetic restores os.environ on the way out anyway)."""
    keys = ("HOME", "HERMES_HOME", "KINT_HOME")
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update({"HOME": str(m.home), "HERMES_HOME": str(m.hermes_home),
                       "KINT_HOME": str(m.kint_home)})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _store_picture(db: Path, tenant: str) -> tuple[dict[str, str], list[str]]:
    """Every row's canonical id -> leaf, and the kint_refusal entities, read-only."""
    from kint.rows.export import connect_ro, export_rows

    conn = connect_ro(str(db))
    try:
        rows = export_rows(conn, tenant)
    finally:
        conn.close()
    leaves = {r.canonical_id: r.leaf.hex() for r in rows}
    refusals = sorted(r.canonical_id for r in rows if r.category == REFUSAL_CATEGORY)
    return leaves, refusals


def _ms(t0: int) -> float:
    return (time.perf_counter_ns() - t0) / 1e6


def _server_pids() -> list[int]:
    """This process's kint-server children (the test launcher), by their command line."""
    found = []
    for pid in common.descendants(os.getpid()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(part.endswith(b"run_kint_server.py") for part in cmd):
            found.append(pid)
    return found


def _keep_server_log(env: common.BenchEnv, m: common.Machine) -> tuple[str | None, list[str]]:
    """Copy kint-server's log ($KINT_HOME/kint.log) to bench/out/ and list its warnings."""
    path = m.kint_home / "kint.log"
    if not path.exists():
        return None, []
    common.OUT_DIR.mkdir(parents=True, exist_ok=True)
    copy = common.OUT_DIR / f"{env.name}.kint-server.log"
    shutil.copyfile(path, copy)
    problems = [line for line in path.read_text(errors="replace").splitlines()
                if any(w in line for w in (" WARNING ", " ERROR ", " CRITICAL ", "Traceback",
                                           "Error", "Exception"))]
    return str(copy.relative_to(common.REPO_DIR)), problems


def _one_size(n: int, quick: bool) -> dict[str, Any]:
    from sibyl_memory_client.multi_record import multi_record_search

    from kint import spaces
    from kint.client import Client
    from kint.rows.export import connect_ro
    from kint.spaces import space_id
    from kint.tenant_worker.chain_head import HeadReading
    from kint.tenant_worker.statefiles import SpaceState
    from kint.tenant_worker.verify import verify

    rounds = 4 if quick else 6
    warmup = 1 if quick else 2
    n_queries = 20 if quick else 40
    n_cold = 20 if quick else 80
    from anchor_store import anchor  # bench/anchor_store.py: kint's split, seal, record_epoch

    AgentProcess = _tests_import("mcp_session").AgentProcess

    with common.hermetic(f"mcp-{n}") as env:
        m = common.Machine("m", env.root / "m")
        with _as_machine(m):
            ref = spaces.resolve()
        db = m.sibyl_db
        if Path(ref.db) != db:
            raise RuntimeError(f"kint-server would serve {ref.db}, not {db}")
        tenant, label = ref.tenant, ref.label
        data = corpus.rows(n)
        written = corpus.write_store(db, tenant, data,
                                     account=ProAccount.signed_in_here()
                                     if n in PRO_ACCOUNT_SIZES else None)
        n_rows = written.written
        t0 = time.perf_counter()
        anchored_epochs = anchor(m.kint_home, label, db, tenant, block=ANCHOR_BLOCK)
        anchor_s = time.perf_counter() - t0
        common.start_bench_supervisor(env, m)

        agent_env = {**m.env(), "KINT_NO_WATCHER": "1", "KINT_BOOTSTRAP_SECONDS": "1"}
        server_pids: list[int] = []
        started: dict[str, float] = {}
        client = corpus.open_client(db, tenant)
        kc = Client(m.kint_home, autostart=False)
        agent = AgentProcess(agent_env)  # its event-loop thread starts here
        try:
            def routed(q: str) -> dict[str, Any]:
                return kc.call("verify", tenant=tenant, db=str(db), space=label,
                               args={"query": q, "limit": LIMIT, "write": False},
                               timeout_s=120)

            def bare(q: str) -> Any:
                return multi_record_search(client, q, limit=LIMIT)

            def ping() -> Any:
                # MCP's own `ping` request on the same session: stdio, JSON-RPC and the
                # server's loop with no tool behind it (the floor of any tool call).
                return agent._run(agent._session.send_ping())

            decisions: dict[str, int] = {}
            not_proceed: list[dict[str, Any]] = []
            checked: set[tuple[Any, ...]] = set()  # rows the worker has verified so far

            def note_verify(q: str, out: dict[str, Any], where: str) -> list[tuple[Any, ...]]:
                """Count the decision, keep any that is not proceed; return the rows this
                reply checked that the worker had not checked before."""
                decision = out.get("decision") if out.get("ok") else f"error:{out.get('error')}"
                decisions[decision] = decisions.get(decision, 0) + 1
                if decision != "proceed" and len(not_proceed) < 20:
                    not_proceed.append({"query": q, "where": where, "decision": decision,
                                        "reason": out.get("reason"),
                                        "message": out.get("message"),
                                        "refusal_entity": out.get("refusal_entity")})
                rows = [(c["tier"], c.get("category"), c["key"]) for c in out.get("checks", [])
                        if c.get("status") == "verified"]
                fresh = [r for r in rows if r not in checked]
                checked.update(rows)
                return fresh

            # First-check queries: a second seeded pool, chosen by kint's verify in this
            # process (its own SpaceState and mirror), so the worker has checked nothing yet.
            cold_pool = _candidate_queries(data, n_rows, 60 if quick else 200, seed=n + 1)
            cold_queries: list[str] = []
            cold_dropped: dict[str, int] = {}
            conn = connect_ro(str(db))
            try:
                state = SpaceState(m.kint_home, space_id(label))
                for q in cold_pool:
                    out = verify(client=client, conn=conn, tenant=tenant, state=state, query=q,
                                 limit=LIMIT, head=HeadReading(None, "bench"),
                                 write_refusal=False)
                    if out["decision"] == "proceed":
                        cold_queries.append(q)
                    else:
                        cold_dropped[out["reason"][:60]] = cold_dropped.get(
                            out["reason"][:60], 0) + 1
            finally:
                conn.close()
            cold_warmup, cold_queries = cold_queries[:3], cold_queries[3:3 + n_cold]

            t0 = time.perf_counter_ns()
            agent.start()
            started["server_start_to_tools_listed_ms"] = _ms(t0)
            server_pids = _server_pids()
            missing = {"memory_search", "memory_verify"} - set(agent.tools)
            if missing:
                raise RuntimeError(f"kint-server does not list {sorted(missing)}")

            leaves_before, refusals_before = _store_picture(db, tenant)
            for k, q in enumerate(cold_warmup):
                t0 = time.perf_counter_ns()
                agent.call("memory_search", query=q, limit=LIMIT)
                if k == 0:
                    started["first_memory_search_ms"] = _ms(t0)
                t0 = time.perf_counter_ns()
                note_verify(q, agent.call("memory_verify", query=q, limit=LIMIT), "warm-up")
                if k == 0:
                    started["first_memory_verify_ms"] = _ms(t0)
            cold: dict[str, list[float]] = {"mcp_search": [], "mcp_verify": []}
            cold_tagged: list[tuple[float, str, int, int, float]] = []
            cold_t0 = time.perf_counter()
            cold_all_fresh: dict[str, list[float]] = {"mcp_search": [], "mcp_verify": []}
            fresh_share: list[float] = []
            for i, q in enumerate(cold_queries):
                took: dict[str, float] = {}
                fresh: list[tuple[Any, ...]] = []
                verified_rows = 0
                for which in (HEADLINE if i % 2 == 0 else HEADLINE[::-1]):
                    t0 = time.perf_counter_ns()
                    if which == "mcp_search":
                        agent.call("memory_search", query=q, limit=LIMIT)
                        took[which] = _ms(t0)
                    else:
                        out = agent.call("memory_verify", query=q, limit=LIMIT)
                        took[which] = _ms(t0)
                        verified_rows = sum(1 for c in out.get("checks", [])
                                            if c.get("status") == "verified")
                        fresh = note_verify(q, out, "first checks")
                for k, v in took.items():
                    cold[k].append(v)
                    cold_tagged.append((v, k, 0, i, time.perf_counter() - cold_t0))
                fresh_share.append(len(fresh) / verified_rows if verified_rows else 0.0)
                if verified_rows and len(fresh) == verified_rows:
                    for k, v in took.items():
                        cold_all_fresh[k].append(v)

            # The headline query set: rows' own words, kept when the worker's verify
            # proceeds (write: False, so no refusal can be written while choosing).
            tried = [q for q in _candidate_queries(data, n_rows, 60 if quick else 120, seed=n)
                     if q not in cold_pool]
            t0 = time.perf_counter_ns()
            routed(tried[0])
            started["first_routed_verify_ms"] = _ms(t0)
            queries, dropped = proceeding_queries(tried, routed, n_queries, n_rows)

            samples: dict[str, list[float]] = {k: [] for k in HEADLINE + CONTEXT}
            # (ms, series, round, query index, seconds since the timed loop began), for the
            # slowest samples: where the tail comes from.
            tagged: list[tuple[float, str, int, int, float]] = []
            loop_t0 = time.perf_counter()
            search_counts: dict[str, int] = {}
            verify_hits: dict[str, int] = {}
            search_not_ok: list[dict[str, Any]] = []
            notices: dict[str, int] = {}
            for r in range(warmup + rounds):
                keep = r >= warmup
                for i, q in enumerate(queries):
                    head = HEADLINE if (i + r) % 2 == 0 else HEADLINE[::-1]
                    ctx = CONTEXT if (i + r) % 2 == 0 else CONTEXT[::-1]
                    order = head + ctx if r % 2 == 0 else ctx + head
                    for which in order:
                        t0 = time.perf_counter_ns()
                        if which == "mcp_search":
                            out = agent.call("memory_search", query=q, limit=LIMIT)
                        elif which == "mcp_verify":
                            out = agent.call("memory_verify", query=q, limit=LIMIT)
                        elif which == "routed_verify":
                            out = routed(q)
                        elif which == "mcp_ping":
                            out = ping()
                        else:
                            out = bare(q)
                        took = _ms(t0)
                        if keep:
                            samples[which].append(took)
                            tagged.append((took, which, r, i, time.perf_counter() - loop_t0))
                        if which == "mcp_verify":
                            verify_hits[q] = len(out.get("hits") or [])
                            note_verify(q, out, f"round {r}")
                        elif which == "mcp_search":
                            search_counts[q] = out.get("count", -1)
                            if "notice" in out:
                                notices[out["notice"][:80]] = notices.get(
                                    out["notice"][:80], 0) + 1
                            if not out.get("ok") and len(search_not_ok) < 20:
                                search_not_ok.append({"query": q, "reply": out})
                        elif which == "routed_verify" and out["decision"] != "proceed":
                            raise RuntimeError(f"routed verify stopped proceeding on {q!r}: "
                                               f"{out['reason']}")
            leaves_after, refusals_after = _store_picture(db, tenant)

            def json_bytes(payload: dict[str, Any]) -> int:
                return len(json.dumps(payload, separators=(",", ":")).encode())

            reply_bytes = {
                "mcp_search": sum(json_bytes(agent.call("memory_search", query=q,
                                                        limit=LIMIT)) for q in queries)
                / len(queries),
                "mcp_verify": sum(json_bytes(agent.call("memory_verify", query=q,
                                                        limit=LIMIT)) for q in queries)
                / len(queries),
            }
        finally:
            close_notes: list[str] = []
            server_pids = server_pids or _server_pids()  # a start that failed half-way
            t0 = time.perf_counter_ns()
            agent.close()
            started["close_ms"] = _ms(t0)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(common.alive(p) for p in server_pids):
                time.sleep(0.05)
            for pid in server_pids:
                if common.alive(pid):
                    close_notes.append(f"kint-server {pid} still running 10 s after the "
                                       f"client closed; SIGKILL")
                    common._kill(pid)
            env.cleanup_notes.extend(close_notes)
            try:
                kc.close()
            finally:
                client.storage.close()

        series = {k: common.summarize(v, "ms") for k, v in samples.items()}
        ratio = {p: series["mcp_verify"][p] / series["mcp_search"][p] for p in ("p50", "p99")}
        context = {
            "routed_verify_over_bare_search": {
                p: series["routed_verify"][p] / series["bare_search"][p] for p in ("p50", "p99")},
            "mcp_path_around_search_p50_ms":
                series["mcp_search"]["p50"] - series["bare_search"]["p50"],
            "mcp_path_around_verify_p50_ms":
                series["mcp_verify"]["p50"] - series["routed_verify"]["p50"],
            "mcp_ping_p50_ms": series["mcp_ping"]["p50"],
        }
        cold_series = {k: common.summarize(v, "ms") for k, v in cold.items()}
        first_checks: dict[str, Any] = {
            "note": "each query asked once; the worker had not verified these queries "
                    "before; context, not the target",
            "queries": len(cold_queries), "warmup_queries": len(cold_warmup),
            "pool": len(cold_pool), "dropped": cold_dropped,
            "fresh_share_of_verified_hits_mean": sum(fresh_share) / len(fresh_share),
            "ms": cold_series,
            "ratio": {p: cold_series["mcp_verify"][p] / cold_series["mcp_search"][p]
                      for p in ("p50", "p99")},
            "all_hits_first_checked": {"queries": len(cold_all_fresh["mcp_verify"])},
        }
        if len(cold_all_fresh["mcp_verify"]) >= 5:
            fresh_series = {k: common.summarize(v, "ms") for k, v in cold_all_fresh.items()}
            first_checks["all_hits_first_checked"].update({
                "ms": fresh_series,
                "ratio_p50": fresh_series["mcp_verify"]["p50"] / fresh_series["mcp_search"]["p50"]})
        changed = sorted(k for k in set(leaves_before) | set(leaves_after)
                         if leaves_before.get(k) != leaves_after.get(k))

        from sibyl_memory_client.storage import db_size_bytes

        from kint.paths import footprint_bytes

        store = {**written.to_json(), "size_bytes": db_size_bytes(db),
                 "kint_home_bytes": footprint_bytes(m.kint_home),
                 "tenant": tenant, "space_label": label, "db": "~/.sibyl-memory/memory.db",
                 "mix": {k: sum(1 for r in data[:n_rows] if r.kind == k)
                         for k in ("entity", "state", "event")}}
        log_copy, log_problems = _keep_server_log(env, m)
        mismatched = {q: {"memory_search_count": search_counts.get(q),
                          "memory_verify_hits": verify_hits.get(q)}
                      for q in queries if search_counts.get(q) != verify_hits.get(q)}
        result = {
            "rows_requested": n,
            "rows": n_rows,
            "store": store,
            "anchor_s": anchor_s,
            "anchored_epochs": anchored_epochs,
            "queries": {"tried": len(tried), "kept": len(queries), "dropped": dropped,
                        "examples": queries[:8],
                        "memory_search_count_mean":
                            sum(search_counts.values()) / len(search_counts),
                        "memory_verify_hits_mean":
                            sum(verify_hits.values()) / len(verify_hits),
                        "count_differs": mismatched},
            "params": {"rounds": rounds, "warmup_rounds": warmup, "limit": LIMIT},
            "ms": series,
            "ratio_mcp_verify_over_mcp_search": ratio,
            "context": context,
            "first_checks": first_checks,
            "slowest_samples": {
                "note": "ms, series, round, query index, s since the loop began",
                "headline_loop": {k: sorted((t for t in tagged if t[1] == k), reverse=True)[:3]
                                  for k in HEADLINE + CONTEXT},
                "first_checks": sorted(cold_tagged, reverse=True)[:4]},
            "startup_ms": started,
            "reply_json_bytes_mean": reply_bytes,
            "memory_verify_decisions": decisions,
            "memory_verify_not_proceed": not_proceed,
            "memory_search_not_ok": search_not_ok,
            "memory_search_notices": notices,
            "store_unchanged_by_timed_calls": not changed,
            "store_rows_changed": changed[:20],
            "refusals_before_after": [len(refusals_before), len(refusals_after)],
            "kint_server_log_copy": log_copy,
            "kint_server_log_problems": log_problems,
            "met": ratio["p50"] <= TARGET_P50,
        }
    result["env"] = env.report()
    return result


def run(quick: bool = False) -> dict[str, Any]:
    sizes = [1000] if quick else [10000]
    per_size = [_one_size(n, quick) for n in sizes]
    env = {"supervisor_log_problems": [p for s in per_size
                                       for p in s["env"]["supervisor_log_problems"]]
           + [f"kint-server: {p}" for s in per_size for p in s["kint_server_log_problems"]],
           "cleanup_notes": [p for s in per_size for p in s["env"]["cleanup_notes"]],
           "supervisor_log_copy": None,
           "machine_log_copies": [s["env"].get("machine_log_copies") for s in per_size]}
    return {
        "name": "mcp",
        "quick": quick,
        "machine": common.machine(),
        "sizes": per_size,
        "target": {"description": "memory_verify p50 within 1.3x of memory_search p50, both "
                                  "through MCP (kint-server over stdio), same store, same run",
                   "max_ratio_p50": TARGET_P50,
                   "met": all(s["met"] for s in per_size)},
        "env": env,
    }


def report(result: dict[str, Any], path: Path) -> None:
    for s in result["sizes"]:
        ms, ratio = s["ms"], s["ratio_mcp_verify_over_mcp_search"]
        print(f"store {s['store']['size_bytes'] / 1e6:.2f} MB written through "
              f"{s['store']['cap_gate']['kind'].split(':')[0]}")
        print(f"{s['rows']} rows (asked {s['rows_requested']}), {s['queries']['kept']} queries, "
              f"memory_verify decisions {s['memory_verify_decisions']}, store unchanged: "
              f"{s['store_unchanged_by_timed_calls']}")
        for k in HEADLINE + CONTEXT:
            print(f"  {k:14s} p50 {ms[k]['p50']:7.2f}  p99 {ms[k]['p99']:7.2f} ms")
        print(f"  memory_verify / memory_search  p50 {ratio['p50']:.3f}x  p99 "
              f"{ratio['p99']:.3f}x  (target p50 <= {TARGET_P50}x: "
              f"{'met' if s['met'] else 'NOT met'})")
        fc = s["first_checks"]
        print(f"  first checks ({fc['queries']} queries, once each): memory_search p50 "
              f"{fc['ms']['mcp_search']['p50']:.2f}  memory_verify p50 "
              f"{fc['ms']['mcp_verify']['p50']:.2f} ms  ratio {fc['ratio']['p50']:.3f}x; "
              f"{fc['all_hits_first_checked']['queries']} with every hit a first check"
              + (f": ratio {fc['all_hits_first_checked']['ratio_p50']:.3f}x"
                 if "ratio_p50" in fc["all_hits_first_checked"] else ""))
    for line in result["env"]["supervisor_log_problems"] + result["env"]["cleanup_notes"]:
        print(f"  note: {line}")
    print(f"-> {path}")


def main() -> int:
    return common.bench_main("mcp", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
