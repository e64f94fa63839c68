"""A push whose journal cannot be written (a full disk, here a journal path under a regular
file) gives its nonce back (kint/tenant_worker/push.py `save_journal`): the nonce book held
the signed epoch from its signing, and with no journal to settle it by, another space's
`unstick` would have broadcast it behind this machine. A real NonceBook on real files; the
transaction is signed locally and never sent."""

from __future__ import annotations

import pytest
from eth_account import Account

from kint.chain.nonces import NonceBook
from kint.paths import UnsafePathError
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.push import save_journal
from kint.tenant_worker.session_sender import SessionSender


def test_a_journal_that_cannot_be_written_gives_the_signed_nonce_back(tmp_path):
    account = Account.create()
    book = NonceBook(tmp_path / "home")
    tx = {"to": account.address, "value": 0, "gas": 21000, "gasPrice": 1, "chainId": 31337}
    raw: list[bytes] = []

    def sign(nonce: int) -> bytes:
        raw.append(bytes(account.sign_transaction({**tx, "nonce": nonce}).raw_transaction))
        return raw[-1]

    nonce = book.allocate(account.address, 3, "a" * 16, sign)
    held = tmp_path / "home" / "nonces" / f"{nonce:012d}.json"
    assert held.exists()  # the signed epoch, in the book before the journal
    pending = PendingEpoch(seq=1, prev="00" * 32, digest="11" * 32, nonce=nonce,
                           raw_tx=raw[0], bucket=0, plaintext=b"", envelope=b"",
                           sender=account.address)
    in_the_way = tmp_path / "state"
    in_the_way.write_text("a file where the space's folder should be")
    sender = SessionSender(None, account, book, "a" * 16)  # no chain: nothing is sent
    with pytest.raises(UnsafePathError):  # refused as a full disk would fail the write
        save_journal(pending, in_the_way / "pending.json", sender)
    assert not held.exists()  # given back: nothing left for unstick to broadcast
    assert book.allocate(account.address, 3, "a" * 16, sign) == nonce  # taken again
