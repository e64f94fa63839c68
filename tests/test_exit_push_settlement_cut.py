"""The exit push's bound reaches its settlement of an earlier push's journal: the journal's
transaction, sent again (kint/tenant_worker/pending.py, `_send_again`), is waited for only
until the exit push's bound (its `until`: AnchorWrites.wait, WaitCut), where that receipt
wait ran its own 60 s past the bound, whatever the supervisor had answered (exit38 bounded
the epochs' own waits only).

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py), the test
supervisor and the space's worker, rows written through Sibyl's own client, the exit push
asked through kint's own client with a bound shorter than the worker's own 900 s. The
journal is a killed push's (tests/support/kint_test_faults.py: KINT_TEST_CRASH_FLAG's
`before_send`, a SIGKILL before its signed transaction is sent), and the restarted worker's
own settlement of it is held (KINT_TEST_HOLD_SETTLE) so that the exit push is what settles
it; the proxy answers every receipt read null (`unmined`, a block that does not come) while
anvil mines the re-sent transaction, so the re-send's receipt wait is one that only its
bound or its own 60 s can end. The second test rotates the session key between the kill
and the exit push (kint's own `rotate_session_key`, what `kint session-key rotate` runs):
the journal is then the previous key's, settled by that key's own receipt wait
(kint/tenant_worker/former_key.py, FormerKey.wait), which the bound must reach too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from unittest import mock

from web3 import Web3

from chain_machines import SESSION_SCRYPT_N, machine_behind_proxy
from conftest import write_store
from kint.chain.config import devchain_record
from kint.client_errors import KintError
from kint.custody.session_key import rotate_session_key, session_address
from mcp_session import exit_push_said
from test_exit_push_deadline import WAIT, asked_in_thread, settled_from_its_journal

# The exit push's request's bound as its client asks it: well under the re-send's own 60 s
# receipt wait, and long enough that a loaded box brings the push to its settlement's
# re-send within it (its premise: nothing of the push's own comes before that).
ASKED_S = 40
CUT = ("exit push: anchored nothing; stopped in the settlement of an earlier push's epoch 1, "
       "in the receipt wait of its transaction sent again: its bound came first; that epoch "
       "was sent again and may still land: its journal is settled by the next push or pull, "
       "which records it if it did; any row changes of this push stay in the store, "
       "unanchored, for the next push")


def test_the_exit_push_settling_a_killed_pushs_journal_stops_at_its_bound(tmp_path,
                                                                          chain_home):
    """A push killed before its send leaves its journal; the exit push that comes next sends
    the journal's transaction again and its receipt does not come: the wait ends at the
    exit push's bound, its line says it stopped in that settlement, and the journal is kept,
    which a pull then settles, recording the epoch from the chain (anvil mined it), not
    sending it again. Seen failing without the bound passed on (settle_journals' `until`):
    the wait ran its own 60 s and the exit push ended past its bound, `exit push not made
    (RPC_UNAVAILABLE): no confirmed receipt ... within 60s; epoch 1 was signed and may still
    land`, after the supervisor's TIMEOUT."""
    _cut_then_pulled(tmp_path, chain_home, lambda sb, journal: None)


def test_the_exit_push_settling_a_previous_session_keys_journal_stops_at_its_bound(
        tmp_path, chain_home):
    """As the test before, with `kint session-key rotate` between the kill and the exit
    push: the journal is the previous key's transaction, whose receipt wait is that key's
    own (FormerKey.wait, which reads the chain alone and fills holes below the nonce in its
    slow path), not the machine's sender's. The exit push's bound reaches it too: the wait
    ends there, SettleCut, the journal kept, and the pull records the epoch the old key's
    transaction anchored. The new key is not authorized: nothing of the cut or the pull
    signs with it, and a rotate is followed by `kint authorize` only later. Seen failing
    with FormerKey.wait's `until` not passed on to its receipt wait: it ran its own 60 s
    past the bound, `exit push not made (RPC_UNAVAILABLE): no confirmed receipt ...`."""

    def rotate(sb, journal: dict) -> None:
        old = session_address(sb.kint_home)
        assert journal["sender"] == old, journal
        with mock.patch.dict(os.environ, sb.env, clear=True):
            said_old, new = rotate_session_key(sb.kint_home, scrypt_n=SESSION_SCRYPT_N)
        assert said_old == old and new != old

    journal = _cut_then_pulled(tmp_path, chain_home, rotate)
    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    tx = "0x" + journal["tx"].removeprefix("0x")
    assert w3.eth.get_transaction(tx)["from"] == journal["sender"]


def _cut_then_pulled(tmp_path: Path, chain_home: Path,
                     between: Callable[..., None]) -> dict:
    """A push killed before its send, `between(sb, journal)` (the journal it left, as
    JSON), then the exit push cut at its bound in that journal's re-send's receipt wait,
    the journal kept, and a pull that records the epoch from the chain without sending it
    again: what the test before says. Returns the journal, and `tx`, the hash of the
    transaction epoch 1 was recorded from."""
    flag, hold = tmp_path / "crash.flag", tmp_path / "hold-settlement"
    with machine_behind_proxy(tmp_path / "m", chain_home, KINT_RPC_TIMEOUT="60",
                              KINT_TEST_CRASH_FLAG=str(flag),
                              KINT_TEST_HOLD_SETTLE=str(hold)) as (sb, proxy):
        db = sb.sibyl_db
        write_store(db, {"row": {"text": "in the push killed before its send"}},
                    tenant=sb.tenant)
        hold.write_text("held")
        flag.write_text("before_send")
        try:
            try:
                sb.call("push", db, timeout_s=120)
                raise AssertionError("the push was not killed at its send")
            except KintError as err:
                assert err.code == "WORKER_DOWN", err
            assert not flag.exists(), "the worker did not reach the step"
            journals = list(sb.kint_home.glob("pending-*.json"))
            assert len(journals) == 1, "the killed push's journal"
            journal = json.loads(journals[0].read_text())
            between(sb, journal)
            seen = len(proxy.calls)
            proxy.set_mode("unmined")
            answered = asked_in_thread(sb, db, ASKED_S)
            answered["thread"].join(ASKED_S + 60)  # answered at its deadline
            assert not answered["thread"].is_alive()
            # The supervisor's TIMEOUT, or the cut push's own reply where it reached the
            # supervisor first (the reply wins its `_expire` turn, timed.py): both at the
            # bound. Without the fix, the reply came 60 s into the wait, long after.
            refused = answered.get("refused")
            if "result" in answered:
                assert answered["result"]["message"] == CUT.removeprefix("exit push: "), answered
            else:
                assert refused is not None and refused.code == "TIMEOUT", answered
            text = exit_push_said(sb, **WAIT)
            assert CUT in text, text[-3000:]
            assert "eth_sendRawTransaction" in proxy.calls[seen:], proxy.calls[seen:]
            assert all(j.exists() for j in journals), "the journal kept for the next pull"
            assert not (sb.row(db)["head"] or {}).get("seq"), sb.row(db)  # none recorded
            proxy.forward()
            sends = proxy.calls.count("eth_sendRawTransaction")
            pulled = sb.kint("pull")
            assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        finally:
            hold.unlink(missing_ok=True)
        settled_from_its_journal(sb, db)
        assert proxy.calls.count("eth_sendRawTransaction") == sends, proxy.calls[seen:]
        space16 = journals[0].name.removeprefix("pending-").removesuffix(".json")
        meta = sb.kint_home / "epochs" / space16 / "00000001.meta.json"
        return {**journal, "tx": json.loads(meta.read_text())["tx"]}
