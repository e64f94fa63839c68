"""What session 36's dogfood lane found, walking two machines on one devchain.

- After `kint join` on a second machine, the `next:` line said to put a few cents of ETH on
  the new session key: on the devchain no wallet holds its ETH and no kint command gave
  any. `kint devchain fund ADDRESS` now sends devchain ETH from anvil's first dev account
  (refused off the devchain).
"""

from __future__ import annotations

import json
import re

import pytest

from chain_machines import RULE_1, join_devchain, kjson, make_session_key
from conftest import make_sandbox, sibyl_client
from machines_together import running_together

ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """A (connected with `--dev`, one epoch anchored) and B (no session key yet: its join
    makes it), on the session's devchain."""
    made = {}
    for name in ("a", "b"):
        sb = make_sandbox(tmp_path_factory.mktemp(f"dog36-{name}"))
        join_devchain(chain_home, sb)
        if name == "a":
            make_session_key(sb)
        made[name] = sb
    with running_together(made):
        a = made["a"]
        client = sibyl_client(a.sibyl_db, a.tenant)
        try:
            client.set_entity("rules", "release-gate", {"rule": RULE_1})
        finally:
            client.storage.close()
        owner = kjson(a, "connect", "--dev")["owner"]
        kjson(a, "push")
        yield {**made, "owner": owner}


def test_devchain_fund_json_adds_to_the_balance(machines):
    b = machines["b"]
    target = "0x" + "ab" * 20
    first = kjson(b, "devchain", "fund", target, "--eth", "0.25")
    assert {k: first[k] for k in ("amount_wei", "amount_eth", "balance_wei", "balance_eth")} \
        == {"amount_wei": 25 * 10**16, "amount_eth": "0.25", "balance_wei": 25 * 10**16,
            "balance_eth": "0.25"}, first
    assert first["address"].lower() == target and ADDRESS.fullmatch(first["from"])
    second = kjson(b, "devchain", "fund", target, "--eth", "0.5")
    assert second["balance_eth"] == "0.75" and second["block"] > first["block"], second


def test_devchain_fund_is_refused_off_the_devchain_and_for_bad_input(machines, tmp_path):
    b = machines["b"]
    target = "0x" + "cd" * 20
    elsewhere = b.kint("devchain", "fund", target, env={"KINT_RPC_URL": "http://127.0.0.1:1"})
    assert elsewhere.returncode == 2, elsewhere.stderr
    assert "[CONFIG_INVALID]" in elsewhere.stderr and "not the devchain" in elsewhere.stderr
    bare = make_sandbox(tmp_path / "bare")  # no devchain record: a machine on Base
    none = bare.kint("devchain", "fund", target, "--json")
    assert none.returncode == 3, none.stdout + none.stderr
    assert json.loads(none.stdout)["error"] == "RPC_UNAVAILABLE", none.stdout
    for args in (["0x12"], [target, "--eth", "abc"], [target, "--eth", "0"],
                 [target, "--eth", "1001"], [target, "--eth", "nan"]):
        out = b.kint("devchain", "fund", *args)
        assert out.returncode == 2 and "[BAD_REQUEST]" in out.stderr, (args, out.stderr)
    # Nothing was sent by any of them.
    assert kjson(b, "devchain", "fund", target, "--eth", "1")["balance_eth"] == "1"
