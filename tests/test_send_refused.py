"""An endpoint that answers a raw send with an error object did not take the transaction
(kint/chain/calls.py, `refused_send`): the send is the chain's refusal (ChainRefused), not
an unavailable endpoint, so a push says nothing of it can land and `cancel` puts back the
push a refused replacement was meant to replace. One that answers it holds the transaction
already has done the send's work. An HTTP status is still the endpoint's failure. What a
push and a re-anchoring then say of their signed epoch (epoch_send.py) is each command's
own. The endpoint is a loopback server answering each method as the test sets it."""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from eth_account import Account
from eth_hash.auto import keccak

from rpc_proxy import ScriptedEndpoint
from kint.chain.anchor import Anchor
from kint.chain.calls import INSUFFICIENT_FUNDS, SEND_REFUSED, ChainRefused
from kint.chain.config import ChainConfig
from kint.chain.nonces import NonceBook
from kint.chain.rpc import RpcErrorAnswer, RpcTracker


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    server = ScriptedEndpoint()
    yield server
    server.stop()


def _anchor(url: str) -> Anchor:
    return Anchor(ChainConfig((url,), 31337, "0x" + "11" * 20, 1, 0.5, rpc_retries=False),
                  RpcTracker())


def _signed(account: Any, nonce: int = 7) -> bytes:
    tx = {"to": account.address, "value": 0, "gas": 21_000, "gasPrice": 10**9,
          "nonce": nonce, "chainId": 31337}
    return bytes(account.sign_transaction(tx).raw_transaction)


def test_an_answered_refusal_of_a_send_is_the_chains_refusal(endpoint):
    """An error object answering eth_sendRawTransaction that names why the node did not
    take it is ChainRefused SEND_REFUSED with the endpoint's words (it was RpcErrorAnswer:
    "may still land"), any other stays RpcErrorAnswer; too little ETH keeps
    its own name; "already known" (anvil: "transaction already imported") is the send
    done, its hash returned; an HTTP 429 stays the endpoint's failure."""
    anchor, raw = _anchor(endpoint.url), _signed(Account.create())
    endpoint.refuse_sends("replacement transaction underpriced")
    with pytest.raises(ChainRefused) as refused:
        anchor.send_raw(raw)
    assert refused.value.error == SEND_REFUSED
    assert "the endpoint refused the transaction" in refused.value.detail
    assert "replacement transaction underpriced" in refused.value.detail

    endpoint.refuse_sends("insufficient funds for gas * price + value")
    with pytest.raises(ChainRefused) as refused:
        anchor.send_raw(raw)
    assert refused.value.error == INSUFFICIENT_FUNDS

    for held in ("already known", "transaction already imported", "AlreadyKnown"):
        endpoint.refuse_sends(held)
        assert anchor.send_raw(raw) == keccak(raw).hex(), held

    endpoint.answers["eth_sendRawTransaction"] = 429
    with pytest.raises(RpcErrorAnswer):
        anchor.send_raw(raw)

    # An error object naming no reason the node did not take the transaction stays the
    # endpoint's failure: a gateway answers so after passing it on, and the epoch may land.
    for said in ("internal error", "request timed out", "upstream connect error"):
        endpoint.refuse_sends(said)
        with pytest.raises(RpcErrorAnswer, match=said):
            anchor.send_raw(raw)


def test_a_refused_replacement_leaves_the_push_in_the_nonce_book(endpoint, tmp_path):
    """`cancel`'s transfer answered with an error object (a bid the endpoint finds too
    low) was not taken, so the nonce's transaction is still the push: the book holds the
    push again, and a re-broadcast sends what the endpoint holds. It kept the transfer,
    which the endpoint had refused."""
    from kint.tenant_worker.session_sender import SessionSender

    account = Account.create()
    book = NonceBook(tmp_path)
    push = _signed(account)
    assert book.allocate(account.address, 7, "a" * 16) == 7
    book.record(7, push)
    endpoint.refuse_sends("replacement transaction underpriced")
    sender = SessionSender(_anchor(endpoint.url), account, book, "a" * 16)
    with pytest.raises(ChainRefused):
        sender.cancel(7, push)
    assert len(endpoint.sent) == 1 and bytes.fromhex(endpoint.sent[0][2:]) != push
    held = json.loads((tmp_path / "nonces" / f"{7:012d}.json").read_text())["raw"]
    assert held == push.hex()


@pytest.mark.parametrize("command", ["push", "reanchor"])
def test_a_signed_epochs_send_says_what_becomes_of_it_in_its_commands_words(endpoint, tmp_path,
                                                                            command):
    """push and `push --reanchor` send a signed epoch through one helper (epoch_send.py),
    each in its own words: a nonce the endpoint counts as spent may be this very
    transaction's, so it is RPC_UNAVAILABLE saying how the epoch is settled (the push's
    journal is kept); any other refusal cannot land (the push drops its journal); no
    connection made is said to be never sent."""
    from kint.protocol import ProtocolError
    from kint.tenant_worker.epoch_send import send_epoch
    from kint.tenant_worker.epoch_send import PUSH_WORDS
    from kint.tenant_worker.reanchor import REANCHOR_WORDS
    from kint.tenant_worker.session_sender import SessionSender, Signed
    from rpc_proxy import closed_port_url

    words = {"push": PUSH_WORDS, "reanchor": REANCHOR_WORDS}[command]
    account = Account.create()
    book = NonceBook(tmp_path)
    signed = Signed(7, _signed(account))
    sender = SessionSender(_anchor(endpoint.url), account, book, "a" * 16)
    dropped: list[str] = []

    def send() -> str:
        with pytest.raises(ProtocolError) as said:
            send_epoch(sender, signed, 3, words, not_taken=lambda: dropped.append("journal"))
        return f"{said.value.code.value}: {said.value}"

    endpoint.refuse_sends("nonce too low")
    said = send()
    assert said.startswith("RPC_UNAVAILABLE") and "nonce too low" in said, said
    assert words.spent.format(seq=3) in said and not dropped, said
    assert {"push": "the endpoint counts epoch 3's nonce as spent",
            "reanchor": "epoch 3 was sent again and may still land"}[command] in said, said

    endpoint.refuse_sends("replacement transaction underpriced")
    said = send()
    assert "the epoch was not taken and cannot land" in said and dropped == ["journal"], said

    sender.anchor = Anchor(ChainConfig((closed_port_url(),), 31337, "0x" + "11" * 20, 1, 0.5,
                                       rpc_retries=False), RpcTracker())
    said = send()
    assert said.startswith("RPC_UNAVAILABLE") and words.never_sent.format(seq=3) in said, said
