"""`resolve_pending` when the head read shows the chain still at the journal's prev but the
re-send of the journal's transaction is refused (kint/tenant_worker/pending.py): the
refusal alone never drops the journal; the chain read again decides. Fakes stand in for the
chain so each answer order is exact; tests/test_overtaken.py makes the race for real."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from eth_account import Account
from eth_hash.auto import keccak

from kint.chain.anchor import Head
from kint.chain.calls import ChainRefused
from kint.chain.nonces import NonceBook
from kint.chain.rpc import RpcNotReached, RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import UNSETTLED_HINT
from kint.tenant_worker import pending as pending_mod
from kint.tenant_worker import rekey_settle
from kint.tenant_worker.head_lock import HeadTurn
from kint.tenant_worker.pending_journal import PendingEpoch
from kint.tenant_worker.session_sender import SessionSender

PREV, OTHER = "a1" * 32, "ee" * 32
NONCE = 7
KEY = "0x" + "11" * 20  # the machine's session key, which signed the journal


class Chain:
    """Heads and mined counts answered in turn; the re-send refused as a reverted one."""

    def __init__(self, heads: list[Head | Exception], counts: list[int]) -> None:
        self.heads, self.counts, self.sent = heads, counts, 0
        self.account = SimpleNamespace(address=KEY)

    def head(self, owner: str, space: str) -> Head:
        answer = self.heads.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def mined_count(self) -> int:
        return self.counts.pop(0)

    def can_write(self, owner: str, writer: str) -> bool:
        return True  # the key still authorized: tests/test_pending_resend_settled.py revokes it

    def send_raw(self, raw: bytes) -> str:
        self.sent += 1
        raise ChainRefused("reverted", "the re-send failed")


def _setup(tmp_path, monkeypatch, heads: list[Head | Exception], counts: list[int]):
    envelope = b"an envelope"
    journal = PendingEpoch(seq=2, prev=PREV, digest=keccak(envelope).hex(), nonce=NONCE,
                           raw_tx=b"signed", bucket=4096, plaintext=b"", envelope=envelope,
                           sender=KEY)
    path = tmp_path / "pending.json"
    journal.save(path)
    ctx = SimpleNamespace(config=SimpleNamespace(space16="ab" * 8, space_id="ab" * 32,
                                                 home=tmp_path),
                          state=SimpleNamespace(files={"pending": path}, mirror=lambda: None))
    recorded: list[Head] = []
    monkeypatch.setattr(pending_mod, "_record_head",
                        lambda ctx, anchor, p, head, owner: recorded.append(head),
                        raising=False)
    chain = Chain(heads, counts)
    return ctx, chain, path, recorded


def test_a_refused_resend_whose_transaction_had_landed_is_recorded(tmp_path, monkeypatch):
    """Mined between the head read and the re-send: the head read again is the journal's
    epoch, which is recorded (before, the journal was dropped as never to land)."""
    landed = Head(digest=keccak(b"an envelope").hex(), seq=2, block=12)
    ctx, chain, path, recorded = _setup(tmp_path, monkeypatch,
                                        [Head(PREV, 1, 11), landed], [NONCE, NONCE + 1])
    assert pending_mod.resolve_pending(ctx, chain, chain, "0xowner") is None
    assert chain.sent == 1 and recorded == [landed]


def test_a_refused_resend_on_a_head_still_at_prev_drops_only_a_spent_nonce(tmp_path,
                                                                           monkeypatch):
    """Still at prev with the nonce spent once the nonce is read first: whatever spent it
    was not this epoch, so the journal is dropped. Not spent: it may still land, kept."""
    ctx, chain, path, recorded = _setup(tmp_path, monkeypatch,
                                        [Head(PREV, 1, 11), Head(PREV, 1, 12)],
                                        [NONCE, NONCE + 1])
    assert pending_mod.resolve_pending(ctx, chain, chain, "0xowner") is None
    assert not path.exists() and recorded == []

    ctx, chain, path, recorded = _setup(tmp_path, monkeypatch,
                                        [Head(PREV, 1, 11), Head(PREV, 1, 12)],
                                        [NONCE, NONCE])
    with pytest.raises(ProtocolError) as refused:
        pending_mod.resolve_pending(ctx, chain, chain, "0xowner")
    assert refused.value.code == ErrorCode.RPC_UNAVAILABLE and path.exists()


def test_a_refused_resend_and_an_unreadable_chain_keep_the_journal(tmp_path, monkeypatch):
    """Whether it landed is not known: refused RPC_UNAVAILABLE, never taken as "not"."""
    ctx, chain, path, recorded = _setup(tmp_path, monkeypatch,
                                        [Head(PREV, 1, 11), RpcUnavailable("no answer")],
                                        [NONCE, NONCE + 1])
    with pytest.raises(ProtocolError) as refused:
        pending_mod.resolve_pending(ctx, chain, chain, "0xowner")
    assert refused.value.code == ErrorCode.RPC_UNAVAILABLE and path.exists()
    assert "the journal is kept" in refused.value.message


def test_another_epoch_at_the_journals_seq_after_a_refused_resend_drops_it(tmp_path,
                                                                         monkeypatch):
    """The head moved past prev: the Epoch event at the journal's seq decides
    (`_overtaken`, tested in tests/test_overtaken.py)."""
    ctx, chain, path, recorded = _setup(tmp_path, monkeypatch,
                                        [Head(PREV, 1, 11), Head(OTHER, 2, 12)],
                                        [NONCE, NONCE + 1])
    seen = []
    monkeypatch.setattr(pending_mod, "_overtaken",
                        lambda ctx, anchor, p, head, owner, sender:
                        seen.append(head) or "overtaken")
    assert pending_mod.resolve_pending(ctx, chain, chain, "0xowner") == "overtaken"
    assert seen == [Head(OTHER, 2, 12)]


class Revoked(Chain):
    """The journal's key may not write for the owner now, and its nonce is unspent: the
    settlement does not send the transaction (`_settle_unauthorized`). `lookup` is what
    the endpoint answers when asked for the journal's transaction; a replacement sent is
    refused, as an endpoint refuses a bid too low."""

    def __init__(self, lookup) -> None:
        super().__init__([Head(PREV, 1, 11)], [])
        self.account = Account.create()
        self.config = SimpleNamespace(chain_id=31337)
        self.w3 = SimpleNamespace(eth=SimpleNamespace(
            get_transaction_count=lambda address, tag: NONCE,
            get_transaction=lookup, gas_price=10**9))

    def can_write(self, owner: str, writer: str) -> bool:
        return False

    @staticmethod
    def fee_caps(raw: bytes) -> tuple[int, int]:
        return 10**9, 10**9


def _revoked(tmp_path, lookup):
    """A journal signed by the machine's key (a real nonce book holding its signed push at
    NONCE, as the push left it) whose key the owner revoked since."""
    chain = Revoked(lookup)
    book = NonceBook(tmp_path)
    assert book.allocate(chain.account.address, NONCE, "ab" * 8, lambda n: b"signed") == NONCE
    sender = SessionSender(chain, chain.account, book, "ab" * 8)
    envelope = b"an envelope"
    path = tmp_path / "pending.json"
    PendingEpoch(seq=2, prev=PREV, digest=keccak(envelope).hex(), nonce=NONCE,
                 raw_tx=b"signed", bucket=4096, plaintext=b"", envelope=envelope,
                 sender=chain.account.address).save(path)
    ctx = SimpleNamespace(config=SimpleNamespace(space16="ab" * 8, space_id="ab" * 32,
                                                 home=tmp_path),
                          state=SimpleNamespace(files={"pending": path}, mirror=lambda: None),
                          enrolment=lambda: None)  # the settled notice names no vault
    return ctx, chain, sender, book, path


def _lookup_fails(tx_hash):
    raise ConnectionError("the endpoint dropped the connection")


@pytest.mark.parametrize("lookup", [_lookup_fails, lambda tx_hash: {"blockNumber": None}],
                         ids=["lookup-failed", "replacement-refused"])
def test_a_revoked_keys_journal_that_may_still_land_is_kept(tmp_path, lookup):
    """Whether the endpoint holds the journal's transaction could not be read, or it holds
    it and refused its replacement: the signed push is still in the book (or waiting at
    the endpoint), so once the owner authorizes the key again the next push would stall
    behind it and re-broadcast it (nonces.unstick), an epoch landing with no journal. The
    journal and the book entry are kept, and the refusal says so. Before, the journal was
    dropped all the same and the refusal said it was."""
    ctx, chain, sender, book, path = _revoked(tmp_path, lookup)
    with pytest.raises(ProtocolError) as refused:
        pending_mod.resolve_pending(ctx, chain, sender, "0xowner")
    assert "its journal is kept" in refused.value.message, refused.value.message
    assert "dropped" not in refused.value.message
    if lookup is _lookup_fails:
        # The endpoint failed, not the key: its refusal and hint, as every settlement's
        # that cannot read the chain (it was NOT_CONNECTED, sending the user to authorize).
        assert refused.value.code == ErrorCode.RPC_UNAVAILABLE, refused.value
        assert refused.value.hint == UNSETTLED_HINT
        assert "once the endpoint answers" in refused.value.message
    else:  # the endpoint answered, refusing the replacement: the key's refusal
        assert refused.value.code == ErrorCode.NOT_CONNECTED
        assert "`kint authorize`" in refused.value.hint
        assert "`kint session-key rotate`" in refused.value.hint, refused.value.hint
    assert path.exists() and chain.sent == (0 if lookup is _lookup_fails else 1)
    assert book._entry(NONCE).raw == b"signed".hex()


@pytest.mark.parametrize("lookup", [_lookup_fails, lambda tx_hash: {"blockNumber": None}],
                         ids=["lookup-failed", "replacement-refused"])
def test_a_kept_journal_of_a_revoked_key_is_dropped_once_the_key_is_rotated(tmp_path,
                                                                             lookup):
    """The other way out its hint names, for a user who will not authorize the key again:
    after `kint session-key rotate` the journal is a previous key's (former_key.py), and
    the next settlement drops it whatever became of its transaction, the rows left for the
    new key's push. Here no session.key.old opens (the refused replacement is not tried
    again: nothing sent), and the endpoint answers as it did."""
    ctx, chain, sender, book, path = _revoked(tmp_path, lookup)
    chain.heads.append(Head(PREV, 1, 11))
    with pytest.raises(ProtocolError):
        pending_mod.resolve_pending(ctx, chain, sender, "0xowner")
    assert path.exists()
    sent = chain.sent
    rotated = SessionSender(chain, Account.create(), NonceBook(tmp_path), "ab" * 8)
    found = pending_mod.resolve_pending(ctx, chain, rotated, "0xowner")
    assert found is not None and found.rotated and found.kept is None, found
    assert "its journal is dropped" in found.describe()
    assert "`kint push` again" in found.hint()
    assert not path.exists() and chain.sent == sent


def test_a_revoked_keys_journal_found_mined_is_settled_from_the_chain(tmp_path, monkeypatch):
    """The journal's transaction is found in a block when the nonce is released (mined
    between the settlement's nonce read and its look, or read from an endpoint behind the
    one that answered first): perhaps the journal's own epoch, landed before the key's
    rights ended. The chain decides, as for any spent nonce (`_settle_spent`); the journal
    is never dropped on the look alone (review25c)."""
    ctx, chain, sender, book, path = _revoked(tmp_path, lambda tx_hash: {"blockNumber": 12})
    seen = []
    monkeypatch.setattr(pending_mod, "_settle_spent",
                        lambda ctx, anchor, s, p, owner, refused: seen.append(p.seq) or None)
    assert pending_mod.resolve_pending(ctx, chain, sender, "0xowner") is None
    assert seen == [2] and path.exists() and chain.sent == 0


def test_a_revoked_keys_journal_never_sent_is_dropped_and_its_nonce_given_back(tmp_path):
    """The endpoint does not know the transaction: it never left this machine and cannot
    land once its nonce is given back, so the journal goes; the settlement returns what it
    found for a push to refuse with (and a pull to carry on past)."""
    ctx, chain, sender, book, path = _revoked(tmp_path, lambda tx_hash: None)
    found = pending_mod.resolve_pending(ctx, chain, sender, "0xowner")
    assert found is not None and found.kept is None and not found.rotated
    assert "its journal is dropped" in found.describe()
    assert found.refusal().code == ErrorCode.NOT_CONNECTED
    assert not path.exists() and book._entry(NONCE) is None and chain.sent == 0


def test_a_start_that_drops_a_revoked_keys_journal_says_it_dropped_it(tmp_path, monkeypatch,
                                                                      caplog):
    """A worker's start settlement (rekey_settle.settle_at_start) that drops the journal:
    its log says the journal is dropped, and the rekey journal is settled after it. Before,
    the drop escaped as the refusal, the rekey journal was skipped, and the start logged
    "left for the next push, pull or rekey" over "its journal is dropped"."""
    ctx, chain, sender, book, path = _revoked(tmp_path, lambda tx_hash: None)
    ctx.head_ops = HeadTurn()
    ctx.state.files["head_lock"] = tmp_path / "head.lock"
    ctx.tracker = None
    monkeypatch.setattr(rekey_settle, "connected",
                        lambda ctx: (None, SimpleNamespace(owner="0xowner")))
    monkeypatch.setattr(rekey_settle, "Anchor", lambda chain_, tracker: chain)
    monkeypatch.setattr(rekey_settle, "sender_for", lambda ctx, anchor: sender)
    settled: list[object] = []
    monkeypatch.setattr(rekey_settle, "settle_rekey", lambda ctx: settled.append(ctx))
    with caplog.at_level(logging.INFO, logger="kint.worker"):
        rekey_settle.settle_at_start(ctx)
    said = [r.getMessage() for r in caplog.records]
    assert not path.exists() and settled == [ctx]
    assert any("its journal is dropped" in m for m in said), said
    assert not any("left for the next push" in m for m in said), said


def test_a_resend_that_makes_no_connection_says_not_sent_again(tmp_path, monkeypatch):
    """The journal's re-send makes no connection to the endpoint: the journal is kept, and
    the refusal says the epoch was not sent again, since a push killed after its own send
    may have left it at the endpoint. Before, it said "signed but never sent"."""
    ctx, chain, path, recorded = _setup(tmp_path, monkeypatch, [Head(PREV, 1, 11)], [NONCE])

    def unreached(raw: bytes) -> str:
        raise RpcNotReached("sending the transaction: the endpoint could not be reached")

    chain.send_raw = unreached
    with pytest.raises(ProtocolError) as refused:
        pending_mod.resolve_pending(ctx, chain, chain, "0xowner")
    assert refused.value.code == ErrorCode.RPC_UNAVAILABLE and path.exists()
    assert "epoch 2 was signed and not sent again" in refused.value.message, \
        refused.value.message
    assert "never sent" not in refused.value.message
