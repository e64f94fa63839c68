"""An endpoint that answers with the wrong shape (an object where a number is due, a reply
with neither a result nor an error object) or with a whole web page gets a clear refusal in
one line: never a traceback, never the page quoted whole (docs/faults.md: a lying RPC is bad
input). The endpoint is a real loopback HTTP server."""

from __future__ import annotations

import http.server
import json

import pytest

from chain_machines import make_session_key
from conftest import make_sandbox
from rpc_proxy import LoopbackServer, answer_json

PAGE = "<html>" + "a web page, not JSON-RPC " * 4000 + "</html>"


class _Liar(http.server.BaseHTTPRequestHandler):
    mode = "object"

    def log_message(self, *args) -> None:  # noqa: D102 - quiet
        pass

    def do_POST(self) -> None:  # noqa: N802
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.server.mode  # type: ignore[attr-defined]
        if mode == "page":
            data = PAGE.encode()
        elif mode == "no result":  # JSON-RPC without "result" or "error": web3's
            data = json.dumps({"jsonrpc": "2.0", "id": req.get("id")}).encode()
        elif mode == "error text":  # an "error" that is no object: web3's BadResponseFormat
            data = json.dumps({"jsonrpc": "2.0", "id": req.get("id"),
                               "error": "no"}).encode()
        else:  # every result an object: no number, no receipt
            data = json.dumps({"jsonrpc": "2.0", "id": req.get("id"),
                               "result": {"number": "zz"}}).encode()
        answer_json(self, data)


@pytest.fixture
def liar():
    endpoint = LoopbackServer(_Liar)
    yield endpoint.server  # the handler reads its `mode`, which the test sets
    endpoint.stop()


# `session-key show` reads the endpoint's chain id first (it names the chain it shows), so
# the lie is met there.
@pytest.mark.parametrize("mode, said", [
    ("object", "reading the chain id: the endpoint's answer is not what was asked for"),
    ("page", "reading the chain id: the endpoint answered with an error (Could not decode"),
    ("no result", "reading the chain id: the endpoint's answer is not what was asked for"),
    ("error text", "reading the chain id: the endpoint's answer is not what was asked for"),
])
def test_a_lying_endpoint_is_refused_in_one_line(tmp_path, liar, mode, said):
    liar.mode = mode
    sb = make_sandbox(tmp_path / "m", KINT_RPC_URL=f"http://127.0.0.1:{liar.server_port}/",
                      KINT_RPC_TIMEOUT="5")
    make_session_key(sb)  # `session-key create` itself: test_authorize_cli.py
    out = sb.kint("session-key", "show")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert said in out.stderr
    assert len(out.stderr) < 600, "the endpoint's page is not quoted whole"
    assert json.loads(out.stdout)["exists"] is True
