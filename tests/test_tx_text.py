"""Every command gives a transaction hash one way: `0x` and 64 hex digits, text and --json.

kint v0.3.0's push line is `tx 0x...` (02-quickstart.md), the form `cast tx`, a block
explorer and a wallet take. The worker keeps a hash as its files hold it (bare hex), and
only push's line added the `0x`: `kint rekey`'s snapshot line, `kint history --json` and
`--block`, and push's own `--json` printed the bare digits (kint/tx_text.py).

Through the real CLI on the session's devchain: one machine anchors, then pushes, reads its
history and rekeys.
"""

from __future__ import annotations

import json
import re

from chain_machines import anchored, new_machine, ok, owner_account, wallet_signature
from conftest import write_rules
from kint.tx_text import tx_0x, with_tx_0x
from kint.custody.vault_message import canonical_payload

HASH = re.compile(r"0x[0-9a-f]{64}")


def test_a_result_gives_each_hash_with_its_0x_at_any_depth():
    bare, prefixed = "ab" * 32, "0x" + "cd" * 32
    assert tx_0x(bare) == "0x" + bare and tx_0x(prefixed) == prefixed and tx_0x(None) is None
    assert with_tx_0x({"epochs": [{"tx": bare, "seq": 1}], "checks": [
        {"anchored_tx": bare}], "head": {"tx": prefixed}, "message": bare}) == {
        "epochs": [{"tx": "0x" + bare, "seq": 1}], "checks": [{"anchored_tx": "0x" + bare}],
        "head": {"tx": prefixed}, "message": bare}


def test_push_history_and_rekey_print_each_hash_with_its_0x(tmp_path, chain_home):
    with anchored(new_machine(tmp_path / "a", chain_home), first="the first rule") as a:
        write_rules(a.sibyl_db, a.tenant, first="the rule, changed")
        pushed = json.loads(ok(a.kint("push", "--json")).stdout)
        (epoch,) = pushed["epochs"]
        assert HASH.fullmatch(epoch["tx"]), pushed

        listed = json.loads(ok(a.kint("history", "entity", "first", "--category", "rules",
                                      "--json")).stdout)
        assert listed["versions"] and all(HASH.fullmatch(v["tx"]) for v in listed["versions"])
        assert listed["versions"][-1]["tx"] == epoch["tx"], listed
        at = json.loads(ok(a.kint("history", "entity", "first", "--category", "rules",
                                  "--block", str(epoch["block"]))).stdout)
        assert at["tx"] == epoch["tx"], at

        status = json.loads(ok(a.kint("status", "--json")).stdout)
        account = owner_account(a, status["owner"])
        signature = wallet_signature(account, canonical_payload(account.address).decode())
        rekeyed = ok(a.kint("rekey", "--signature", "-", input=signature + "\n")).stdout
        line = next(x for x in rekeyed.splitlines() if x.startswith("snapshot epoch "))
        assert re.fullmatch(r"snapshot epoch \d+ tx 0x[0-9a-f]{64} block \d+", line), rekeyed
