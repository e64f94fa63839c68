"""`kint push --json`, `kint compact --json` and `kint rekey --json` name each epoch's fields
as kint v0.3.0's memory_push gives them (08-tools.md, "memory_push": `seq`, `tx`, `block`,
`digest`, `bucket`, `rows`, `deleted`, `snapshot`, `cost_wei`, `gas_used`, `l1_fee`), the
names kint-server's memory_push gives too (tests/test_mcp_v030.py). v0.3.0's CLI has no
`--json` on these commands (09-cli.md), so the tool's names are the spec's only naming: the
CLI said `gas` where the tool said `gas_used`, for the same receipt's gas.

Through the real CLI on the session's devchain: one machine anchors, then pushes, compacts
and rekeys.
"""

from __future__ import annotations

import json

from chain_machines import anchored, new_machine, ok, owner_account, wallet_signature
from conftest import write_rules
from kint.custody.vault_message import canonical_payload

V030_EPOCH = {"seq", "tx", "block", "digest", "bucket", "rows", "deleted", "snapshot",
              "cost_wei", "gas_used", "l1_fee"}


def _named_as_v030(epoch: dict) -> None:
    assert V030_EPOCH <= set(epoch), sorted(epoch)
    assert "gas" not in epoch, sorted(epoch)  # one name for the receipt's gas
    assert isinstance(epoch["gas_used"], int) and epoch["gas_used"] > 0, epoch


def test_push_compact_and_rekey_name_each_epochs_gas_gas_used(tmp_path, chain_home):
    with anchored(new_machine(tmp_path / "a", chain_home), first="the first rule") as a:
        write_rules(a.sibyl_db, a.tenant, first="the rule, changed")
        pushed = json.loads(ok(a.kint("push", "--json")).stdout)
        (epoch,) = pushed["epochs"]
        _named_as_v030(epoch)
        assert epoch["snapshot"] is False

        compacted = json.loads(ok(a.kint("compact", "--json")).stdout)
        (snapshot,) = compacted["epochs"]
        _named_as_v030(snapshot)
        assert snapshot["snapshot"] is True

        status = json.loads(ok(a.kint("status", "--json")).stdout)
        account = owner_account(a, status["owner"])
        signature = wallet_signature(account, canonical_payload(account.address).decode())
        rekeyed = json.loads(ok(a.kint("rekey", "--signature", "-", "--json",
                                       input=signature + "\n")).stdout)
        (rotation,) = rekeyed["snapshot"]
        _named_as_v030(rotation)
        assert rotation["snapshot"] is True and rotation["seq"] == snapshot["seq"] + 1
