"""A long-lived client in its own process (as a kint-server's is), for
tests/test_front_door.py: answered once, then held (SIGSTOP) by the test while its
supervisor is replaced, so its ZeroMQ reconnect cannot reach the next one first.

argv: KINT_HOME, the call's timeout (s), "autostart" or "no-autostart". Prints "ready"
once answered; on a line from stdin calls sup.ping and prints {"s": seconds, "code": ...};
on the next line (the door open again) prints {"late": replies to that call delivered since,
"kept": whether its socket is still open}."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kint.client import Client, KintError

client = Client(Path(sys.argv[1]), autostart=sys.argv[3] == "autostart")
client.call("sup.ping", timeout_s=10)
print("ready", flush=True)
sys.stdin.readline()
began = time.monotonic()
try:
    client.call("sup.ping", timeout_s=float(sys.argv[2]))
    code = "answered"
except KintError as err:
    code = err.code
print(json.dumps({"s": time.monotonic() - began, "code": code}), flush=True)
sys.stdin.readline()
time.sleep(2)  # a request left queued on the socket reaches the reopened door by now
late = 0
sock = client._sock
if sock is not None:
    while sock.poll(500):
        sock.recv()
        late += 1
print(json.dumps({"late": late, "kept": sock is not None}), flush=True)
