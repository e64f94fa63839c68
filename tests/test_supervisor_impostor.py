"""Workers prove who they are (issue 14, item 3).

Any process of the same user can reach `workers.sock`. An impostor that connects under a
space's name, says hello with the real worker's pid and answers whatever reaches it, or
that sprays replies at guessed request ids, gets no route and forges nothing: the requests
go to the worker the supervisor spawned, and the answers come from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import orjson
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from bare_worker import bound_router
from conftest import serving, write_store
from kint.protocol import worker_wire
from kint.protocol.envelope import ok_reply
from kint.protocol.server_codec import encode_reply
from kint.socket_paths import back_address
from kint.supervisor.peer import peer_credentials


class Impostor(threading.Thread):
    """Connects to workers.sock as `identity`, says hello as `pid`, answers every request
    it receives with a forged PROCEED, and sprays forged replies at ids 1..100."""

    def __init__(self, home, identity: bytes | None, space16: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.home, self.identity, self.space16, self.pid = home, identity, space16, pid
        self.received: list[dict] = []
        self.stop = threading.Event()
        self.ready = threading.Event()

    def _forged(self, rid: str) -> list[bytes]:
        """A reply in the back socket's two frames, answering the supervisor's id `rid`."""
        return worker_wire.encode({"kind": "reply", "id": rid, "pid": self.pid},
                                  encode_reply(ok_reply(None, {"forged": True,
                                                               "decision": "PROCEED"})))

    def run(self) -> None:
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 100_000)
        if self.identity is not None:
            sock.setsockopt(zmq.ROUTING_ID, self.identity)
        sock.connect(back_address(self.home))
        sock.send_multipart(worker_wire.encode({"kind": "hello", "space": self.space16,
                                                "pid": self.pid}))
        self.ready.set()
        try:
            while not self.stop.is_set():
                for rid in range(1, 100):
                    sock.send_multipart(self._forged(str(rid)), zmq.NOBLOCK)
                sock.send_multipart(worker_wire.encode({"kind": "beat", "pid": self.pid,
                                                        "state": {}}))
                while sock.poll(200):
                    msg = orjson.loads(sock.recv_multipart()[0])
                    self.received.append(msg)
                    if msg.get("kind") == "req":
                        sock.send_multipart(self._forged(msg["id"]))
        except zmq.Again:
            pass
        finally:
            sock.close()


@pytest.fixture(scope="module")
def serving_machine(tmp_path_factory):
    """A machine serving its store's space (`kint supervisor start`, a worker running): the
    two tests that hand its supervisor a peer's messages check that it and that worker go
    on, so they share one rather than start one each."""
    with serving(tmp_path_factory.mktemp("serving") / "machine") as sb:
        yield sb


def test_an_impostor_worker_gets_no_route_and_forges_nothing(serving_machine):
    sandbox = serving_machine
    db, later = sandbox.sibyl_db, sandbox.profile_db("later")
    write_store(later)
    real = sandbox.call("status", db)["worker"]["pid"]
    space16 = sandbox.row(db)["space"]
    from kint.spaces import space_id

    later16 = space_id(sandbox.label(later))[:16]
    impostors = [
        Impostor(sandbox.kint_home, space16.encode(), space16, real),  # takes the name
        Impostor(sandbox.kint_home, None, space16, real),  # no name, the right pid
        Impostor(sandbox.kint_home, later16.encode(), later16, real),  # before any worker
    ]
    for imp in impostors:
        imp.start()
        assert imp.ready.wait(10)
    try:
        answers = [sandbox.call("status", db) for _ in range(5)]
        answers += [sandbox.call("status", later) for _ in range(3)]
    finally:
        for imp in impostors:
            imp.stop.set()
        for imp in impostors:
            imp.join(10)

    assert not any(a.get("forged") for a in answers), "a forged reply reached the client"
    assert all(a["worker"]["pid"] == real for a in answers[:5])
    assert all(a["store"]["path"] == str(later) for a in answers[5:])
    assert [m for imp in impostors for m in imp.received] == [], "an impostor got a request"
    row = sandbox.row(db)
    assert row["pid"] == real and row["restarts"] == 0 and row["state"] in ("ready", "busy")
    assert sandbox.row(later)["pid"] not in (None, real)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED gives the pid")
def test_the_kernel_names_the_process_behind_a_message(tmp_path):
    """What the supervisor checks a hello's sender against: the pid and uid the kernel
    recorded for the connection (SO_PEERCRED), not what the message says."""
    folder = tmp_path / "s"
    folder.mkdir(mode=0o700)
    address = f"ipc://{folder / 'back.sock'}"
    router = bound_router(address)
    sender = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, zmq\n"
        "s = zmq.Context().socket(zmq.DEALER); s.connect(sys.argv[1])\n"
        "s.send(b'{\"pid\": 1}'); time.sleep(5)\n"), address])
    try:
        assert router.poll(20_000)
        frames = router.recv_multipart(copy=False)
        peer = peer_credentials(frames[1])
        assert peer is not None
        assert peer.pid == sender.pid and peer.uid == os.getuid()
    finally:
        sender.kill()
        sender.wait()
        router.close()


def test_a_huge_frame_on_the_back_socket_ends_that_connection_only(serving_machine):
    """A peer's frame larger than any a worker sends is refused by ZeroMQ at the socket (the
    connection is dropped) instead of being read whole into the supervisor's memory; the
    supervisor and its real worker go on."""
    from kint.protocol.limits import SOCKET_MAX_MESSAGE_BYTES

    sandbox = serving_machine
    worker = sandbox.call("status", sandbox.sibyl_db)["worker"]["pid"]
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
    try:
        sock.connect(back_address(sandbox.kint_home))
        assert monitor.poll(10_000), "never connected"
        assert recv_monitor_message(monitor)["event"] == zmq.EVENT_CONNECTED
        sock.send_multipart([b"{}", b"x" * (SOCKET_MAX_MESSAGE_BYTES + 1)])
        assert monitor.poll(10_000), "the connection was kept: the frame was read whole"
        event = recv_monitor_message(monitor)["event"]
        assert event == zmq.EVENT_DISCONNECTED
    finally:
        sock.disable_monitor()
        monitor.close()
        sock.close()
    assert sandbox.call("status", sandbox.sibyl_db)["worker"]["pid"] == worker
