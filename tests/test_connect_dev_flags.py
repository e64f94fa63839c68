"""`kint connect --dev` and the other ways in: each flag is honoured or refused, never
silently dropped (lane leftovers17).

`--dev` makes (or finds again) its own EOA owner and opens the vault with that owner's
unsalted signature, so the flags that hand over another key cannot go with it: each is
refused as a usage error (exit 2) naming the flag, before any secret is read (a signature
file is not unlinked for nothing). `--add-passphrase` is honoured: the devchain vault gets
a passphrase wrap (05-keys.md, "One data key, many wraps"), carried by the next epoch.
They were all dropped without a word before.
"""

from __future__ import annotations

import json

import pytest

from chain_machines import devchain_anchor, new_machine, ok
from conftest import make_sandbox, sibyl_client
from kint.custody.keks import kek_tag, passphrase_kek
from kint.custody.wraps import KIND_PASSPHRASE, KIND_SIGNATURE
from kint.epochs.envelope import Header
from kint.spaces import space_id

OWNER = "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
EXTRA = "a devchain vault's extra passphrase"

REFUSED = [
    ("--owner", ["--owner", OWNER], None),
    ("--signature", ["--signature", "-"], "0xab\n"),
    ("--signature-file", ["--signature-file", "SIGNATURE_FILE"], None),
    ("--smart-account", ["--smart-account"], None),
    ("--passphrase-stdin", ["--passphrase-stdin"], "a passphrase\n"),
    ("--passphrase-prompt", ["--passphrase-prompt"], None),
    ("--recovery-code-stdin", ["--recovery-code-stdin"], "CODE\n"),
]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """A machine with no supervisor: every refusal here comes before anything is sent."""
    return make_sandbox(tmp_path_factory.mktemp("dev-flags"))


@pytest.mark.parametrize("flag,argv,stdin", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_flag_dev_cannot_take_is_refused_by_name(machine, tmp_path, flag, argv, stdin):
    signature_file = tmp_path / "signature.txt"
    signature_file.write_text("0x" + "ab" * 65 + "\n")
    argv = [str(signature_file) if a == "SIGNATURE_FILE" else a for a in argv]
    out = machine.kint("connect", "--dev", *argv, input=stdin)
    assert out.returncode == 2, out.stdout + out.stderr
    message, hint = out.stderr.splitlines()
    assert message.startswith(f"kint: error: {flag} cannot be given with --dev: "), message
    assert message.endswith(" [BAD_REQUEST]") and hint.startswith("hint: "), out.stderr
    assert signature_file.exists(), "the signature file was read and unlinked"


def test_add_passphrase_with_dev_adds_a_passphrase_wrap(tmp_path, chain_home):
    """The prompt's passphrase becomes a kind 0x02 wrap beside the dev owner's signature
    wrap, and the next epoch's header carries both."""
    sb = new_machine(tmp_path / "a", chain_home)
    try:
        client = sibyl_client(sb.sibyl_db, sb.tenant)
        client.set_entity("notes", "first", {"by": "dev"})
        out = ok(sb.kint("connect", "--dev", "--add-passphrase", "--json",
                         input=EXTRA + "\n"))
        connected = json.loads(out.stdout)
        owner, space = connected["owner"], space_id(sb.tenant)
        ok(sb.kint("push"))
        anchor = devchain_anchor(chain_home)
        head = anchor.head(owner, space)
        event = anchor.epoch_log(owner, space, head.seq, head.block)
        header = Header.decode(anchor.push_calldata(event.tx_hash, owner, space, event.prev,
                                                    event.digest))
        assert [w.kind for w in header.wraps] == [KIND_SIGNATURE, KIND_PASSPHRASE]
        want = kek_tag(passphrase_kek(EXTRA, owner, space, home=sb.kint_home))
        assert header.wraps[1].tag == want
    finally:
        sb.shutdown()
