"""A leaked session key's epoch with a well-formed header: `pull --discard-local` and then
`compact --over-skipped` get a machine with unanchored rows past it, as in kint v0.3.0.

06-epochs.md ("An epoch nobody can open"): any authorized writer can append any bytes, so
an epoch a leaked session key appends opens for nobody; connect and rekey step over a
header that does not parse and nothing else, "a bad epoch with a well-formed header whose
wraps none of your keys open still stops them until the owner's snapshot sits on top of
it". A machine that wrote rows meanwhile has its push refused (the head moved) and its pull
refused (a fork); the discard moves the store aside, restores up to the bad epoch and
records it skipped, and the owner's snapshot (`compact --over-skipped`) goes over it.

The discard refuses (GAP, "connect again") only for an epoch sealed under a data key that
moved on elsewhere: its header carries a wrap under one of this machine's keys (a `kint
rekey` on another machine: tests/test_chain_e2e.py's `test_rekey_rotates_and_other_
machines_follow`). It refused this one too, and no connect opens it (WRONG_KEY), so the
machine had no way out. A real devchain, supervisor and worker; the leaked key's epoch is
sent straight to the contract, as the leaked key would.
"""

from __future__ import annotations

import gzip
import json
import os

import pytest
from eth_account import Account
from sibyl_memory_client.exceptions import NotFoundError

from chain_machines import authorize_machine, devchain_anchor, kjson, owner_account
from conftest import sibyl_client, write_rules as write
from machines_together import new_machines
from kint.custody.wraps import Wrap, read_wraps
from kint.epochs.envelope import Header

CONNECT_AGAIN = "`kint connect` again"


def _leaked_epoch(chain_home, owner, space_id: str, wraps: tuple[Wrap, ...]) -> int:
    """A leaked session key appends an epoch whose header parses and names a data key
    nobody holds, carrying `wraps`; its seq."""
    anchor = devchain_anchor(chain_home)
    leaked = Account.create()
    authorize_machine(chain_home, owner, leaked.address)
    head = anchor.head(owner.address, space_id)
    header = Header(flags=0, nonce=os.urandom(12), rows_root=os.urandom(32),
                    dek_id=os.urandom(8), bucket=4096, wraps=wraps)
    blob = header.encode() + os.urandom(4096 + 16)
    anchor.transact(leaked, anchor.encode_push(owner.address, space_id, head.digest, blob))
    return head.seq + 1


@pytest.mark.parametrize("wraps", ["none of ours", "copied"])
def test_discard_and_over_skipped_get_past_a_leaked_keys_well_formed_epoch(tmp_path,
                                                                           chain_home, wraps):
    """`wraps`: the bad epoch's header carries a wrap under a key nobody holds, or a copy
    of this machine's own wraps (public in every header it pushed): those wrap the data
    key held here, not the one the bad header names, so they are no rotation's either."""
    (a,) = new_machines([tmp_path / "a"], chain_home)
    try:
        write(a.sibyl_db, a.tenant, **{"release-gate": "ship on green only"})
        connected = kjson(a, "connect", "--dev")
        kjson(a, "push")
        space16 = connected["space"]
        space_id = json.loads((a.kint_home / f"enrol-{space16}.json").read_text())["space"]
        carried = (read_wraps(a.kint_home, space_id).wraps if wraps == "copied" else
                   (Wrap(1, os.urandom(16), os.urandom(12), os.urandom(48)),))
        bad = _leaked_epoch(chain_home, owner_account(a, connected["owner"]), space_id,
                            carried)
        store = sibyl_client(a.sibyl_db, a.tenant)
        store.set_entity("notes", "unanchored", {"n": 1})
        store.storage.close()  # an open store is not moved aside (BUSY)

        fork = a.kint("pull")
        assert fork.returncode == 4 and "[FORK]" in fork.stderr, fork.stderr
        discard = kjson(a, "pull", "--discard-local")  # refused GAP before the fix
        assert discard["gap"] == [bad] and discard["applied"] == [1], discard
        assert discard["backups"], discard  # the store moved aside, kept
        assert CONNECT_AGAIN not in discard["message"], discard["message"]
        mirror = json.loads(gzip.decompress(
            (a.kint_home / f"mirror-{space16}.json.gz").read_bytes()))
        assert mirror["skipped"] == [bad] and "rotated_gap" not in mirror, mirror
        restored = sibyl_client(a.sibyl_db, a.tenant)
        try:
            assert restored.get_entity("rules", "release-gate")["body"]
            with pytest.raises(NotFoundError):  # it is in the backup, not the store
                restored.get_entity("notes", "unanchored")
            restored.set_entity("notes", "after-discard", {"n": 2})
        finally:
            restored.storage.close()

        # The push refusal names the owner's snapshot, not a connect that opens nothing.
        gap = a.kint("push")
        assert gap.returncode == 5 and "[GAP]" in gap.stderr, gap.stderr
        assert "kint compact --over-skipped" in gap.stderr and CONNECT_AGAIN not in gap.stderr
        over = kjson(a, "compact", "--over-skipped")
        assert over["epochs"][0]["seq"] == bad + 1, over
        assert over["override"].startswith(
            f"push: OVERRIDE, anchoring a snapshot on top of chain head seq {bad} (")
        assert kjson(a, "verify", "release rule")["decision"] == "proceed"
    finally:
        a.shutdown()
