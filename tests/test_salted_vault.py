"""An EOA owner's passphrases, end to end (kint v0.3.0's 09-cli.md, "kint connect" and
"kint rekey"; 16-limits.md, "A phished derive signature"). A wallet key salted with a
passphrase (`--passphrase-stdin` beside a signature, or `--passphrase-prompt`): the
signature alone opens nothing on another machine, and the salt is given again on every
later connect. A passphrase wrap added with `--add-passphrase`: derived as a smart
account's vault passphrase is, so `--smart-account` opens the vault with it, until a
`kint rekey --drop-missing` leaves it behind. `--passphrase-stdin` and `--signature -`
cannot share stdin, so the signature comes from `--signature-file`, read then unlinked.

Real parts: machines of the session's devchain, the real CLI, the owner's wallet signing
the vault message as `cast wallet sign --data` would (the bytes `kint canonical-payload`
prints, made in this process: they depend on the owner alone, and the command's are
pinned in test_custody_v030.py). A prompt reads its line from
stdin in a process with no controlling terminal, as under a script."""

from __future__ import annotations

import json
import re

import pytest
from eth_account import Account

from chain_machines import authorize_machine, kjson, ok, wallet_signature
from conftest import sibyl_client
from machines_together import new_machines
from kint.custody.vault_message import canonical_payload

SALT = "a salt only the owner knows"


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """Machines A and B for the module: each test connects its own owner's vault in a space
    of its own (the default store's, then a profile store's on both), so what one test's
    connects and rekeys leave on a machine is in a space the other never names. Machine C,
    started beside them, stays untouched until the second test's last step."""
    a, b, c = new_machines([tmp_path_factory.mktemp(name)
                            for name in ("vault-a", "vault-b", "added-c")], chain_home)
    yield a, b, c
    for machine in (a, b, c):
        machine.shutdown()


def _connect_salted(machine, owner: str, signature: str, salt: str):
    signature_file = machine.root / "vault-signature.txt"
    signature_file.write_text(signature + "\n")
    out = machine.kint("connect", "--owner", owner, "--signature-file", str(signature_file),
                       "--passphrase-stdin", "--json", input=salt + "\n")
    assert not signature_file.exists()  # read, then unlinked, whatever the outcome
    return out


def _without_a_terminal(machine, *args: str, input: str):
    """`kint` in a session of its own, with no controlling terminal: a prompt
    (`getpass`) then reads its line from stdin, as it does under a script."""
    import subprocess

    from conftest import KINT

    return subprocess.run([KINT, *args], env=machine.env, text=True, capture_output=True,
                          timeout=90, input=input, start_new_session=True)


def test_a_salted_vault_opens_with_the_signature_and_its_salt_only(machines, chain_home):
    a, b, _ = machines
    owner = Account.create()
    payload = canonical_payload(owner.address).decode()
    signature = wallet_signature(owner, payload)
    made = json.loads(ok(_connect_salted(a, owner.address, signature, SALT)).stdout)
    assert made["fresh_vault"] is True and made["source"] == "fresh vault", made
    client = sibyl_client(a.sibyl_db, a.tenant)
    client.set_entity("rules", "release-gate", {"rule": "salted"})
    client.storage.close()
    authorize_machine(chain_home, owner, made["session"])
    assert kjson(a, "push")["pushed"] == 1

    # The signature alone, or with another salt, opens nothing (exit 2).
    bare = b.kint("connect", "--owner", owner.address, "--signature", "-",
                  input=signature + "\n")
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert "Wrong wallet, wrong passphrase, or wrong tenant." in bare.stderr, bare.stderr
    wrong = _connect_salted(b, owner.address, signature, "another salt")
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    assert "Wrong wallet, wrong passphrase, or wrong tenant." in wrong.stdout  # --json
    # With its salt, typed at `--passphrase-prompt`'s prompt here, the head epoch's
    # header hands over the data key.
    signature_file = b.root / "vault-signature.txt"
    signature_file.write_text(signature + "\n")
    prompted = _without_a_terminal(b, "connect", "--owner", owner.address,
                                   "--signature-file", str(signature_file),
                                   "--passphrase-prompt", "--json", input=SALT + "\n")
    opened = json.loads(ok(prompted).stdout)
    assert opened["source"] == "chain head header" and opened["fresh_vault"] is False
    assert kjson(b, "pull")["store_root_matches"] is True
    assert kjson(b, "verify", "release rule")["decision"] == "proceed"


def test_a_passphrase_wrap_added_by_an_eoa_opens_the_vault_as_a_smart_accounts_does(
        machines, chain_home):
    """09-cli.md, "kint connect": `--add-passphrase` adds a passphrase wrap beside the
    signature's; 16-limits.md: that wrap is derived as a smart account's vault passphrase
    is, so once an epoch carries it, `--smart-account` with that passphrase opens the
    vault on another machine. The space is a profile store's, `added` on every machine (one
    label, so one space): the default store's is the other test's."""
    a, b, c = machines

    def on(machine, *args: str) -> tuple[str, ...]:
        return ("--db", str(machine.profile_db("added")), *args)

    owner = Account.create()
    payload = canonical_payload(owner.address).decode()
    signature_file = a.root / "vault-signature.txt"
    signature_file.write_text(wallet_signature(owner, payload) + "\n")
    made = _without_a_terminal(a, *on(a, "connect", "--owner", owner.address,
                                      "--signature-file", str(signature_file),
                                      "--add-passphrase", "--json"),
                               input="an extra passphrase\n")
    assert made.returncode == 0, made.stdout + made.stderr
    session = json.loads(made.stdout)["session"]
    client = sibyl_client(a.profile_db("added"), a.tenant)
    client.set_entity("rules", "release-gate", {"rule": "carried"})
    client.storage.close()
    authorize_machine(chain_home, owner, session)
    assert kjson(a, *on(a, "push"))["pushed"] == 1

    opened = b.kint(*on(b, "connect", "--owner", owner.address, "--smart-account",
                        "--passphrase-stdin", "--json"), input="an extra passphrase\n")
    assert opened.returncode == 0, opened.stdout + opened.stderr
    assert json.loads(opened.stdout)["source"] == "chain head header"
    wrong = b.kint(*on(b, "connect", "--owner", owner.address, "--smart-account",
                       "--passphrase-stdin"), input="not the passphrase\n")
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr

    # 09-cli.md, "kint rekey": a rotation with the signature alone would drop the
    # passphrase wrap, so it refuses (exit 2, the snapshot not sent) naming that key by
    # kind and tag, unless --drop-missing; after it the passphrase opens nothing new.
    signature = wallet_signature(owner, payload)
    head = kjson(a, *on(a, "status"))["head"]["seq"]
    kept = a.kint(*on(a, "rekey", "--signature", "-"), input=signature + "\n")
    assert kept.returncode == 2, kept.stdout + kept.stderr
    assert re.search(r"rekey would drop passphrase \(tag [0-9a-f]{8}\): supply those "
                     r"keys too, or pass --drop-missing", kept.stderr), kept.stderr
    assert kjson(a, *on(a, "status"))["head"]["seq"] == head
    # With `--smart-account` beside the signature it carries both (the passphrase typed
    # at its prompt), and drops none.
    signature_file.write_text(signature + "\n")
    both = _without_a_terminal(a, *on(a, "rekey", "--signature-file", str(signature_file),
                                      "--smart-account", "--json"),
                               input="an extra passphrase\n")
    assert both.returncode == 0, both.stdout + both.stderr
    carried = json.loads(both.stdout)
    assert (carried["carried"], carried["dropped"]) == (2, []), carried
    dropped = json.loads(ok(a.kint(*on(a, "rekey", "--signature", "-", "--drop-missing",
                                       "--json"), input=signature + "\n")).stdout)
    assert dropped["carried"] == 1 and len(dropped["dropped"]) == 1, dropped
    gone = c.kint(*on(c, "connect", "--owner", owner.address, "--smart-account",
                      "--passphrase-stdin"), input="an extra passphrase\n")
    assert gone.returncode == 2, gone.stdout + gone.stderr
