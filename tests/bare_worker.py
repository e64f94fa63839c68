"""A tenant worker built in the test's own process, its dealer connected to a ROUTER the
test holds in the supervisor's place: what a test of the worker's loop needs to hand it a
request (`_dispatch`) and read its answer, without a supervisor or a spawn."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import zmq

from conftest import TENANT, write_store
from kint.protocol import worker_wire


def bound_router(address: str) -> zmq.Socket:
    """A ROUTER bound at `address` (an ipc:// one), LINGER 0 so closing it never waits on
    a peer: what a test holds in the supervisor's place (the back socket a worker talks
    to, the front socket a client calls)."""
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(address)
    return router


@contextmanager
def bare_worker(tmp_path: Path, token: bytes) -> Iterator[tuple[Any, zmq.Socket]]:
    """(the worker, the ROUTER in the supervisor's place), over a store of one tenant."""
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.process import Worker

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    address = f"ipc://{tmp_path}/back.sock"
    router = bound_router(address)
    cfg = WorkerConfig(space_id=token[:32].hex(), label=TENANT, tenant=TENANT,
                       db=str(write_store(tmp_path / "memory.db")), kint_home=str(home),
                       back_address=address, supervisor_pid=os.getpid(), idle_beat_s=2.5)
    try:
        worker = Worker(cfg, token)
        try:
            worker.dealer.connect(address)
            yield worker, router
        finally:
            worker.close()
    finally:
        router.close()


def request_frames(internal_id: str, op: str, args: dict[str, Any],
                   db: str) -> list[zmq.Frame]:
    """A client's request as the supervisor forwards it, under its own `internal_id`."""
    request = {"v": 1, "id": "c1", "op": op, "tenant": TENANT, "db": db, "space": TENANT,
               "args": args, "timeout_ms": 30_000}
    return [zmq.Frame(part) for part in worker_wire.encode(
        {"kind": "req", "id": internal_id}, orjson.dumps(request))]


def answer(router: zmq.Socket) -> tuple[dict[str, Any], dict[str, Any]]:
    """The worker's next message to the supervisor: (its header, its reply)."""
    assert router.poll(10_000)
    _route, header, body = router.recv_multipart()
    return orjson.loads(header), orjson.loads(body)
