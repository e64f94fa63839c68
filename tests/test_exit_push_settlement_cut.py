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
bound or its own 60 s can end.
"""

from __future__ import annotations

from chain_machines import machine_behind_proxy
from conftest import write_store
from kint.client_errors import KintError
from mcp_session import exit_push_said
from test_exit_push_deadline import WAIT, asked_in_thread

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
            assert journals, "the killed push's journal"
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
        sb.wait_for(lambda: (sb.row(db)["head"] or {}).get("seq") == 1,
                    what="epoch 1, settled from its journal, the head", **WAIT)
        assert not list(sb.kint_home.glob("pending-*.json"))
        log_path = sb.kint_home / "supervisor.log"
        sb.wait_for(lambda: "a push killed mid-way had landed; recorded epoch 1"
                    in log_path.read_text(), what="the settlement's line", **WAIT)
        assert proxy.calls.count("eth_sendRawTransaction") == sends, proxy.calls[seen:]
