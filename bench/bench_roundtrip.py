"""Round trip of op `status`: kint.client.Client -> supervisor -> worker -> back, against a
bare pyzmq DEALER/ROUTER echo between two processes, both measured in the same run.

Routed: one Client, reused; 200 warm-up calls (the first spawns the space's worker), then
N=2000 timed calls of `client.call("status", ...)`. Bare: a child process runs a ROUTER
that echoes every message over ipc:// in the temp folder; this process's DEALER sends one
frame (the encoded bytes of the same status request) and waits for the echo; same warm-up
and N. For context only, it also times `sup.ping` through the same Client (client ->
supervisor -> client, no worker).

Target: routed p50 within 2x of bare p50.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any

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


def _bare_echo(env: common.BenchEnv, payload: bytes, warmup: int, n: int) -> list[float]:
    address = f"ipc://{env.root / 'echo.sock'}"
    child = subprocess.Popen([sys.executable, "-c", ECHO_CHILD, address],
                             stdout=subprocess.PIPE, text=True)
    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        if child.stdout is None or child.stdout.readline().strip() != "ready":
            raise RuntimeError("the echo child did not start")
        sock.connect(address)
        samples: list[float] = []
        for i in range(warmup + n):
            t0 = time.perf_counter_ns()
            sock.send(payload)
            if not sock.poll(10_000):
                raise RuntimeError("the echo child did not answer within 10 s")
            echoed = sock.recv()
            dt = time.perf_counter_ns() - t0
            if echoed != payload:
                raise RuntimeError("the echo child answered something else")
            if i >= warmup:
                samples.append(dt / 1000.0)
        sock.send(b"stop")
        sock.poll(2000)
        return samples
    finally:
        sock.close(linger=0)
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _routed(client: Any, op: str, kwargs: dict[str, Any], warmup: int, n: int,
            check: Any = None) -> list[float]:
    samples: list[float] = []
    for i in range(warmup + n):
        t0 = time.perf_counter_ns()
        result = client.call(op, **kwargs)
        dt = time.perf_counter_ns() - t0
        if check is not None and (i == 0 or i == warmup + n - 1):
            check(result)
        if i >= warmup:
            samples.append(dt / 1000.0)
    return samples


def run(quick: bool = False) -> dict[str, Any]:
    from kint.client import Client
    from kint.protocol import Request, encode_request
    from kint.protocol.envelope import encode_reply, new_request_id, ok_reply
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

        bare = _bare_echo(env, payload, warmup, n)

        def check(result: dict[str, Any]) -> None:
            if result.get("space") != space.space16 or result["rows"]["entity"] != 1:
                raise RuntimeError(f"unexpected status result: {result}")

        with Client(env.kint_home) as client:
            routed = _routed(client, "status", kwargs, warmup, n, check)
            ping = _routed(client, "sup.ping", {"timeout_s": 10}, warmup, n)
            reply_bytes = len(encode_reply(ok_reply(new_request_id(),
                                                    client.call("status", **kwargs))))

    bare_s = common.summarize(bare, "us")
    routed_s = common.summarize(routed, "us")
    ping_s = common.summarize(ping, "us")
    ratio_p50 = routed_s["p50"] / bare_s["p50"]
    ratio_p99 = routed_s["p99"] / bare_s["p99"]
    return {
        "name": "roundtrip",
        "quick": quick,
        "machine": common.machine(),
        "params": {"warmup": warmup, "n": n, "request_frame_bytes": len(payload),
                   "status_reply_frame_bytes": reply_bytes},
        "bare_echo_us": bare_s,
        "routed_status_us": routed_s,
        "context_sup_ping_us": ping_s,
        "ratio_routed_over_bare": {"p50": ratio_p50, "p99": ratio_p99},
        "target": {"description": "routed p50 within 2x of bare p50",
                   "max_ratio_p50": TARGET_RATIO_P50, "met": ratio_p50 <= TARGET_RATIO_P50},
        "env": env.report(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = run(args.quick)
    path = common.write_json("roundtrip", result)
    b, r, p = result["bare_echo_us"], result["routed_status_us"], result["context_sup_ping_us"]
    print(f"bare echo       p50 {b['p50']:8.1f} us  p99 {b['p99']:8.1f} us")
    print(f"routed status   p50 {r['p50']:8.1f} us  p99 {r['p99']:8.1f} us")
    print(f"sup.ping        p50 {p['p50']:8.1f} us  p99 {p['p99']:8.1f} us")
    print(f"ratio p50 {result['ratio_routed_over_bare']['p50']:.2f}x  "
          f"p99 {result['ratio_routed_over_bare']['p99']:.2f}x  -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
