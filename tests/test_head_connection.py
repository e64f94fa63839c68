"""Verify's head read reuses its connection to the RPC endpoint.

Each verify reads the chain head. It used to build a new web3 provider for that read, so
every verify opened a new HTTP session and TCP connection (and the worker's memory grew
with them: issue 15's many-tenants bench). A keep-alive proxy in front of the session's
real anvil counts the client connections that carry head reads: a run of verifies from one
worker must use no more connections than the worker has pool threads, not one per verify.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from chain_machines import new_machine, ok
from rpc_proxy import LoopbackServer, answer_json, post_json
from conftest import write_store
from kint.chain.config import devchain_record
from kint.tenant_worker.config import WorkerConfig

VERIFIES = 12


class KeepAliveCounter(LoopbackServer):
    """A loopback HTTP/1.1 proxy that keeps connections open and records, for each
    eth_call, the client's (host, port): one port is one TCP connection."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.call_ports: list[int] = []
        self._lock = threading.Lock()
        counter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    method = json.loads(body).get("method")
                except (ValueError, AttributeError):
                    method = None
                if method == "eth_call":
                    with counter._lock:
                        counter.call_ports.append(self.client_address[1])
                answer_json(self, post_json(*counter.upstream, body))

            def log_message(self, fmt: str, *args: Any) -> None:
                pass

        super().__init__(Handler)

    def __enter__(self) -> "KeepAliveCounter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def test_a_run_of_verifies_reads_the_head_over_kept_connections(tmp_path, chain_home):
    record = json.loads(devchain_record(chain_home).read_text())
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        write_store(sb.sibyl_db, {"release-gate": {"rule": "never ship on a Friday"}})
        with KeepAliveCounter(record["rpc_url"]) as proxy:
            ok(sb.kint("connect", "--dev", "--rpc-urls", proxy.url))
            ok(sb.kint("push"))
            before = len(proxy.call_ports)
            for _ in range(VERIFIES):
                out = json.loads(ok(sb.kint("verify", "--json", "release rule")).stdout)
                assert out["chain_head"] is not None, out  # the head was read on chain
            ports = proxy.call_ports[before:]
            assert len(ports) >= VERIFIES, ports
            threads = WorkerConfig.__dataclass_fields__["threads"].default
            assert len(set(ports)) <= threads, (
                f"{VERIFIES} verifies read the head over {len(set(ports))} connections "
                f"(the worker has {threads} pool threads)")
    finally:
        sb.shutdown()
