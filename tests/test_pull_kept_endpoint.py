"""A space on the devchain whose endpoint it keeps from `kint connect --rpc-urls` now reaches
another devchain: another anvil, chain 31337 too, its EpochAnchor at the very address
(deployed first from the same dev account), where this space has no epoch. Connect checks
the chain id of the endpoint it is given, which cannot tell the two apart, and a pull
checks nothing again. Pull and push both refuse the head of seq 0 below the seq 1 this
machine anchored (STALE_RPC, nothing applied, nothing sent to the other chain); their hint
said "check KINT_RPC_URL and KINT_RPC_URL_2", settings the kept endpoints replace, and names
the kept endpoints now. A kept endpoint nothing answers on (the devchain started again, on a
new port) is refused naming them too (pinned). Real anvils (the session's and one started
here), supervisor, worker and Sibyl store; the kept endpoint is a loopback proxy, pointed at
the second anvil.
"""

from __future__ import annotations

import json

import requests

from chain_machines import kjson, new_machine, ok
from conftest import make_sandbox, write_rules
from kint.chain.config import devchain_record
from rpc_proxy import RpcProxy

HINT = ("hint: check the endpoints this space was given by `kint connect --rpc-urls` (a connect "
        "given --rpc-urls again replaces them): the endpoint answered with an old or "
        "different head")


def _block(url: str) -> int:
    answer = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber",
                                      "params": []}, timeout=10).json()
    return int(answer["result"], 16)


def test_a_kept_endpoint_on_another_devchain_is_refused_naming_the_kept_endpoints(tmp_path,
                                                                                   chain_home):
    session = json.loads(devchain_record(chain_home).read_text())
    other = make_sandbox(tmp_path / "other-devchain")
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        ok(other.kint("devchain", "start"))
        second = json.loads(devchain_record(other.kint_home).read_text())
        assert second["anchor"] == session["anchor"], second  # the premise: one address
        with RpcProxy(session["rpc_url"]) as proxy:
            kjson(sb, "connect", "--dev", "--rpc-urls", proxy.url)
            write_rules(sb.sibyl_db, sb.tenant, release="a rule anchored on the first chain")
            ok(sb.kint("push"))
            proxy.repoint(second["rpc_url"])
            before = _block(second["rpc_url"])
            pulled = sb.kint("pull")
            write_rules(sb.sibyl_db, sb.tenant, release="a rule for the next push")
            pushed = sb.kint("push")
        # The devchain started again takes a new port: the kept one answers nothing now.
        silent = sb.kint("pull")
        assert pulled.returncode == 6, pulled.stdout + pulled.stderr
        assert pulled.stderr.splitlines()[:2] == [
            "kint: error: the endpoint's head (seq 0) is older than the newest this machine "
            "saw (seq 1): a stale or lying RPC, refusing; nothing was applied [STALE_RPC]",
            HINT], pulled.stderr
        assert pushed.returncode == 5, pushed.stdout + pushed.stderr
        assert pushed.stderr.splitlines()[1] == HINT, pushed.stderr
        assert "[STALE_RPC]" in pushed.stderr.splitlines()[0], pushed.stderr
        assert _block(second["rpc_url"]) == before  # nothing was sent to the other chain
        assert silent.returncode == 5, silent.stdout + silent.stderr
        assert silent.stderr.splitlines()[:2] == [
            "kint: error: reading the head: the endpoint could not be reached (ConnectionError) "
            "[RPC_UNAVAILABLE]",
            "hint: check the endpoints this space was given by `kint connect --rpc-urls` and "
            "that they answer, then try again"], silent.stderr
    finally:
        sb.shutdown()
        other.kint("devchain", "stop")
