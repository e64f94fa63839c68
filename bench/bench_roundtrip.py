"""Round trip of op `status`: kint.client.Client -> supervisor -> worker -> back, against a
bare pyzmq DEALER/ROUTER echo between two processes, both measured in the same run.

Routed: one Client, reused; one call that autostarts the supervisor and spawns the space's
worker, 200 warm-up calls, then N=2000 timed calls of `client.call("status", ...)`. Bare:
a child process runs a ROUTER that echoes every message over ipc:// in the temp folder;
this process's DEALER sends one frame (the encoded bytes of the same status request) and
waits for the echo; same warm-up and N. For context only, `sup.ping` through the same
Client (client -> supervisor -> client, no worker). The three series are timed in
alternating blocks of 100 calls, with the echo child and the supervisor both up
throughout, so the baseline and the routed figures see the same machine.

Target: routed p50 within 2x of bare p50.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import zmq

import common

ECHO_CHILD = r"""
import sys
import zmq

ctx = zmq.Context()
sock = ctx.socket(zmq.ROUTER)
sock.setsockopt(zmq.LINGER, 0)
sock.bind(sys.argv[1])
print("ready", flush=True)
while True:
    frames = sock.recv_multipart()
    sock.send_multipart(frames)
    if frames[-1] == b"stop":
        break
sock.close()
ctx.term()
"""

TARGET_RATIO_P50 = 2.0
# The three series are measured in alternating blocks of this many calls, so that drift in
# the machine (this is often a VM with noisy neighbours) lands on all of them alike.
BLOCK = 100


class BareEcho:
    """A child process echoing on a ROUTER over ipc://, and this process's DEALER."""

    def __init__(self, env: common.BenchEnv) -> None:
        self.address = f"ipc://{env.root / 'echo.sock'}"
        self.child = subprocess.Popen([sys.executable, "-c", ECHO_CHILD, self.address],
                                      stdout=subprocess.PIPE, text=True)
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        if self.child.stdout is None or self.child.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError("the echo child did not start")
        self.sock.connect(self.address)

    def call(self, payload: bytes) -> None:
        self.sock.send(payload)
        if not self.sock.poll(10_000):
            raise RuntimeError("the echo child did not answer within 10 s")
        if self.sock.recv() != payload:
            raise RuntimeError("the echo child answered something else")

    def close(self) -> None:
        try:
            if self.child.poll() is None:
                self.sock.send(b"stop")
                self.sock.poll(2000)
        finally:
            self.sock.close(linger=0)
            try:
                self.child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def _timed(fn: Callable[[], Any], count: int, into: list[float] | None) -> None:
    for _ in range(count):
        t0 = time.perf_counter_ns()
        fn()
        dt = time.perf_counter_ns() - t0
        if into is not None:
            into.append(dt / 1000.0)


def run(quick: bool = False) -> dict[str, Any]:
    from kint.client import Client
    from kint.protocol import Request, encode_request
    from kint.protocol.envelope import new_request_id, ok_reply
    from kint.protocol.server_codec import encode_reply
    from kint.spaces import resolve

    warmup, n = (50, 300) if quick else (200, 2000)
    with common.hermetic("roundtrip") as env:
        common.make_profile_stores(env, ["rt"])
        db = env.profile_db("rt")
        space = resolve(common.TENANT, db)
        kwargs = {"tenant": common.TENANT, "db": str(db), "space": space.label,
                  "timeout_s": 10}
        payload = encode_request(Request(id=new_request_id(), op="status",
                                         tenant=common.TENANT, db=str(db), space=space.label,
                                         args={}, timeout_ms=10_000))
        bare: list[float] = []
        routed: list[float] = []
        ping: list[float] = []
        echo = BareEcho(env)
        try:
            with Client(env.kint_home) as client:
                first = client.call("status", **kwargs)  # autostart, spawn the worker
                if first.get("space") != space.space16 or first["rows"]["entity"] != 1:
                    raise RuntimeError(f"unexpected status result: {first}")
                reply_bytes = len(encode_reply(ok_reply(new_request_id(), first)))
                series = [
                    (lambda: echo.call(payload), bare),
                    (lambda: client.call("status", **kwargs), routed),
                    (lambda: client.call("sup.ping", timeout_s=10), ping),
                ]
                for fn, _ in series:
                    _timed(fn, warmup, None)
                for _ in range(n // BLOCK):
                    for fn, samples in series:
                        _timed(fn, BLOCK, samples)
                last = client.call("status", **kwargs)
                if last["worker"]["pid"] != first["worker"]["pid"]:
                    raise RuntimeError("the space's worker changed during the run")
        finally:
            echo.close()

    bare_s = common.summarize(bare, "us")
    routed_s = common.summarize(routed, "us")
    ping_s = common.summarize(ping, "us")
    ratio_p50 = routed_s["p50"] / bare_s["p50"]
    ratio_p99 = routed_s["p99"] / bare_s["p99"]
    return {
        "name": "roundtrip",
        "quick": quick,
        "machine": common.machine(),
        "params": {"warmup": warmup, "n": n, "interleaved_block": BLOCK,
                   "request_frame_bytes": len(payload),
                   "status_reply_frame_bytes": reply_bytes},
        "bare_echo_us": bare_s,
        "routed_status_us": routed_s,
        "context_sup_ping_us": ping_s,
        "ratio_routed_over_bare": {"p50": ratio_p50, "p99": ratio_p99},
        "target": {"description": "routed p50 within 2x of bare p50",
                   "max_ratio_p50": TARGET_RATIO_P50, "met": ratio_p50 <= TARGET_RATIO_P50},
        "env": env.report(),
    }


def report(result: dict[str, Any], path: Path) -> None:
    b, r, p = result["bare_echo_us"], result["routed_status_us"], result["context_sup_ping_us"]
    print(f"bare echo       p50 {b['p50']:8.1f} us  p99 {b['p99']:8.1f} us")
    print(f"routed status   p50 {r['p50']:8.1f} us  p99 {r['p99']:8.1f} us")
    print(f"sup.ping        p50 {p['p50']:8.1f} us  p99 {p['p99']:8.1f} us")
    print(f"ratio p50 {result['ratio_routed_over_bare']['p50']:.2f}x  "
          f"p99 {result['ratio_routed_over_bare']['p99']:.2f}x  -> {path}")


def main() -> int:
    return common.bench_main("roundtrip", __doc__, run, report)


if __name__ == "__main__":
    sys.exit(main())
