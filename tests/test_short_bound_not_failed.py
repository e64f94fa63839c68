"""A chain read that times out on its own short bound does not make later reads that wait
longer skip the endpoint (kint.chain.rpc.RpcTracker.unavailable).

`kint status` reads the session key's facts within KINT_VERIFY_HEAD_SECONDS
(session_facts.py). A status run with KINT_VERIFY_HEAD_SECONDS=0.5, against an endpoint
that takes a second to give a balance, timed out there (the test: 1.5 s against 4 s), and
the tracker marked the space's primary endpoint failed for 30 s: every verify of those
30 s, whose head read waits 2 s, skipped the head ("chain head unavailable: rpc
unresponsive") from an endpoint that answered its head read at once. A push is not
concerned: only the head read
(chain_head.py) asks the tracker before it reads. A call that ran out of KINT_RPC_TIMEOUT
three times still makes every head read skip the endpoint for 30 s
(tests/test_chain_faults.py, test_a_hung_rpc_stalls_only_its_own_tenant).

Real parts: the session's devchain (anvil), the test supervisor and its worker, the real
CLI; a loopback RPC proxy (tests/rpc_proxy.py) that delays eth_getBalance alone.
"""

from __future__ import annotations

import json

from chain_machines import kjson, machine_behind_proxy, ok
from conftest import write_rules


# The status's bound: shorter than verify's 2 s head budget, which is the point, yet long
# enough for its own head read, which comes first and must be answered for the key's facts
# to be read at all (0.5 s was missed once on a loaded 2-core box: no `session_key`).
STATUS_BOUND_S = "1.5"
# How long the endpoint takes to give a balance: well past the status's bound.
BALANCE_DELAY_S = 4


def test_a_status_read_timed_out_on_its_short_bound_does_not_make_verify_skip_the_head(
        tmp_path, chain_home):
    with machine_behind_proxy(tmp_path, chain_home) as (sb, proxy):
        write_rules(sb.sibyl_db, sb.tenant, gate="a row to verify")
        ok(sb.kint("push"))
        proxy.set_mode("delay_methods", methods=["eth_getBalance"], seconds=BALANCE_DELAY_S)
        bound = {"KINT_VERIFY_HEAD_SECONDS": STATUS_BOUND_S}
        status = json.loads(ok(sb.kint("status", "--json", env=bound)).stdout)
        assert status["chain_head"] is not None, status  # the premise: its head was read
        assert (f"KINT_VERIFY_HEAD_SECONDS={STATUS_BOUND_S}s"
                in status["session_key"]["error"]), status
        # A read with the same short bound still skips the endpoint it just timed out on
        # (status reads the head before the key's facts).
        again = json.loads(ok(sb.kint("status", "--json", env=bound)).stdout)
        assert again["chain_head_unavailable"] == "rpc unresponsive", again
        # Within the tracker's 30 s: verify's head read waits its 2 s, and is answered.
        verified = kjson(sb, "verify", "gate")
        assert verified["head_unavailable"] is None, verified
        assert verified["chain_head"] is not None, verified
