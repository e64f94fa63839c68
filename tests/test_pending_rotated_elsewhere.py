"""A previous session key's nonce below a journal's that the endpoint the space sends
through holds nothing at, while the space's other endpoint holds a transaction of that key
there, waiting (kint/tenant_worker/former_key.py `waits_elsewhere`): it was sent, so it is
neither "never sent" nor a hole to fill with a transfer to self, which would replace it.

The second endpoint is a real second node of the chain: an anvil this test starts, forked
from the session's anvil (tests/test_pending_rotated.py's machine A and its `Space`), with
no mining of its own, so a transaction sent to it waits in its pool and reaches the
session's anvil only when the test passes it on (as one node gossips to another). Its fork
is taken again just before (anvil_reset), so it holds the chain as the session's anvil has
it then. Nothing leaves 127.0.0.1.

Then the bound of that wait (`DEFER_STEPS` x KINT_NONCE_RETRY_SECONDS): a transaction the
other node never passes on is filled past it, or, with no key here to fill it, refused
naming the nonce and the endpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from web3 import Web3
from web3.exceptions import Web3RPCError

import test_pending_rotated
from chain_machines import kdb
from support.own_anvil import own_anvil
from test_pending_rotated import Space

from kint.chain.config import devchain_record
from kint.tenant_worker.head_lock import SETTLEMENT

# KINT_NONCE_RETRY_SECONDS for machine A in the bound's tests: the fill waits for a nonce at
# the other endpoint at most former_key.DEFER_STEPS of them (4 s here), after which they fill
# it or refuse. Nothing races the bound there (the transaction is never passed on before
# it), so it is short: each of those tests waits it out once.
RETRY_S = 2
# The first test's: its settlement never reaches the bound, whatever the box's load. Its
# receipt wait (KINT_TEST_RECEIPT_WAIT) ends after the wait's first look, by half the wait
# (6 s), which logs the line the test waits for, and before its second, WAITING_RETRY_S
# after the first ends (16 s on); the bound (20 s) is counted from the first sighting, which
# is that look (one rotate) or the check before the re-send (two), only one send earlier.
# What the test does after the line (pass the transaction on, then `kint pull` to settle
# what the settlement left, if its wait ran out) races nothing: it raced the bound, 5-10 s
# after the line, on a loaded box.
WAITING_RETRY_S = 10
RECEIPT_WAIT_S = 12
# The restart test's KINT_NONCE_RETRY_SECONDS and receipt wait: the wait's first look (by
# half the wait: 2.5 s) defers, its second comes SHORT_RETRY_S after the first has ended, so
# past the wait's end (5 s), and the bound (6 s) is not yet over at the first look: the wait
# runs out with the nonce deferred, inside the bound, at any load.
SHORT_RETRY_S = 3
SHORT_WAIT_S = 5
# A KINT_NONCE_RETRY_SECONDS as long as kint's 60 s receipt wait: the wait's first look comes
# by half the wait all the same (SHORT_WAIT_S here).
LONG_RETRY_S = 60


@pytest.fixture
def box(tmp_path, chain_home):
    """Machine A, its crash points and settlement hold (test_pending_rotated's)."""
    yield from test_pending_rotated.make_box(tmp_path, chain_home, str(RETRY_S))


def _waiting(tmp_path, chain_home, retry_s: int, wait_s: int):
    """`box` with `retry_s` and a receipt wait of `wait_s` (the file holds the seconds)."""
    wait = tmp_path / "receipt-wait"
    wait.write_text(str(wait_s))
    yield from test_pending_rotated.make_box(tmp_path, chain_home, str(retry_s),
                                             KINT_TEST_RECEIPT_WAIT=str(wait))


@pytest.fixture
def waiting_box(tmp_path, chain_home):
    """`box` with the first test's retry and receipt wait."""
    yield from _waiting(tmp_path, chain_home, WAITING_RETRY_S, RECEIPT_WAIT_S)


@pytest.fixture
def short_box(tmp_path, chain_home):
    """`box` with SHORT_RETRY_S and a receipt wait shorter than the bound (SHORT_WAIT_S)."""
    yield from _waiting(tmp_path, chain_home, SHORT_RETRY_S, SHORT_WAIT_S)


@pytest.fixture
def long_retry_box(tmp_path, chain_home):
    """`box` with LONG_RETRY_S and a receipt wait of SHORT_WAIT_S."""
    yield from _waiting(tmp_path, chain_home, LONG_RETRY_S, SHORT_WAIT_S)


@pytest.fixture
def node(chain_home):
    """A second anvil forked from the session's, mining nothing: (its URL, web3 on it,
    the session anvil's URL)."""
    upstream = json.loads(devchain_record(chain_home).read_text())["rpc_url"]
    with own_anvil("--fork-url", upstream, what="the fork") as (url, w3):
        yield url, w3, upstream


@pytest.mark.parametrize("rotates", [1, 2])
def test_a_nonce_that_waits_at_the_other_endpoint_is_not_filled_nor_called_never_sent(
        waiting_box, node, rotates):
    """The old key's nonce N-1 waits at the space's second endpoint (sent, not mined), and
    its push at N was sent through the first, where it waits behind N-1. Then one rotate
    (session.key.old opens: it could fill N-1) or two (it cannot). The settlement leaves
    N-1 alone and waits, its log saying N-1 waits at the other endpoint; once that
    transaction reaches the first endpoint both are mined and epoch 2 is recorded (by the
    settlement, or, its receipt wait run out, by the pull after it). With one rotate, N-1
    was filled by a transfer to self, the user's transaction at N-1 cancelled; with two,
    the push was refused at once, N-1 "never sent".

    The pull is sent while the settlement waits, and the transaction passed on once the
    pull is there: it waits for the worker's own settlement and then settles what is left,
    where it was refused BUSY ("a push, pull or connect is already running"), as CI's pull
    was when it came between the settlement's end and its letting go of the space."""
    url, other, upstream = node
    s = Space(waiting_box, f"elsewhere-{rotates}", "--rpc-urls", f"{upstream},{url}")
    since = s.w3.eth.block_number
    hole, entry = s.hole(s.old)
    old_key = s.key()
    journal = s.kill("after_send")
    assert journal["nonce"] == hole + 1
    other.provider.make_request("anvil_reset", [{"forking": {"jsonRpcUrl": upstream}}])
    other.provider.make_request("evm_setAutomine", [False])
    sent = old_key.sign_transaction({"to": s.owner, "value": 1, "gas": 21_000, "nonce": hole,
                                     "chainId": 31337, "gasPrice": 2 * s.w3.eth.gas_price})
    other.eth.send_raw_transaction(sent.raw_transaction)
    assert other.eth.get_transaction_count(s.old, "pending") == hole + 1
    assert s.w3.eth.get_transaction_count(s.old, "pending") == hole  # not at the first
    for _ in range(rotates - 1):
        s.rotate(authorize=False)
    s.rotate()
    entry.unlink()  # as the new key's first allocation does
    log = s.a.kint_home / "supervisor.log"
    said = (f"nonce {hole} of the previous session key {s.old} waits at the endpoint "
            f"{url}, not yet at the one this space sends through: not filled")
    with ThreadPoolExecutor(1) as pool:
        try:
            s.release()
            s.a.wait_for(lambda: said in log.read_text(), timeout=30,
                         what="the settlement saying the nonce waits at the other endpoint")
            assert "was never sent" not in log.read_text()
            assert s.pending.exists()
            pulling = pool.submit(kdb, s.a, s.db, "pull")
            # Its receipt wait has a few seconds left: the pull is in flight beside it
            # (on a box slow enough to start the command past them, the pull settles
            # the journal itself once the transaction is passed on below).
            s.a.wait_for(lambda: pulling.done() or any(
                op["name"] == "pull" for op in s.a.row(s.db)["ops"]), timeout=60,
                what="the pull in the worker")
        finally:
            # The other node passes it on: both are mined, and the settlement records
            # epoch 2 (refused as a spent nonce when a filler took it: the assertions
            # below say so), or the pull does, once the settlement's receipt wait has run
            # out.
            with contextlib.suppress(Web3RPCError):
                s.w3.eth.send_raw_transaction(sent.raw_transaction)
        pulled = pulling.result()
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert not s.pending.exists()
    assert "was never sent" not in log.read_text()
    assert s.mined_at(s.old, hole, since)["hash"] == sent.hash
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert s.meta(2)["tx"] == Web3.keccak(hexstr=journal["raw_tx"]).hex().removeprefix("0x")


def _waits_at_the_other_node(box, node, profile: str, rotates: int):
    """The first test's start, the transaction at N-1 never passed on: (the space, the
    hole, the journal, the signed transaction at the other node, the block before)."""
    url, other, upstream = node
    s = Space(box, profile, "--rpc-urls", f"{upstream},{url}")
    since = s.w3.eth.block_number
    hole, entry = s.hole(s.old)
    old_key = s.key()
    journal = s.kill("after_send")
    other.provider.make_request("anvil_reset", [{"forking": {"jsonRpcUrl": upstream}}])
    other.provider.make_request("evm_setAutomine", [False])
    sent = old_key.sign_transaction({"to": s.owner, "value": 1, "gas": 21_000, "nonce": hole,
                                     "chainId": 31337, "gasPrice": 2 * s.w3.eth.gas_price})
    other.eth.send_raw_transaction(sent.raw_transaction)
    for _ in range(rotates - 1):
        s.rotate(authorize=False)
    s.rotate()
    entry.unlink()  # as the new key's first allocation does
    return s, hole, journal, sent, since


def test_a_nonce_never_passed_on_from_the_other_endpoint_is_filled_past_the_bound(box, node):
    """The transaction at N-1 stays in the other node's pool: the fill waits for it
    FormerKey's bound (DEFER_STEPS x KINT_NONCE_RETRY_SECONDS), then fills N-1 with a
    transfer to self signed by session.key.old (one rotate: it opens), the log naming the
    nonce and the endpoint it waited at, and epoch 2 is recorded. Before, the fill waited
    for it at every look, the 60 s receipt wait ran out in "may still land", and so did
    every push and pull after it."""
    url = node[0]
    s, hole, journal, sent, _ = _waits_at_the_other_node(box, node, "never-passed-on", 1)
    log = s.a.kint_home / "supervisor.log"
    s.settled()
    said = f"nonce {hole} of that key has waited at the endpoint {url} for "
    line = next(ln for ln in log.read_text().splitlines() if said in ln)
    assert (f"(the previous session key {s.old}): filled with a transfer to self, which "
            f"replaces it") in line, line
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert s.meta(2)["tx"] == Web3.keccak(hexstr=journal["raw_tx"]).hex().removeprefix("0x")
    assert s.w3.eth.get_transaction_count(s.old) == hole + 2
    with pytest.raises(Web3RPCError):  # the other node's transaction can no longer land
        s.w3.eth.send_raw_transaction(sent.raw_transaction)


def test_a_nonce_never_passed_on_that_no_key_here_can_fill_is_named_past_the_bound(box,
                                                                                   node):
    """The same with two rotates (session.key.old is another key): past the bound the
    settlement refuses, naming the nonce and the endpoint it waits at and what to do, and
    the next pull refuses so at once, keeping the journal; once the transaction is passed
    on, the pull records epoch 2. Before, each waited out the receipt wait and said "may
    still land", the endpoint and the nonce only in the log."""
    url, _, _ = node
    s, hole, _, sent, since = _waits_at_the_other_node(box, node, "never-passed-on-2", 2)
    log = s.a.kint_home / "supervisor.log"
    said = f"nonce {hole} of that key has waited at the endpoint {url} for "
    s.release()
    s.a.wait_for(lambda: "is left for the next push, pull" in log.read_text()
                 and said in log.read_text(), timeout=60,
                 what="the settlement refused past the bound")
    assert s.pending.exists()
    out = kdb(s.a, s.db, "pull")
    assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stdout + out.stderr
    assert said in out.stderr and "has not reached the endpoint this space sends through" \
        in out.stderr, out.stderr
    assert (f"hint: send the transaction waiting at {url} through the endpoint this space "
            f"sends through too") in out.stderr, out.stderr
    assert s.pending.exists()
    s.w3.eth.send_raw_transaction(sent.raw_transaction)  # passed on: both are mined
    pulled = kdb(s.a, s.db, "pull")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert not s.pending.exists()
    assert s.chain_head()[:2] == s.mirror_head() and s.mirror_head()[0] == 2
    assert s.mined_at(s.old, hole, since)["hash"] == sent.hash


def test_the_bound_is_the_journals_and_a_wait_it_outlives_says_so(short_box, node):
    """Two rotates (nothing here fills N-1), the transaction at N-1 never passed on, and a
    receipt wait shorter than the bound (as KINT_NONCE_RETRY_SECONDS >= 20 makes it against
    the 60 s wait). The pull's wait runs out with N-1 deferred: its refusal names the nonce,
    the endpoint and the bound beside "may still land" (it said "may still land" alone).
    Then the worker is killed and restarted: once the bound has passed since the first
    sighting, the next pull refuses at once, naming the endpoint, with no new look that
    defers. The sighting was in the worker's memory: the restarted worker began the bound
    again, sent and waited once more, the refusal "may still land" again."""
    url = node[0]
    s, hole, _, sent, _ = _waits_at_the_other_node(short_box, node, "bound-kept", 2)
    log = s.a.kint_home / "supervisor.log"
    deferring = (f"nonce {hole} of the previous session key {s.old} waits at the endpoint "
                 f"{url}, not yet at the one this space sends through: not filled")
    waited = f"nonce {hole} of that key has waited at the endpoint {url} for "
    out = kdb(s.a, s.db, "pull")  # the restarted worker's own settlement is still held
    ended = time.monotonic()
    assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stdout + out.stderr
    assert "may still land" in out.stderr and waited in out.stderr, out.stderr
    assert f"behind a nonce of the previous session key {s.old}" in out.stderr, out.stderr
    _says_the_deferrals_hint(out.stderr)
    looks = log.read_text().count(deferring)
    assert looks >= 1 and s.pending.exists()
    assert json.loads(s.pending.read_text())["deferred"][0][:1] == [hole]
    pid = s.a.row(s.db)["pid"]
    os.kill(pid, signal.SIGKILL)  # its successor's start settlement is held too
    s.a.wait_for(lambda: s.a.row(s.db)["pid"] not in (None, pid), timeout=30,
                 what="the restarted worker")
    # `kint supervisor status` names it as a BUSY does, which sends the user there to see
    # it (it said "resolve_pending").
    s.a.wait_for(lambda: (s.a.row(s.db)["op"] or {}).get("name") == SETTLEMENT, timeout=30,
                 what="the held settlement in flight, by its name")
    time.sleep(max(0.0, ended + 2 * SHORT_RETRY_S - time.monotonic()))  # the bound has passed
    out = kdb(s.a, s.db, "pull")
    assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stdout + out.stderr
    assert waited in out.stderr and (f"hint: send the transaction waiting at {url} through "
                                     f"the endpoint this space sends through") in out.stderr, \
        out.stderr
    assert log.read_text().count(deferring) == looks
    s.w3.eth.send_raw_transaction(sent.raw_transaction)  # passed on: both are mined
    s.release()
    pulled = kdb(s.a, s.db, "pull")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert not s.pending.exists()


def _says_the_deferrals_hint(stderr: str) -> None:
    """The refusal of a wait that ran out behind the deferral gives its own hint (what
    frees the way, and the setting that bounds the wait), not the endpoints' check: they
    answered, and "try again" met the same wait (review of session 27)."""
    from kint.protocol.errors import SPACE_RPC_HINT
    from kint.protocol.hints import DEFERRED_FILL_HINT

    assert f"hint: {DEFERRED_FILL_HINT}" in stderr, stderr
    assert SPACE_RPC_HINT not in stderr, stderr


def test_a_retry_setting_as_long_as_the_receipt_wait_still_looks_within_it(long_retry_box,
                                                                           node):
    """KINT_NONCE_RETRY_SECONDS at 60: the receipt wait's slow path ran first at 60 s, so a
    wait of 60 s (here SHORT_WAIT_S) ended before it, the nonce at the other endpoint never
    seen in that wait, and the refusal said "may still land" alone. Its first look now
    comes by half the wait: the refusal names the nonce and the endpoint, with the
    deferral's hint. Two rotates, so no key fills it; the check before the re-send looked
    once too (the journal's sighting), which the wait's refusal did not name."""
    url = node[0]
    s, hole, _, sent, _ = _waits_at_the_other_node(long_retry_box, node, "long-retry", 2)
    log = s.a.kint_home / "supervisor.log"
    deferring = (f"nonce {hole} of the previous session key {s.old} waits at the endpoint "
                 f"{url}, not yet at the one this space sends through: not filled")
    out = kdb(s.a, s.db, "pull")  # the restarted worker's own settlement is still held
    assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stdout + out.stderr
    assert f"nonce {hole} of that key has waited at the endpoint {url} for " in out.stderr \
        and "(the bound is 2 x KINT_NONCE_RETRY_SECONDS: 2 min here)" in out.stderr, \
        out.stderr
    assert deferring in log.read_text()
    _says_the_deferrals_hint(out.stderr)
    s.w3.eth.send_raw_transaction(sent.raw_transaction)  # passed on: both are mined
    s.release()
    pulled = kdb(s.a, s.db, "pull")
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert not s.pending.exists()
