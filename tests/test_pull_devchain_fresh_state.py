"""A devchain started again on a fresh state (its state.json removed between a stop and a
start): EpochAnchor is deployed again at the same address (the dev account's first
deployment), on a chain where this machine's space has no epoch. A pull is refused by the
older head (STALE_RPC, exit 6, nothing applied), and its hint said "check KINT_RPC_URL and
KINT_RPC_URL_2", settings not in force on the devchain (its record names the endpoint); it
now names the devchain and that case. A real anvil of the sandbox's own (not the session's,
whose state no test may take away), supervisor, worker and Sibyl store.
"""

from __future__ import annotations

import json

from chain_machines import LOADED_BOX_HEAD_S, kjson, make_session_key, ok
from conftest import make_sandbox, write_rules
from kint.chain.config import devchain_record
from kint.chain.devchain.records import state_path

HINT = ("hint: check that the devchain (`kint devchain status`) runs on the chain this machine "
        "anchored on: the endpoint answered with an old or different head; one started again "
        "on a fresh state (its state.json removed) holds none of this space's epochs")


def test_a_pull_from_a_devchain_started_on_a_fresh_state_names_the_devchain(tmp_path):
    sb = make_sandbox(tmp_path / "machine", KINT_VERIFY_HEAD_SECONDS=LOADED_BOX_HEAD_S)
    try:
        ok(sb.kint("devchain", "start"))
        first = json.loads(devchain_record(sb.kint_home).read_text())
        make_session_key(sb)
        sb.start_entitled()
        kjson(sb, "connect", "--dev")
        write_rules(sb.sibyl_db, sb.tenant, release="a rule anchored on the first chain")
        ok(sb.kint("push"))
        ok(sb.kint("devchain", "stop"))
        state_path(sb.kint_home).unlink()
        ok(sb.kint("devchain", "start"))
        again = json.loads(devchain_record(sb.kint_home).read_text())
        assert again["anchor"] == first["anchor"], again  # the premise: one address
        pulled = sb.kint("pull")
        assert pulled.returncode == 6, pulled.stdout + pulled.stderr
        assert pulled.stderr.splitlines()[:2] == [
            "kint: error: the endpoint's head (seq 0) is older than the newest this machine "
            "saw (seq 1): a stale or lying RPC, refusing; nothing was applied [STALE_RPC]",
            HINT], pulled.stderr
    finally:
        sb.shutdown()
        sb.kint("devchain", "stop")
