"""Which keys `kint rekey` carries to the new data key, and what it refuses before its
snapshot push (05-keys.md, "Rotate the data key", steps 4 to 9).

One machine, offline (`KINT_OFFLINE=1`: local wraps stand for the chain, and the RPC is a
closed port on 127.0.0.1), connected with v0.3.0's vector signature to a fresh vault. Its
wraps file is then given a second wrap of the same data key under a vault passphrase, so
the vault opens with either key, as after `kint connect --add-passphrase`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain_machines import make_session_key
from conftest import make_sandbox
from kint.custody.data_key import dek_id
from kint.custody.keks import passphrase_kek
from kint.custody.vault_cache import read_cached_key
from kint.custody.wraps import KIND_PASSPHRASE, read_wraps, wrap_data_key, write_wraps
from kint.spaces import space_id

V = json.loads((Path(__file__).parent / "vectors" / "kint-v0.3.0.json").read_text("utf-8"))
OWNER = V["owner"]
SIGNATURE = "0x" + V["derive_signature"] + "\n"
SECRET = "the local secret of this test machine"
VAULT_PASSPHRASE = "a vault passphrase"


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """One machine for the module: each test checks that the rekey it tries leaves every key
    file as it was, so the next one starts from the same vault (and a test that changed one
    would fail on its own check first). Its session key is made beforehand at a test's
    scrypt cost (chain_machines.make_session_key): no rekey here reads it, and at kint's
    own cost the connect's write and the worker's unlock cost seconds."""
    sb = make_sandbox(tmp_path_factory.mktemp("rekey-keys") / "machine", KINT_OFFLINE="1",
                      KINT_RPC_URL="http://127.0.0.1:9", KINT_SESSION_PASSPHRASE=SECRET)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setenv("KINT_SESSION_PASSPHRASE", SECRET)
            make_session_key(sb)
            out = sb.kint("connect", "--owner", OWNER, "--signature", "-", input=SIGNATURE)
            assert out.returncode == 0, out.stderr
            space = space_id(sb.tenant)
            dek = read_cached_key(sb.kint_home, space).dek
            (signature_wrap,) = read_wraps(sb.kint_home, space).wraps
            kek = passphrase_kek(VAULT_PASSPHRASE, OWNER, space, home=sb.kint_home)
            write_wraps(sb.kint_home, space, dek_id(dek),
                        (signature_wrap, wrap_data_key(dek, kek, KIND_PASSPHRASE)))
            yield sb, space, dek
    finally:
        sb.shutdown()


def _key_files(sb, space: str) -> dict[str, bytes]:
    """Every file that holds or names this machine's data key for the space."""
    return {p.name: p.read_bytes() for p in sorted(sb.kint_home.iterdir())
            if p.name.startswith(("wraps-", "vault-", "RECOVERY-", "enrol-"))
            and space[:16] in p.name}


def test_rekey_refuses_to_drop_a_key_by_name_and_to_add_one(machine):
    sb, space, _ = machine
    passphrase_tag = read_wraps(sb.kint_home, space).wraps[1].tag.hex()[:8]
    before = _key_files(sb, space)

    out = sb.kint("rekey", "--signature", "-", input=SIGNATURE)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0] == (
        f"kint: error: rekey would drop passphrase (tag {passphrase_tag}): supply those keys "
        f"too, or pass --drop-missing [BAD_REQUEST]")

    out = sb.kint("rekey", "--smart-account", "--passphrase-stdin", input="not the one\n")
    assert out.returncode == 2, out.stderr
    line = out.stderr.splitlines()[0]
    assert line.startswith("kint: error: this key (tag ") and line.endswith(
        ") does not open a current wrap of the vault: rekey re-wraps keys that work today and "
        "cannot add a new one [WRONG_KEY]"), line
    assert _key_files(sb, space) == before


def test_a_rekey_whose_snapshot_push_fails_changes_nothing_here(machine):
    """Step 9: the wraps, the key cache, the recovery file and the enrolment move to the
    new key only after its snapshot is on chain; here the push cannot reach the chain."""
    sb, space, dek = machine
    before = _key_files(sb, space)
    assert len(before) == 4, sorted(before)
    out = sb.kint("rekey", "--signature", "-", "--drop-missing", input=SIGNATURE)
    assert out.returncode == 5, out.stderr
    assert "[RPC_UNAVAILABLE]" in out.stderr.splitlines()[0], out.stderr
    assert _key_files(sb, space) == before
    assert read_cached_key(sb.kint_home, space).dek == dek


@pytest.mark.parametrize("flags,stdin", [
    (["--passphrase-stdin"], ""),
    (["--passphrase-prompt"], "\n"),
    (["--smart-account"], None),
    (["--add-passphrase"], None),
], ids=["salt-stdin-empty", "salt-prompt-empty", "vault-prompt-never-typed",
        "extra-prompt-never-typed"])
def test_a_refused_passphrase_leaves_the_rekey_signature_file(machine, tmp_path, flags, stdin):
    """A signature file is unlinked once read, so rekey asks for the passphrases that go with
    it first: one refused (empty, never typed) leaves the file, and the owner need not sign
    again with the wallet; no key file moves."""
    sb, space, _ = machine
    before = _key_files(sb, space)
    signature = tmp_path / "sig.txt"
    signature.write_text(SIGNATURE)
    out = sb.kint("rekey", "--signature-file", str(signature), *flags, input=stdin)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "[BAD_REQUEST]" in out.stderr and "passphrase" in out.stderr, out.stderr
    assert signature.exists()
    assert _key_files(sb, space) == before
