"""Setting up bench_tenants.py: the stores, their queries, the hanging space's connection,
the in-process side of the comparison (each space's Sibyl client, read-only connection
and state files in the benchmark process) and the bare shape's workers (bench/bare_shape.py:
each space's request and reply bytes, and its store to verify on)."""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import common
import corpus
from bare_shape import WorkerSpec
from tenant_clients import BareCall, Call

LIMIT = 5
REQUEST_ID = "0" * 16  # a fixed id of kint's length: one request's bytes a call
TIMEOUT_MS = 60_000


@dataclass
class Space:
    profile: str
    seed: int
    db: Path
    label: str = ""
    space16: str = ""
    queries: list[str] = field(default_factory=list)


def write_one(db: str, tenant: str, n: int, seed: int) -> dict[str, Any]:
    return corpus.write_store(Path(db), tenant, corpus.rows(n, seed=seed)).to_json()


def write_stores(root: Path, hermes_home: Path, spaces: list[Space], n: int) -> list[dict]:
    """Each store written alone in a staging folder (two processes at a time), then all
    renamed into place."""
    staging = root / "staging"
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        written = list(pool.map(write_one, [str(staging / s.profile / "memory.db")
                                             for s in spaces],
                                [common.TENANT] * len(spaces), [n] * len(spaces),
                                [s.seed for s in spaces]))
    target = hermes_home / "sibyl" / "profiles"
    target.mkdir(parents=True, exist_ok=True)
    for s in spaces:
        os.rename(staging / s.profile, target / s.profile)
    for s, w in zip(spaces, written):
        if w["written"] != n:
            raise RuntimeError(f"store {s.profile}: {w['written']} of {n} rows ({w['stopped_by']})")
    return written


def write_row_alone(db: Path, scratch: Path, row: corpus.Row) -> None:
    """One more row in a store that already sits among all the others: Sibyl's cap walk
    (HOME, HERMES_HOME) pointed at an empty folder for the write, so it sees this store
    alone, as when it was written in staging."""
    saved = {k: os.environ.get(k) for k in ("HOME", "HERMES_HOME")}
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = os.environ["HERMES_HOME"] = str(scratch)
    try:
        client = corpus.open_client(db, common.TENANT)
        try:
            corpus.write(client, row)
        finally:
            client.storage.close()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def pick_queries(space: Space, n_rows: int, keep: int, verify: Any) -> dict[str, int]:
    """The first `keep` queries verify proceeds on, from rows of the space's own store."""
    rng = random.Random(space.seed)
    data = corpus.rows(n_rows, seed=space.seed)
    dropped: dict[str, int] = {}
    for i in rng.sample(range(n_rows), min(n_rows, keep * 6)):
        words = data[i].words
        k = 3 if len(words) >= 3 and rng.random() < 0.5 else 2
        q = " ".join(w.lower() for w in words[:k])
        if q in space.queries:
            continue
        out = verify(q)
        if out["decision"] == "proceed":
            space.queries.append(q)
            if len(space.queries) == keep:
                return dropped
        else:
            why = out["verdict"]["code"] if out["verdict"]["code"] != "ok" else out["reason"][:60]
            dropped[why] = dropped.get(why, 0) + 1
    raise RuntimeError(f"only {len(space.queries)} queries proceed in {space.label}: {dropped}")


class InProcess:
    """Each space's Sibyl client, read-only connection and state files, in this process."""

    def __init__(self, kint_home: Path, spaces: list[Space]) -> None:
        from kint.rows.export import connect_ro
        from kint.spaces import space_id
        from kint.tenant_worker.chain_head import HeadReading
        from kint.tenant_worker.statefiles import SpaceState

        self.head = HeadReading(None, "bench")
        self.open: dict[str, tuple[Any, Any, Any]] = {}
        for s in spaces:
            self.open[s.label] = (corpus.open_client(s.db, common.TENANT),
                                  connect_ro(str(s.db)),
                                  SpaceState(kint_home, space_id(s.label)))

    def verify(self, label: str, query: str) -> dict[str, Any]:
        from kint.tenant_worker.verify import verify

        client, conn, state = self.open[label]
        return verify(client=client, conn=conn, tenant=common.TENANT, state=state, query=query,
                      limit=LIMIT, head=self.head, write_refusal=False)

    def run(self, calls: list[Call]) -> dict[str, Any]:
        latencies = []
        not_proceed: dict[str, int] = {}
        t_start = time.monotonic()
        for _, label, query in calls:
            t0 = time.monotonic()
            out = self.verify(label, query)
            latencies.append((time.monotonic() - t0) * 1000.0)
            if out["decision"] != "proceed":
                not_proceed[out["decision"]] = not_proceed.get(out["decision"], 0) + 1
        return {"latencies_ms": latencies, "wall_s": time.monotonic() - t_start,
                "calls": len(calls), "not_proceed": not_proceed}

    def close(self) -> None:
        for client, conn, _ in self.open.values():
            conn.close()
            client.storage.close()


def bare_workers(kint_home: Path, spaces: list[Space],
                 answers: dict[tuple[str, str], dict[str, Any]]
                 ) -> tuple[list[WorkerSpec], dict[tuple[str, str], BareCall]]:
    """One same-work bare worker a space, and each (label, query)'s bare call. The request
    bytes are those kint's client sends for that verify (a fixed id); the reply bytes are
    kint's reply frame for `answers[(label, query)]`, the same verify in this process, so
    the bare shape carries kint's own message sizes."""
    from kint.protocol import Request, encode_request
    from kint.protocol.envelope import ok_reply
    from kint.protocol.server_codec import encode_reply

    specs, bare_calls = [], {}
    for s in spaces:
        route = s.space16.encode()
        replies, work = {}, {}
        for q in s.queries:
            request = encode_request(Request(
                id=REQUEST_ID, op="verify", tenant=common.TENANT, db=str(s.db), space=s.label,
                args={"query": q, "limit": LIMIT, "write": False}, timeout_ms=TIMEOUT_MS))
            replies[request] = encode_reply(ok_reply(REQUEST_ID, answers[(s.label, q)]))
            work[request] = q
            bare_calls[(s.label, q)] = (route, request)
        specs.append(WorkerSpec(route, replies, work,
                                (str(kint_home), str(s.db), common.TENANT, s.label)))
    return specs, bare_calls


def connect_hanging(m: common.Machine, space: Space, proxy_url: str) -> dict[str, Any]:
    from kint.client import Client

    with Client(m.kint_home, autostart=False) as kc:
        t0 = time.monotonic()
        connected = kc.call("connect", tenant=common.TENANT, db=str(space.db), space=space.label,
                            args={"dev": True, "rpc_urls": proxy_url}, timeout_s=300)
        t1 = time.monotonic()
        pushed = kc.call("push", tenant=common.TENANT, db=str(space.db), space=space.label,
                         timeout_s=600)
    return {"connect_s": t1 - t0, "push_s": time.monotonic() - t1, "owner": connected["owner"],
            "pushed": pushed["pushed"], "epochs": len(pushed["epochs"])}
