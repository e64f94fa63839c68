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
        refused = sb.kint("rekey")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.splitlines()[:2] == [
            f"kint: error: rekey needs every key that is to keep opening the vault, and none "
            f"was given: the vault's key is the signature of {owner}, the owner `kint connect "
            f"--dev` made, and no kint command signs with it [BAD_REQUEST]",
            f"hint: sign with the key in {key_file}: `kint canonical-payload --owner {owner} > "
            f"kint-canonical.json`, then `cast wallet sign -i --data --from-file "
            f"kint-canonical.json | kint rekey --signature -`, pasting that key at cast's "
            f"prompt (never on argv)"], refused.stderr
        # The route the hint names. cast is not on this box (only anvil's npm package is):
        # eth_account signs the same typed data with the same key, as cast's EIP-712
        # signing does.
        payload = ok(sb.kint("canonical-payload", "--owner", owner)).stdout
        signed = Account.sign_typed_data(key_file.read_text().strip(),
                                         full_message=json.loads(payload))
        rotated = ok(sb.kint("rekey", "--signature", "-", input=signed.signature.hex() + "\n"))
        assert re.match(r"data key \S+ -> \S+$", rotated.stdout.splitlines()[0]), rotated.stdout
    finally:
        sb.shutdown()
