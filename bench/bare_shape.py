"""The bare shape README's "How it runs" describes, with none of kint's route in it: a Python
ROUTER-ROUTER relay in a process of its own and one DEALER worker process per space. It is
the baseline of bench_twohop (one space) and of bench_tenants (every space): what the
shape itself costs, so that kint's figures can be read as "the shape" plus "kint's route".

- The relay (`relay`): clients' DEALERs on its front socket, workers' DEALERs on its back
  one. A client sends [route, body]; the relay passes [route, client, body] to the worker
  whose routing id is `route`, and the worker's [client, reply] back to the client as
  [reply]. It parses nothing. A one-frame [b"stop"] from a client stops every worker and
  the relay.
- The workers (`workers`): one process that imports what verify needs once, freezes its
  heap (`gc.freeze`, as kint's forkserver does, so a child's collections leave the shared
  pages shared) and forks one child per space, as kint's forkserver forks its workers. A
  child answers each request with the reply bytes it was given for it; a same-work child
  first runs kint's `verify` in process on its own store, state files and the request's
  query. One thread, no pool, no heartbeat, no checks.

Run as `python -c "import bare_shape ..."` children of `BareShape`, with this folder on
PYTHONPATH (the same-work children import corpus.py from it).
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import select
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import zmq

import common

LIMIT = 5
START_TIMEOUT_S = 120.0
CALL_TIMEOUT_MS = 10_000
# What a same-work worker needs, imported once in the forking parent (kint's forkserver
# imports the whole worker; the bare shape imports verify's part of it).
VERIFY_MODULES = (
    "kint.rows.export",
    "kint.spaces",
    "kint.tenant_worker.chain_head",
    "kint.tenant_worker.statefiles",
    "kint.tenant_worker.verify",
    "sibyl_memory_client",
    "sibyl_memory_client.testing",
    "corpus",
)


@dataclass
class WorkerSpec:
    """One bare worker: its routing id, the reply bytes for each request bytes it will be
    sent, and, for a same-work worker, the verify query of each request and where to run
    it (`verify_on`: KINT_HOME, db, tenant, space label)."""

    route: bytes
    replies: dict[bytes, bytes]
    work: dict[bytes, str] = field(default_factory=dict)
    verify_on: tuple[str, str, str, str] | None = None


# -- the children ----------------------------------------------------------------------------


def relay(front_address: str, back_address: str, n_workers: str) -> int:
    """The relay's loop; prints "ready" once all `n_workers` workers have said hello."""
    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    back = ctx.socket(zmq.ROUTER)
    for sock, address in ((front, front_address), (back, back_address)):
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(address)
    routes = set()
    while len(routes) < int(n_workers):
        routes.add(back.recv_multipart()[0])  # a worker's hello names its route
    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    print("ready", flush=True)
    while True:
        for sock, _ in poller.poll():
            if sock is front:
                frames = front.recv_multipart()
                if len(frames) == 2:  # [client, b"stop"]
                    for route in routes:
                        back.send_multipart([route, frames[0], b"stop"])
                    return 0
                client, route, body = frames
                back.send_multipart([route, client, body])
            else:
                _, client, body = back.recv_multipart()
                front.send_multipart([client, body])


def _verifier(spec: WorkerSpec) -> Callable[[str], None]:
    """kint's verify on this worker's store, state files and a query, as the in-process
    loop of bench_tenants and kint's worker run it (no chain head: the reading "bench")."""
    from kint.rows.export import connect_ro
    from kint.spaces import space_id
    from kint.tenant_worker.chain_head import HeadReading
    from kint.tenant_worker.statefiles import SpaceState
    from kint.tenant_worker.verify import verify

    import corpus

    assert spec.verify_on is not None
    kint_home, db, tenant, label = spec.verify_on
    client = corpus.open_client(Path(db), tenant)
    conn = connect_ro(db)
    state = SpaceState(Path(kint_home), space_id(label))
    head = HeadReading(None, "bench")

    def run(query: str) -> None:
        out = verify(client=client, conn=conn, tenant=tenant, state=state, query=query,
                     limit=LIMIT, head=head, write_refusal=False)
        if out["decision"] != "proceed":
            raise SystemExit(f"the same-work worker did not proceed on {query!r}")
    return run


def serve(spec: WorkerSpec, back_address: str) -> None:
    """One worker's loop: a request's bytes in, its reply's bytes out, until "stop"."""
    verify_one = _verifier(spec) if spec.work else None
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.ROUTING_ID, spec.route)
    sock.connect(back_address)
    sock.send_multipart([b"", b"hello"])
    while True:
        client, body = sock.recv_multipart()
        if body == b"stop":
            break
        if verify_one is not None:
            verify_one(spec.work[body])
        sock.send_multipart([client, spec.replies[body]])
    sock.close()
    ctx.term()


def workers(back_address: str, spec_file: str) -> int:
    """Preload, freeze, fork a child per spec, print their pids, wait for them all."""
    with open(spec_file, "rb") as fh:
        specs: list[WorkerSpec] = pickle.load(fh)
    if any(s.work for s in specs):
        for name in VERIFY_MODULES:
            importlib.import_module(name)
    gc.freeze()
    pids = []
    for spec in specs:
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                serve(spec, back_address)
            except BaseException:  # noqa: BLE001 - a child says why, then leaves
                traceback.print_exc()
                code = 1
            finally:
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    print("forked " + " ".join(map(str, pids)), flush=True)
    failed = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        failed += status != 0
    return 1 if failed else 0


# -- this process's side ---------------------------------------------------------------------


def _child(*argv: str) -> list[str]:
    return [sys.executable, "-c",
            "import sys, bare_shape; sys.exit(getattr(bare_shape, sys.argv[1])(*sys.argv[2:]))",
            *argv]


def _line(proc: subprocess.Popen, what: str) -> str:
    """The child's next line of stdout, within START_TIMEOUT_S."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    if not line:
        raise RuntimeError(f"the bare {what} did not start")
    return line.strip()


class BareShape:
    """The relay child, the workers' parent (and its children), and this process's DEALER
    on the relay's front (for `call`; other processes connect to `front` themselves)."""

    def __init__(self, root: Path, specs: list[WorkerSpec], *, name: str = "bare") -> None:
        spec_file = root / f"{name}-workers.pickle"
        spec_file.touch(mode=0o600)
        spec_file.write_bytes(pickle.dumps(specs))
        self.front = f"ipc://{root / f'{name}-front.sock'}"
        back = f"ipc://{root / f'{name}-back.sock'}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")])}
        self.routes = [s.route for s in specs]
        self.replies = {r: reply for s in specs for r, reply in s.replies.items()}
        self.relay = subprocess.Popen(_child("relay", self.front, back, str(len(specs))),
                                      stdout=subprocess.PIPE, text=True, env=env)
        self.parent = subprocess.Popen(_child("workers", back, str(spec_file)),
                                       stdout=subprocess.PIPE, text=True, env=env)
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        try:
            self.worker_pids = [int(p) for p in _line(self.parent, "workers").split()[1:]]
            if _line(self.relay, "relay") != "ready":
                raise RuntimeError("the bare relay did not start")
        except BaseException:
            self.close()
            raise
        self.sock.connect(self.front)

    def call(self, request: bytes, route: bytes | None = None) -> None:
        """One round trip from this process (to the only worker when `route` is None),
        checked against the reply its worker was given."""
        self.sock.send_multipart([route or self.routes[0], request])
        if not self.sock.poll(CALL_TIMEOUT_MS):
            raise RuntimeError(f"the bare relay did not answer within {CALL_TIMEOUT_MS} ms")
        if self.sock.recv() != self.replies[request]:
            raise RuntimeError("the bare relay answered something else")

    def close(self) -> None:
        try:
            if self.relay.poll() is None:
                self.sock.send(b"stop", zmq.NOBLOCK)
        except zmq.Again:
            pass  # never connected: the children are stopped below
        finally:
            self.sock.close(linger=200)
            for proc in (self.relay, self.parent):
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    if proc is self.parent:  # its children first, while still its own
                        for pid in getattr(self, "worker_pids", []):
                            if common.parent_pid(pid) == proc.pid:
                                os.kill(pid, signal.SIGKILL)
                    proc.kill()
                    proc.wait()


def bare_call(sock: Any, route: bytes, request: bytes, timeout_ms: int) -> bool:
    """One round trip through the relay on a client's DEALER: True when answered."""
    sock.send_multipart([route, request])
    if not sock.poll(timeout_ms):
        return False
    sock.recv()
    return True
