"""An exit push that its bound (or the worker's stop) cut before its first epoch anchored
nothing: it must not end the store watcher's wait after a failed push of its own
(push_backoff.py), which only a push that went through ends (push.went_through). It did:
the result came back without an error, so the watcher's backoff was dropped, its log said
the push "went through after 1 failed attempt (the exit push)", and the watcher tried the
endpoint it had just failed on at its next tick (push.py, `cut_short` with no epochs).

Real parts: the devchain's anvil behind a loopback RPC proxy (tests/rpc_proxy.py) that hangs
every call while the watcher pushes, the test supervisor and the space's worker with its
watcher (a session's `attach`), a real kint-server over stdio (tests/mcp_session.py) that
writes through its tool and closes. The exit push's bound is set to nothing through the
environment (tests/support/kint_test_timings.py: KINT_TEST_EXIT_BOUND_S), so its first
epoch is never started: the cut the bound makes whatever the box's speed.
"""

from __future__ import annotations

from chain_machines import machine_behind_proxy
from mcp_session import a_session_writes_and_closes, exit_push_said
from test_watcher_backoff import _failure, failed_watcher_push

WAIT = {"timeout": 90, "interval": 0.2}
# The watcher's wait after its failure: far longer than the test, so nothing but a push
# that went through could end it while the exit push runs.
RETRY_S = 600
# The watcher's tick (KINT_TEST_POLL_MINIMUM_S lets it under 1 s), and its pushes' RPC
# timeout: its push through the hung proxy fails within a few seconds.
WORKER = {"KINT_POLL_SECONDS": "0.25", "KINT_TEST_POLL_MINIMUM_S": "0.25",
          "KINT_QUIET_SECONDS": "0", "KINT_RPC_TIMEOUT": "0.5",
          "KINT_TEST_EXIT_BOUND_S": "0"}
SANE_RPC_TIMEOUT_S = "30"  # the connect's and the exit push's: meant to go through


def test_an_exit_push_cut_before_its_first_epoch_leaves_the_watchers_wait(
        tmp_path, chain_home):
    """The watcher's push fails (the endpoint hangs) and its wait begins; the endpoint
    answers again, and a kint-server's exit push, its bound already over, is cut before its
    first epoch, anchoring nothing. The watcher's failure is still there, its one attempt,
    and the log says no push went through. With the cut push counted as gone through, the
    failure was dropped."""
    with machine_behind_proxy(tmp_path / "m", chain_home,
                              connect_settings={"KINT_RPC_TIMEOUT": SANE_RPC_TIMEOUT_S},
                              **WORKER) as (sb, proxy):
        db = sb.sibyl_db
        client, failed = failed_watcher_push(sb, proxy, "watching", RETRY_S, **WAIT)
        assert (failed["attempts"], failed["wait_s"]) == (1, RETRY_S), failed
        proxy.forward()

        a_session_writes_and_closes(sb, {**sb.env, "KINT_NO_WATCHER": "1",
                                         "KINT_RPC_TIMEOUT": SANE_RPC_TIMEOUT_S}, **WAIT)
        text = exit_push_said(sb, **WAIT)
        log_path = sb.kint_home / "supervisor.log"
        assert "exit push: anchored none of its 1 epoch(s); stopped before the first: too " \
               "little is left of its bound (0 s)" in text, text[-3000:]
        still = _failure(sb, db)
        assert still is not None and still["attempts"] == 1, still
        assert "push went through" not in log_path.read_text()
        client.storage.close()
