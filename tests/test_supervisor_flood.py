"""Every request gets an answer (issue 14, item 8).

10,000 requests sent as fast as the sockets take them, by clients that read nothing until
they have sent everything: each gets exactly one reply, a result or BUSY, none is dropped
in silence. And the CLI, refused because a space's queue is full, says BUSY.
"""

from __future__ import annotations

import collections
import os
import signal
import threading

import orjson
import pytest
import zmq

from conftest import TENANT, make_sandbox, write_store
from kint.socket_paths import front_address

FLOOD = 10_000
CLIENTS = 2


def _dealer(home):
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(front_address(home))
    return sock


def _request(sb, db, rid: str) -> bytes:
    if rid.endswith("p"):
        return orjson.dumps({"v": 1, "id": rid, "op": "sup.ping", "timeout_ms": 120_000})
    return orjson.dumps({"v": 1, "id": rid, "op": "status", "tenant": TENANT, "db": str(db),
                         "space": sb.label(db), "args": {}, "timeout_ms": 120_000})


def _flood(sb, db, prefix: str, count: int, out: dict, errors: list) -> None:
    """Send `count` requests without reading, then read until every one is answered."""
    try:
        sock = _dealer(sb.kint_home)
        sent = [f"{prefix}-{i}{'p' if i % 5 == 0 else 's'}" for i in range(count)]
        for rid in sent:
            sock.send(_request(sb, db, rid))
        replies: dict[str, list[str]] = collections.defaultdict(list)
        # Generous: an answer is due for each; the wait ends as soon as all are in.
        while len(replies) < count and sock.poll(60_000):
            reply = orjson.loads(sock.recv())
            replies[reply["id"]].append("ok" if reply["ok"] else reply["error"])
        sock.close()
        out[prefix] = (sent, replies)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """One supervisor for the module: both tests leave it serving as they found it."""
    sb = make_sandbox(tmp_path_factory.mktemp("flood"))
    write_store(sb.sibyl_db)
    sb.start()
    yield sb
    sb.shutdown()


def test_a_flood_of_ten_thousand_requests_gets_ten_thousand_answers(sandbox):
    db = sandbox.sibyl_db
    sandbox.call("status", db)
    out: dict = {}
    errors: list = []
    threads = [threading.Thread(target=_flood, args=(sandbox, db, f"c{n}", FLOOD // CLIENTS,
                                                     out, errors)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    codes: collections.Counter = collections.Counter()
    unanswered = []
    for sent, replies in out.values():
        for rid in sent:
            got = replies.get(rid, [])
            if not got:
                unanswered.append(rid)
            assert len(got) <= 1, (rid, got)
            codes.update(got)
    assert not unanswered, f"{len(unanswered)} of {FLOOD} requests got no answer"
    assert sum(codes.values()) == FLOOD
    assert set(codes) <= {"ok", "BUSY"}, codes
    assert codes["ok"] >= FLOOD // 5  # every ping, and the status requests that got a place
    # The supervisor and the worker serve on after it.
    assert sandbox.call("status", db)["rows"]["entity"] == 1


def test_the_cli_says_busy_when_a_space_queue_is_full(sandbox):
    db = sandbox.sibyl_db
    worker = sandbox.call("status", db)["worker"]["pid"]
    os.kill(worker, signal.SIGSTOP)
    sock = _dealer(sandbox.kint_home)
    try:
        for i in range(32):
            sock.send(_request(sandbox, db, f"q{i}s"))
        sandbox.wait_for(lambda: sandbox.row(db)["waiting"] == 32, what="a full queue")
        out = sandbox.kint("--db", str(db), "status")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "[BUSY]" in out.stderr and "hint: " in out.stderr
        assert "Traceback" not in out.stderr
    finally:
        os.kill(worker, signal.SIGCONT)
    answered = {orjson.loads(sock.recv())["id"] for _ in range(32) if sock.poll(30_000)}
    sock.close()
    assert answered == {f"q{i}s" for i in range(32)}
