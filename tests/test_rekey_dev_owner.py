"""`kint rekey` for a vault whose owner `kint connect --dev` made (a real devchain,
supervisor, worker and Sibyl store). That owner has no wallet: its key is a file under
KINT_HOME/devchain, no kint command signs the vault message with it, and v0.3.0's rekey has
no flag that would (09-cli.md). A rekey given no key said only "give --signature -", a
wallet's route; it now names the owner, its key's file and how to sign with it, and the
route it names rotates the key.
"""

from __future__ import annotations

import json
import re
import shlex

from eth_account import Account

from chain_machines import kjson, new_machine, ok
from conftest import write_rules


def test_a_dev_owners_rekey_names_how_to_sign_for_it_and_that_route_rotates(tmp_path,
                                                                              chain_home):
    sb = new_machine(tmp_path / "machine", chain_home)
    try:
        owner = kjson(sb, "connect", "--dev")["owner"]
        write_rules(sb.sibyl_db, sb.tenant, release="a rule before the rotation")
        ok(sb.kint("push"))
        key_file = sb.kint_home / "devchain" / f"owner-{owner.lower()}.key"
        key = key_file.read_text().strip()
        # Given as a refused call may give them: the space's flags and the rekey's own. The
        # hint's rekey is this one; a bare `kint rekey` would rekey the default space.
        given = ("--tenant", sb.tenant, "--db", str(sb.sibyl_db), "rekey", "--confirmations",
                 "1")
        refused = sb.kint(*given)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.splitlines()[:2] == [
            f"kint: error: rekey needs every key that is to keep opening the vault, and none "
            f"was given: the vault's key is the signature of {owner}, the owner `kint connect "
            f"--dev` made, and no kint command signs with it [BAD_REQUEST]",
            f"hint: sign with the key in {key_file}: `kint canonical-payload --owner {owner} > "
            f"kint-canonical.json`, then `cast wallet sign -i --data --from-file "
            f"kint-canonical.json | {shlex.join(['kint', *given, '--signature', '-'])}`, "
            f"pasting that key at cast's prompt (never on argv)"], refused.stderr
        # The route the hint names, its rekey run as the hint spells it. cast is not on this
        # box (only anvil's npm package is): eth_account signs the same typed data with the
        # same key, as cast's EIP-712 signing does.
        rekey = re.search(r"\| (kint [^`]*)`", refused.stderr.splitlines()[1]).group(1)
        payload = ok(sb.kint("canonical-payload", "--owner", owner)).stdout
        signed = Account.sign_typed_data(key, full_message=json.loads(payload))
        rotated = ok(sb.kint(*shlex.split(rekey)[1:], input=signed.signature.hex() + "\n"))
        assert re.match(r"data key \S+ -> \S+$", rotated.stdout.splitlines()[0]), rotated.stdout
        for said in (refused, rotated):  # the key's path is named, never the key
            assert key.removeprefix("0x") not in said.stdout + said.stderr
    finally:
        sb.shutdown()
