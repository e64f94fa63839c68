"""A chain read that times out on its own short bound does not make later reads that wait
longer skip the endpoint (kint.chain.rpc.RpcTracker.unavailable).

`kint status` reads the session key's facts within KINT_VERIFY_HEAD_SECONDS
(session_facts.py). A status run with KINT_VERIFY_HEAD_SECONDS=0.5, against an endpoint
that takes a second to give a balance, timed out there, and the tracker marked the space's
primary endpoint failed for 30 s: every verify of those 30 s, whose head read waits 2 s,
skipped the head ("chain head unavailable: rpc unresponsive") from an endpoint that
answered its head read at once. A push is not concerned: only the head read
(chain_head.py) asks the tracker before it reads. A call that ran out of KINT_RPC_TIMEOUT
three times still makes every head read skip the endpoint for 30 s
(tests/test_chain_faults.py, test_a_hung_rpc_stalls_only_its_own_tenant).

The test holds the balance until it lets it go (the proxy's `hang_methods`), so the
status's balance read times out whatever its bound, and gives the status a bound of
several seconds, so that its head read, which comes first, is answered within it on a
loaded box; the verify after it waits longer still (its own KINT_VERIFY_HEAD_SECONDS).
No step but the held one races a clock.

Real parts: the session's devchain (anvil), the test supervisor and its worker, the real
CLI; a loopback RPC proxy (tests/rpc_proxy.py) that holds eth_getBalance alone.
"""

from __future__ import annotations

import json

from chain_machines import machine_behind_proxy, ok
from conftest import write_rules


# The status's bound: long enough for its own head read, which comes first and must be
# answered for the key's facts to be read at all, on a loaded 2-core box (0.5 s, then
# 1.5 s, were missed there: no `session_key`, then no `chain_head`). The balance read, held
# by the proxy, times out on it however long it is.
STATUS_BOUND_S = "5"
# Verify's head budget: longer than the status's, which is the point (the default 2 s was
# longer than the 0.5 s of the status that made verify skip the head).
VERIFY_BOUND_S = "10"


def test_a_status_read_timed_out_on_its_short_bound_does_not_make_verify_skip_the_head(
        tmp_path, chain_home):
    with machine_behind_proxy(tmp_path, chain_home) as (sb, proxy):
        write_rules(sb.sibyl_db, sb.tenant, gate="a row to verify")
        ok(sb.kint("push"))
        proxy.set_mode("hang_methods", methods=["eth_getBalance"])
        bound = {"KINT_VERIFY_HEAD_SECONDS": STATUS_BOUND_S}
        status = json.loads(ok(sb.kint("status", "--json", env=bound)).stdout)
        proxy.forward()  # the held balance read is let go: no read of it is left to come
        assert status["chain_head"] is not None, status  # the premise: its head was read
        assert (f"KINT_VERIFY_HEAD_SECONDS={STATUS_BOUND_S}s"
                in status["session_key"]["error"]), status
        # A read with the same short bound still skips the endpoint it just timed out on
        # (status reads the head before the key's facts).
        again = json.loads(ok(sb.kint("status", "--json", env=bound)).stdout)
        assert again["chain_head_unavailable"] == "rpc unresponsive", again
        # Within the tracker's 30 s: verify's head read waits longer, and is answered.
        verified = json.loads(ok(sb.kint("verify", "gate", "--json", env={
            "KINT_VERIFY_HEAD_SECONDS": VERIFY_BOUND_S})).stdout)
        assert verified["head_unavailable"] is None, verified
        assert verified["chain_head"] is not None, verified
