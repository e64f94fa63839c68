"""A space's RPC tracker keeps each endpoint's calls and failures apart (kint/chain/rpc.py):
a failure of another endpoint than the space's primary (one `connect --rpc-urls` tried, a
cold start's second opinion) neither skips verify's head read nor shows the space's
endpoint as down, and the heartbeat names the endpoint a call in flight waits on. Its
records are bounded, and verify's head read asks it once. The primary is a loopback
endpoint answering a zero head; the other a port nothing listens on, or one that never answers."""

from __future__ import annotations

import socket
import threading
from typing import Any, Iterator

import pytest
import requests

from rpc_proxy import ScriptedEndpoint, closed_port_url
from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig
from kint.chain.rpc import MAX_OTHER_RECORDS, RpcTracker, RpcUnavailable, TrackedHTTPProvider
from kint.render import _rpc
from kint.tenant_worker.chain_head import ChainHeadSource

SPACE = "22" * 32
OWNER = "0x" + "33" * 20


@pytest.fixture
def primary() -> Iterator[ScriptedEndpoint]:
    server = ScriptedEndpoint()
    server.answers["eth_call"] = "0x" + "00" * 96  # head(): no epoch yet
    yield server
    server.stop()


def _chain(*urls: str) -> ChainConfig:
    return ChainConfig(tuple(urls), 31337, "0x" + "11" * 20, 1, 0.5, rpc_retries=False)


def test_another_endpoints_failure_leaves_the_primary_read(primary):
    """An endpoint tried through the space's tracker that fails (here: refused) made the
    primary count as unresponsive for 30 s: verify's head read was skipped ("rpc
    unresponsive") and the heartbeat said the space's RPC was down, while the primary
    answered. Now the head is read, and the heartbeat says the primary is ok."""
    tracker = RpcTracker()
    other = closed_port_url()
    chain = _chain(primary.url, other)
    source = ChainHeadSource(chain, tracker, lambda config: Anchor(config, tracker), OWNER,
                             SPACE)
    assert source.read(1.0).head is not None
    with pytest.raises(RpcUnavailable):
        Anchor(_chain(other), tracker).head(OWNER, SPACE)  # connect --rpc-urls OTHER
    with pytest.raises(RpcUnavailable):
        Anchor(chain, tracker, 1).head(OWNER, SPACE)  # a cold start's second opinion
    reading = source.read(1.0)
    assert reading.head is not None and reading.head.seq == 0, reading
    assert tracker.beat(chain.rpc_urls) == {"ok": True}
    assert tracker.unresponsive(other)


def test_the_heartbeat_names_the_endpoint_a_call_waits_on(primary):
    """The oldest call in flight is named with the endpoint it waits on, by its place in
    the space's list (a cold start's second opinion: "second"; one that is not the space's:
    "other"), and `kint supervisor status` shows it beside the call; the primary's own
    shows as before."""
    tracker = RpcTracker()
    other = closed_port_url()
    urls = (primary.url, "http://127.0.0.1:1")
    token = tracker.begin("eth_call", urls[1])
    beat = tracker.beat(urls)
    assert beat is not None and beat["call"] == "eth_call" and beat["endpoint"] == "second"
    assert _rpc({"rpc": beat}).endswith("(second rpc)"), _rpc({"rpc": beat})
    assert not tracker.unresponsive(urls[0], stuck_after_s=0.0)
    tracker.end(token, False, "ReadTimeout")
    assert tracker.beat(urls) is None and not tracker.unresponsive(urls[0])
    token = tracker.begin("eth_chainId", other)
    assert tracker.beat(urls)["endpoint"] == "other"
    tracker.end(token, True)
    token = tracker.begin("eth_blockNumber", urls[0])
    assert tracker.beat(urls)["endpoint"] == "primary"
    assert "rpc)" not in _rpc({"rpc": tracker.beat(urls)})
    tracker.end(token, False, "ReadTimeout")
    assert "down_since_s" in tracker.beat(urls) and tracker.unresponsive(urls[0])


def _called(tracker: RpcTracker, endpoint: str, ok: bool) -> None:
    tracker.end(tracker.begin("eth_call", endpoint), ok, None if ok else "ReadTimeout")


def test_the_trackers_records_are_bounded():
    """Each endpoint tried through a space's tracker kept its record for the worker's
    life: `connect --rpc-urls` run with one endpoint after another grew it without end.
    Of endpoints not the space's, the least recently used go past MAX_OTHER_RECORDS (the
    space's own never do); a change of the space's endpoints drops the records of the old
    ones and forgets every failure, a success still said."""
    tracker = RpcTracker()
    own = ("http://127.0.0.1:1/own", "http://127.0.0.1:1/second")
    tracker.use(own, changed=False)
    _called(tracker, own[0], True)
    _called(tracker, own[1], False)
    others = [f"http://127.0.0.1:1/tried-{n}" for n in range(MAX_OTHER_RECORDS + 5)]
    _called(tracker, others[0], False)
    for url in others[1:]:
        _called(tracker, url, False)
        _called(tracker, others[0], False)  # used again: kept as the most recent
    assert len(tracker._records) == len(own) + MAX_OTHER_RECORDS
    assert tracker.unresponsive(others[0]) and tracker.unresponsive(others[-1])
    assert not tracker.unresponsive(others[1]), "the least recently used stayed"
    assert tracker.beat(own) == {"ok": True} and tracker.unresponsive(own[1])

    tracker.use(own[:1], changed=True)
    assert set(tracker._records) == {own[0]}
    assert not tracker.unresponsive(own[1]) and tracker.beat(own[:1]) == {"ok": True}


class _CountingLock:
    """A real lock that counts how often it is taken."""

    def __init__(self) -> None:
        self.lock, self.taken = threading.Lock(), 0

    def __enter__(self) -> Any:
        self.taken += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.lock.__exit__(*exc)


def test_a_head_read_skipped_for_an_unresponsive_primary_takes_the_lock_once():
    """Verify's head read asks whether the primary is unresponsive and, when it is, why:
    each question took the tracker's lock twice (the calls in flight, then the record),
    four holds where one reads both. The read skipped here holds it once."""
    tracker = RpcTracker()
    primary = closed_port_url()
    _called(tracker, primary, False)
    counting = _CountingLock()
    tracker._lock = counting  # type: ignore[assignment]
    source = ChainHeadSource(_chain(primary), tracker, lambda config: Anchor(config, tracker),
                             OWNER, SPACE)
    assert source.read(1.0).unavailable == "rpc unresponsive"
    assert counting.taken == 1


@pytest.fixture
def hung() -> Iterator[str]:
    """The URL of a loopback socket that takes connections (the kernel's backlog) and never
    answers: every read of it times out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_a_shorter_reads_timeout_leaves_a_standing_rpc_timeout_failure(hung):
    """Three tries of KINT_RPC_TIMEOUT that ran out count for every head read for 30 s. A
    one-try read of a shorter bound that then timed out on the same endpoint (`kint
    doctor`'s, with KINT_RPC_TIMEOUT=1) replaced the record's bound with its own, and
    verify's head read, which waits 2 s, went to the hung endpoint and waited its budget
    out. The wider failure stands while it stands, its window running from its own time;
    a short bound on its own still does not count for a longer read."""
    tracker = RpcTracker()
    push = TrackedHTTPProvider(hung, 0.3, tracker)  # three tries, as a push's calls
    with pytest.raises(requests.exceptions.ReadTimeout):
        push.make_request("eth_blockNumber", [])
    assert tracker.unavailable(hung, bound_s=2.0) == "rpc unresponsive"
    failed_at = tracker.last_failure_at(hung)
    facts = TrackedHTTPProvider(hung, 0.1, tracker)
    facts.retry_pauses = ()  # one try, as a read its caller bounds
    with pytest.raises(requests.exceptions.ReadTimeout):
        facts.make_request("eth_blockNumber", [])
    assert tracker.unavailable(hung, bound_s=2.0) == "rpc unresponsive"
    # ...and stands for its own 30 s, not the later short failure's.
    assert tracker.last_failure_at(hung) == failed_at

    alone = RpcTracker()
    facts = TrackedHTTPProvider(hung, 0.1, alone)
    facts.retry_pauses = ()
    with pytest.raises(requests.exceptions.ReadTimeout):
        facts.make_request("eth_blockNumber", [])
    assert alone.unavailable(hung, bound_s=2.0) is None
    assert alone.unavailable(hung, bound_s=0.1) == "rpc unresponsive"
