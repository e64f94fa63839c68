"""The machine that made a vault, moved to another EpochAnchor before anchoring anything
(lane left18): it stays the vault's maker, as connect_owner.py `wraps_may_be_ours` says why.

The data key belongs to no contract: the first epoch on the new one is sealed under the key
this machine made, so the recovery code it wrote is that vault's code. A file removed
before the move is written back by the moving connect, with the same code, and push, which
a maker is refused without it, anchors on the new contract.
"""

from __future__ import annotations

import json

import pytest

from chain_machines import deploy_second_anchor, kjson, new_machine, recovery_code


@pytest.fixture(scope="module")
def second_anchor(chain_home) -> str:
    return deploy_second_anchor(chain_home)


def test_a_maker_moved_before_anchoring_keeps_its_recovery_code(tmp_path, chain_home,
                                                                second_anchor):
    from conftest import sibyl_client

    maker = new_machine(tmp_path / "maker", chain_home)
    try:
        made = kjson(maker, "connect", "--dev")
        assert made["fresh_vault"] is True, made
        space16 = made["space"]
        code = recovery_code(maker, space16)
        recovery = maker.kint_home / f"RECOVERY-{space16}.txt"
        recovery.unlink()
        path = maker.kint_home / "config.toml"
        path.write_text(f'contract = "{second_anchor}"\n')
        path.chmod(0o600)
        moved = kjson(maker, "connect", "--dev")
        assert moved["chain_moved"] and moved["source"] == "local wraps", moved
        assert moved["recovery_file"] == str(recovery), moved
        assert recovery_code(maker, space16) == code
        assert recovery.stat().st_mode & 0o777 == 0o600
        enrolment = json.loads((maker.kint_home / f"enrol-{space16}.json").read_text())
        assert enrolment["contract"] == second_anchor and enrolment["vault_created"], enrolment
        sibyl_client(maker.sibyl_db, maker.tenant).set_entity("rules", "moved", {"rule": "x"})
        assert kjson(maker, "push")["pushed"] == 1
    finally:
        maker.shutdown()
