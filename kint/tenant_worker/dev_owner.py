"""`kint connect --dev`: a throwaway owner wallet on the devchain, so `make demo` and the
tests run the real wallet flow in one command.

The owner is a fresh EOA whose key is kept under `$KINT_HOME/devchain/` (0600; the devchain
is local and its keys are worth nothing). It does what a real owner does by hand: signs the
frozen vault message (the derive signature connect needs) and sends `setSessionKey` for
this machine's session key from its own funded account. The session key is funded from
anvil's dev balance. Nothing here runs unless the chain is the devchain.
"""

from __future__ import annotations

import time
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from kint.chain import devchain
from kint.chain.anchor import Anchor
from kint.custody.keks import kek_tag, signature_kek
from kint.custody.vault_message import parse_signature_text, vault_typed_data
from kint.paths import atomic_write, devchain_dir, ensure_private_dir

DEV_AUTHORIZATION_DAYS = 365
DEV_FUNDING_WEI = 10**19


def owner_key_path(home: Path, address: str) -> Path:
    return devchain_dir(home) / f"owner-{address.lower()}.key"


def new_owner(home: Path) -> LocalAccount:
    """A fresh owner, its key written where `load_owner` and the demo find it."""
    account = Account.create()
    ensure_private_dir(devchain_dir(home))
    atomic_write(owner_key_path(home, account.address), account.key.hex().encode() + b"\n")
    return account


def load_owner(home: Path, address: str) -> LocalAccount | None:
    try:
        return Account.from_key(owner_key_path(home, address).read_text().strip())
    except FileNotFoundError:
        return None


def owner_of_wraps(home: Path, space: str, tags: set[bytes]) -> LocalAccount | None:
    """The devchain owner kept here whose derive signature opens one of a space's local
    wraps (by kek_tag), or None. A `connect --dev` killed after writing the wraps and
    before the enrolment left no record of its owner but this: the next one reuses that
    owner instead of making a new one the wraps refuse."""
    for path in sorted(devchain_dir(home).glob("owner-0x*.key")):
        try:
            account = Account.from_key(path.read_text().strip())
        except (OSError, ValueError):
            continue
        kek = signature_kek(parse_signature_text(derive_signature(account)), account.address,
                            space)
        if kek_tag(kek) in tags:
            return account
    return None


def derive_signature(owner: LocalAccount) -> str:
    """What `cast wallet sign --data --from-file kint-canonical.json` gives a real owner."""
    signed = Account.sign_typed_data(owner.key, full_message=vault_typed_data(owner.address))
    return signed.signature.hex()


def authorize(anchor: Anchor, url: str, owner: LocalAccount, session_address: str) -> int:
    """The owner sends setSessionKey(session, now + 365 days) itself, from its own funded
    account, and the session key gets gas money. Returns the expiry."""
    devchain.fund(url, owner.address, 10**18)
    devchain.fund(url, session_address, DEV_FUNDING_WEI)
    expiry = int(time.time()) + DEV_AUTHORIZATION_DAYS * 86400
    anchor.transact(owner, anchor.encode_set_session_key(session_address, expiry))
    return expiry
