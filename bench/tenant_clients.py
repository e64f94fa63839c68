"""Client processes for bench_tenants.py: N processes, each with its own `kint.client.Client`
on the supervisor's front socket, sending op `verify` one call at a time.

Processes, not threads: each is a separate agent's CLI or kint-server in real use, and a
thread pool in the benchmark process would measure the benchmark's own GIL as much as kint.
They are started once (spawn, so no ZeroMQ context is inherited across a fork) and given
one job per phase through a pipe; every job starts at the same monotonic instant (Linux's
CLOCK_MONOTONIC is one clock for every process), so the phases overlap exactly.

A job is either a list of calls to make once (`count`) or a list to cycle through until a
deadline (`duration`). Each call's start and latency are sent back, with every answer that
was not `proceed` counted by what it was.

A job can instead go through the bare shape (bench/bare_shape.py): its calls are then
(route, request bytes) pairs sent on a DEALER on the bare relay's front, from the same
processes, so both kinds of pass share the clients, their dealing and their CPU reading.
"""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path
from typing import Any

LIMIT = 5
CALL_TIMEOUT_S = 60.0

# (db, space label, query)
Call = tuple[str, str, str]
# (route, request bytes): a call through the bare shape
BareCall = tuple[bytes, bytes]


def _serve(kint_home: str, tenant: str, conn: Any) -> None:
    """The body of one client process: jobs in, samples out, until it is sent None."""
    import zmq
    from bare_shape import bare_call

    from kint.client import Client, KintError

    client = Client(Path(kint_home), autostart=False)
    bare: dict[str, Any] = {}  # bare relay address -> this process's DEALER on it
    conn.send("ready")
    while True:
        job = conn.recv()
        if job is None:
            break
        kind, calls, start_at, duration_s, via = job
        if via is not None and via not in bare:
            bare[via] = zmq.Context.instance().socket(zmq.DEALER)
            bare[via].setsockopt(zmq.LINGER, 0)
            bare[via].connect(via)
        samples: list[tuple[float, float]] = []
        other: dict[str, int] = {}
        while time.monotonic() < start_at:
            time.sleep(min(0.005, max(0.0, start_at - time.monotonic())))
        end_at = start_at + duration_s if kind == "duration" else None
        i = 0
        while calls:
            if end_at is not None and time.monotonic() >= end_at:
                break
            if end_at is None and i >= len(calls):
                break
            call = calls[i % len(calls)]
            i += 1
            t0 = time.monotonic()
            if via is not None:
                answered = bare_call(bare[via], *call, timeout_ms=int(CALL_TIMEOUT_S * 1000))
                samples.append((t0, (time.monotonic() - t0) * 1000.0))
                if not answered:  # its worker is gone: the pass is void, say so and stop
                    other["bare timeout"] = other.get("bare timeout", 0) + 1
                    break
                continue
            db, label, query = call
            try:
                out = client.call("verify", tenant=tenant, db=db, space=label,
                                  args={"query": query, "limit": LIMIT, "write": False},
                                  timeout_s=CALL_TIMEOUT_S)
                what = out.get("decision", "?")
            except KintError as err:
                what = err.code
            took = time.monotonic() - t0
            samples.append((t0, took * 1000.0))
            if what != "proceed":
                other[what] = other.get(what, 0) + 1
        conn.send({"samples": samples, "not_proceed": other})
    for sock in bare.values():
        sock.close()
    client.close()


class ClientPool:
    """`n` client processes, started once, used for every phase."""

    def __init__(self, n: int, kint_home: Path, tenant: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.n = n
        self._pipes = []
        self._procs = []
        for k in range(n):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(str(kint_home), tenant, theirs),
                               name=f"kint-bench-client-{k}", daemon=True)
            proc.start()
            self._pipes.append(ours)
            self._procs.append(proc)
        for pipe in self._pipes:
            if not pipe.poll(120) or pipe.recv() != "ready":
                raise RuntimeError("a client process did not start")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    def run(self, shares: list[list[Call]] | list[list[BareCall]], kind: str,
            duration_s: float = 0.0, lead_s: float = 0.3,
            via: str | None = None) -> dict[str, Any]:
        """Give client k the calls `shares[k]`; all start `lead_s` from now. Returns every
        sample (start, ms), the phase's wall time (first start to last end) and the
        answers that were not `proceed`. `via`: the bare relay's front address, for
        shares of BareCalls."""
        if len(shares) != self.n:
            raise ValueError(f"{len(shares)} shares for {self.n} clients")
        start_at = time.monotonic() + lead_s
        for pipe, share in zip(self._pipes, shares):
            pipe.send((kind, share, start_at, duration_s, via))
        results = [pipe.recv() for pipe in self._pipes]
        samples = [s for r in results for s in r["samples"]]
        other: dict[str, int] = {}
        for r in results:
            for key, count in r["not_proceed"].items():
                other[key] = other.get(key, 0) + count
        first = min(t for t, _ in samples)
        last = max(t + ms / 1000.0 for t, ms in samples)
        return {"latencies_ms": [ms for _, ms in samples], "wall_s": last - first,
                "calls": len(samples), "not_proceed": other}

    def close(self) -> None:
        for pipe in self._pipes:
            try:
                pipe.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)


def deal(calls: list[Any], n: int) -> list[list[Any]]:
    """Client k gets calls k, k+n, k+2n, ...: every client walks across the spaces."""
    return [calls[k::n] for k in range(n)]
