"""`resolve_pending` when the head read shows the chain still at the journal's prev but the
re-send of the journal's transaction is refused (kint/tenant_worker/pending.py): the
refusal alone never drops the journal; the chain read again decides. Fakes stand in for the
chain so each answer order is exact; tests/test_overtaken.py makes the race for real."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from eth_hash.auto import keccak

from kint.chain.anchor import Head
from kint.chain.calls import ChainRefused
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker import pending as pending_mod
from kint.tenant_worker.pending_journal import PendingEpoch

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
