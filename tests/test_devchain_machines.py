"""The suite's devchain machines read the chain head under LOADED_BOX_HEAD_S unless a test
says otherwise (tests/chain_machines.py): only three files asked for it, and a fresh
clone's run beside other work on a two-core box read no head in two others
(test_handshake_only, test_over_skipped_scope), one read past v0.3.0's 2 s leaving the
space unread for the tracker's 30 s."""

from __future__ import annotations

from chain_machines import LOADED_BOX_HEAD_S, join_devchain, new_machine
from conftest import make_sandbox
from kint.chain.config import devchain_record


HEAD = "KINT_VERIFY_HEAD_SECONDS"


def test_a_devchain_machines_supervisor_reads_the_head_under_the_loaded_box_budget(
        tmp_path, chain_home):
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        shown = {e["name"]: e for e in sb.call("config", sb.sibyl_db)["settings"]}
        assert shown[HEAD]["value"] == float(LOADED_BOX_HEAD_S), shown[HEAD]
    finally:
        sb.shutdown()


def test_a_tests_own_head_budget_is_kept_and_none_leaves_it_unset(tmp_path, chain_home):
    own = make_sandbox(tmp_path / "own", **{HEAD: "2"})
    join_devchain(chain_home, own)
    assert own.env[HEAD] == "2"
    unset = make_sandbox(tmp_path / "unset")
    join_devchain(chain_home, unset, head_s=None)
    assert HEAD not in unset.env
    assert devchain_record(unset.kint_home).is_file()
