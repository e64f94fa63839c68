"""The previous session key's hole filler (kint/tenant_worker/former_key.py `fill_below`)
against an endpoint that answers its filler "replacement transaction underpriced".

That answer comes when the endpoint's pool already holds a transaction at the hole (the
filler an earlier settlement sent, read through an endpoint whose count lags behind its
pool, as a load balancer's nodes do) and the filler signed again bids less than 10% over
it. anvil neither lags nor keeps two views, so the refusal is a stand-in: a loopback proxy
(tests/rpc_proxy.py) in front of the session's real anvil answers every raw send with it,
as such an endpoint would, and forwards every read (the counts, the gas price) to anvil.
The key is a fresh one, its count 0: nonce 0 is the hole below nonce 1.

Then `waits_elsewhere`, the look at the space's other endpoint before a hole is filled:
one that answers another chain's id (the proxy's `chain_id`) is not heard, and one that
cannot be reached (a closed loopback port) is asked once, without the retries of normal
reads, and counted as unanswered, which keeps a nonce seen waiting there waiting within
the bound (`deferral`). And the receipt wait (`wait`) whose look saw such a deferral and
whose endpoint then fails: the proxy answers the key's counts 0 (its `other_chain` mode on
the space's own chain id: a pool that has not had the key's transactions) while the
session's anvil, the second endpoint, counts them, then answers every receipt read 429.
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from unittest import mock

import pytest
from eth_account import Account

from kint.chain.anchor import Anchor
from kint.chain.config import devchain_record, load_chain_config
from kint.chain.rpc import RpcTracker
from kint.protocol import ProtocolError
from kint.tenant_worker.former_key import FormerKey, Look
from rpc_proxy import RpcProxy


@pytest.fixture
def proxy(chain_home):
    import json

    record = json.loads(devchain_record(chain_home).read_text())
    made = RpcProxy(record["rpc_url"]).start()
    try:
        yield made
    finally:
        made.stop()


def _former(chain_home, proxy, tmp_path) -> tuple[FormerKey, object]:
    key = Account.create()
    config = replace(load_chain_config(chain_home), rpc_urls=(proxy.url,))
    former = FormerKey(Anchor(config, RpcTracker()), key.address, tmp_path, "a" * 16)
    return former, key


def test_a_filler_refused_as_an_underpriced_replacement_is_not_a_refusal(chain_home, proxy,
                                                                         tmp_path, caplog):
    """The endpoint holds a transaction at the hole already: the filler signed again is not
    sent over it, and the settlement is not refused; the wait goes on and says the nonce
    waits. It was refused ("the endpoint refused the transaction that fills it"), the
    journal kept, at every push and pull until the endpoint caught up."""
    former, key = _former(chain_home, proxy, tmp_path)
    proxy.set_mode("error_methods", methods=["eth_sendRawTransaction"],
                   message="replacement transaction underpriced")
    with mock.patch.object(FormerKey, "account", return_value=key), \
            caplog.at_level(logging.INFO, logger="kint.worker"):
        assert former.fill_below(1) == []
    assert (f"nonce 0 of the previous session key {key.address} already waits at the "
            f"endpoint: not filled again") in caplog.text


def test_a_filler_refused_for_another_reason_is_still_a_refusal(chain_home, proxy, tmp_path):
    """Any other refusal of the filler (here a price under the pool's floor, "transaction
    underpriced", which names no transaction waiting) still refuses, keeping the journal."""
    former, key = _former(chain_home, proxy, tmp_path)
    proxy.set_mode("error_methods", methods=["eth_sendRawTransaction"],
                   message="transaction underpriced")
    with mock.patch.object(FormerKey, "account", return_value=key), \
            pytest.raises(ProtocolError) as refused:
        former.fill_below(1)
    assert "the endpoint refused the transaction that fills it" in str(refused.value)


def _looking_elsewhere(chain_home, tmp_path, other_url: str) -> tuple[FormerKey, str]:
    """A fresh key whose count is 3 on the session's anvil, as a FormerKey sending through
    that anvil with `other_url` as the space's second endpoint: (it, its address)."""
    config = load_chain_config(chain_home)
    anvil = Anchor(config, RpcTracker())
    key = Account.create()
    anvil.provider.make_request("anvil_setNonce", [key.address, hex(3)])
    config = replace(config, rpc_urls=(config.rpc_urls[0], other_url))
    return FormerKey(Anchor(config, RpcTracker()), key.address, tmp_path, "a" * 16), key.address


def test_an_endpoint_of_another_chain_is_not_asked_whether_the_nonce_waits(chain_home, proxy,
                                                                             tmp_path):
    """The second endpoint counts the key's transactions past the hole (the proxy forwards
    the counts to anvil), but answers eth_chainId with another chain's id: what the same
    address sent on another chain is not a transaction at the space's hole, and taking it
    for one deferred the fill for ever. The same endpoint on the space's chain is heard."""
    former, _ = _looking_elsewhere(chain_home, tmp_path, proxy.url)
    assert former.waits_elsewhere(1) == Look(proxy.url)
    proxy.set_mode("forward", chain_id=4242)
    assert former.waits_elsewhere(1) == Look()


def test_a_silent_other_endpoint_is_asked_once(chain_home, tmp_path):
    """The look at another endpoint is advice inside the receipt wait: an endpoint that
    cannot be reached is not tried again (the normal reads' pauses before each retry are
    never slept), where a silent one cost three timeouts and their pauses at every look."""
    from rpc_proxy import closed_port_url

    former, _ = _looking_elsewhere(chain_home, tmp_path, closed_port_url())
    with mock.patch("kint.chain.rpc.time.sleep") as slept:
        assert former.waits_elsewhere(1) == Look(unanswered=True)
    assert slept.call_count == 0


def test_an_unanswered_look_keeps_a_nonce_seen_waiting_within_the_bound(chain_home, proxy,
                                                                        tmp_path):
    """The other endpoint held a transaction at the hole, then does not answer one look (a
    rate limit here): the fill still waits for it, counted from when it was first seen and
    named by the endpoint it was seen at. Taken for "holds nothing", that one silent look
    had the fill replace it at once (or refuse, "never sent") and forgot the first sighting.
    An endpoint never seen holding it defers nothing when it does not answer."""
    former, _ = _looking_elsewhere(chain_home, tmp_path, proxy.url)
    first = former.deferral(1)
    assert first is not None and not first.over and first.url == proxy.url
    proxy.set_mode("rate_limited", methods=["eth_getTransactionCount"], count=100)
    silent = former.deferral(1)
    assert silent is not None and not silent.over and silent.unanswered, silent
    assert silent.url == proxy.url and silent.waited_s >= first.waited_s
    assert "(which did not answer the last look)" in silent.words(1)
    other, _ = _looking_elsewhere(chain_home, tmp_path, proxy.url)
    assert other.deferral(1) is None  # another key, never seen waiting



def _wait_after_a_deferral(chain_home, proxy, tmp_path, after_look,
                           anchor_type: type[Anchor] = Anchor):
    """A previous key's receipt wait (`wait`) for a transaction no block holds, whose look
    leaves the hole to a transaction waiting at the space's other endpoint: the session's
    anvil counts 3 of the key's nonces, the proxy the space sends through counts none (its
    `other_chain` mode on the space's own chain id), as an endpoint whose pool has not had
    them. `after_look` runs right after each look that saw the deferral. Returns what the
    wait raised and the key's address."""
    from kint.chain.rpc import RpcUnavailable
    from kint.tenant_worker.session_sender import Signed

    config = load_chain_config(chain_home)
    key = Account.create()
    Anchor(config, RpcTracker()).provider.make_request("anvil_setNonce",
                                                       [key.address, hex(3)])
    config = replace(config, rpc_urls=(proxy.url, config.rpc_urls[0]))
    proxy.set_mode("other_chain", chain_id=config.chain_id)

    class Looking(FormerKey):
        def fill_below(self, nonce, deferred=None):
            filled = super().fill_below(nonce, deferred)
            assert deferred, "the look saw no deferral"
            after_look()
            return filled

    former = Looking(anchor_type(config, RpcTracker()), key.address, tmp_path, "a" * 16)
    with pytest.raises(RpcUnavailable) as raised:
        former.wait("0x" + "ab" * 32, Signed(nonce=1, raw=b""))
    return raised.value, key.address


def test_an_endpoint_failing_after_a_deferral_keeps_the_endpoints_hint(chain_home, proxy,
                                                                        tmp_path, monkeypatch):
    """The receipt wait's look left the hole to a transaction waiting at the space's other
    endpoint, then the endpoint the space sends through fails (429 on every receipt read):
    the wait ends RpcUnavailable, not DeferredWait, whose hint (pass the transaction on,
    pull once the bound passed) is for a wait the endpoints answered; the mapped refusal
    carries RPC_UNAVAILABLE's own hint, to check the endpoint. Taken for a timeout, it sent
    the user past an endpoint that had failed."""
    from kint.protocol.errors import ErrorCode
    from kint.protocol.hints import DEFERRED_FILL_HINT
    from kint.tenant_worker.epoch_send import RESEND_WORDS, endpoint_failed
    from kint.tenant_worker.former_key_wait import DeferredWait

    monkeypatch.setenv("KINT_NONCE_RETRY_SECONDS", "1")
    failed, address = _wait_after_a_deferral(
        chain_home, proxy, tmp_path,
        lambda: proxy.set_mode("rate_limited", methods=["eth_getTransactionReceipt"],
                               count=1000))
    assert not isinstance(failed, DeferredWait), failed
    assert str(failed).startswith("waiting for a receipt: the endpoint is rate limiting")
    assert (f"previous session key {address}: nonce 0 of that key has waited at the "
            f"endpoint") in str(failed), failed
    refusal = endpoint_failed(failed, True, 2, RESEND_WORDS)
    assert refusal.code == ErrorCode.RPC_UNAVAILABLE and refusal.hint != DEFERRED_FILL_HINT
    assert refusal.hint == ProtocolError(ErrorCode.RPC_UNAVAILABLE, "").hint, refusal.hint


class _ShortWait(Anchor):
    """The session's chain with a receipt wait of WAIT_S where the caller gives none (as
    tests/support/kint_test_faults.py's KINT_TEST_RECEIPT_WAIT does for a worker)."""

    def wait(self, tx_hash, timeout_s=None, **kwargs):
        return super().wait(tx_hash, WAIT_S if timeout_s is None else timeout_s, **kwargs)


# The wait's one look comes by half of it (3 s); the next (at KINT_NONCE_RETRY_SECONDS, 10 s,
# after it) never comes, so what the look saw is the last look's when the wait runs out.
WAIT_S = 6.0


@pytest.mark.parametrize("cleared", [True, False], ids=["cleared", "still-behind"])
def test_a_wait_that_runs_out_after_the_hole_cleared_says_so_plainly(chain_home, proxy,
                                                                      tmp_path, monkeypatch,
                                                                      cleared):
    """The receipt wait's only look left the hole to a transaction waiting at the other
    endpoint, and then the wait runs out (no receipt: the hash is no transaction). When
    the endpoint the space sends through has since had the key's nonces (the proxy
    forwards the counts after the look), the wait ends in the plain timeout's words, not
    DeferredWait's, whose hint sent the user to pass on a transaction that had arrived;
    still behind, it ends in DeferredWait as before."""
    from kint.chain.rpc import ReceiptTimedOut
    from kint.tenant_worker.former_key_wait import DeferredWait

    monkeypatch.setenv("KINT_NONCE_RETRY_SECONDS", "10")
    ran_out, _ = _wait_after_a_deferral(chain_home, proxy, tmp_path,
                                        proxy.forward if cleared else lambda: None,
                                        anchor_type=_ShortWait)
    assert isinstance(ran_out, ReceiptTimedOut) is cleared, ran_out
    assert isinstance(ran_out, DeferredWait) is not cleared, ran_out
    assert ("it waits behind a nonce" in str(ran_out)) is not cleared, ran_out
