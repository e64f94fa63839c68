"""`--over-skipped` anchors a snapshot over the gap the last pull stopped at only when that
epoch is one the pull read and can never apply (kint/tenant_worker/push_refusals.py
`refuse_gap`).

v0.3.0 scopes the override to "an epoch nobody can open" (06-epochs.md): bytes a leaked
session key appended, which no key opens. A gap the pull could not read (the endpoint
would not serve the calldata, served it altered, or the prev link broke) says nothing
about the epoch, which may be another machine's real rows: a snapshot over it would anchor
their loss. That gap is refused GAP even with the flag, naming why, and the next pull
through an honest endpoint applies the epoch. The honoured case (a leaked key's epoch) is
tests/test_chain_e2e.py's `test_over_skipped_past_an_epoch_nobody_can_open`.

Machine A anchors straight to the session's anvil; machine B reads through a loopback
proxy (tests/rpc_proxy.py) that alters one push's calldata when told to.
"""

from __future__ import annotations

import gzip
import json

import pytest

from chain_machines import connect_with_wallet, kjson, owner_account
from conftest import write_rules as write
from machines_together import new_machines
from rpc_proxy import RpcProxy
from kint.chain.config import devchain_record
from kint.commands.exit_codes import PUSH_PULL_REFUSED


@pytest.fixture
def machines(tmp_path, chain_home):
    """A and B, their supervisors started side by side (machines_together.new_machines)."""
    a, b = new_machines([tmp_path / "a", tmp_path / "b"], chain_home)
    try:
        write(a.sibyl_db, a.tenant, **{"release-gate": "ship on green only"})
        connected = kjson(a, "connect", "--dev")
        kjson(a, "push")
        record = json.loads(devchain_record(chain_home).read_text())
        with RpcProxy(record["rpc_url"]) as proxy:
            try:
                connect_with_wallet(b, owner_account(a, connected["owner"]), "--rpc-urls",
                                    proxy.url)
                assert kjson(b, "pull")["applied"] == [1]
                yield a, b, proxy, connected["space"]
            finally:
                proxy.forward()
    finally:
        b.shutdown()
        a.shutdown()


def _mirror(machine, space16: str) -> dict:
    return json.loads(gzip.decompress(
        (machine.kint_home / f"mirror-{space16}.json.gz").read_bytes()))


def test_over_skipped_is_refused_over_an_epoch_the_pull_could_not_read(machines):
    a, b, proxy, space16 = machines
    write(a.sibyl_db, a.tenant, **{"deploy-window": "deploys only before 3pm"})
    (epoch,) = kjson(a, "push")["epochs"]
    proxy.set_mode("bad_calldata", tx=epoch["tx"])
    stopped = kjson(b, "pull")
    assert stopped["gap"] == [epoch["seq"]] and stopped["applied"] == [], stopped
    reason = stopped["skipped"][0]["reason"]
    assert "does not match the Epoch event" in reason, reason
    assert _mirror(b, space16)["unread_gap"] == reason

    over = b.kint("compact", "--over-skipped")
    assert over.returncode == PUSH_PULL_REFUSED, over.stdout + over.stderr
    assert "[GAP]" in over.stderr, over.stderr
    assert (f"--over-skipped is not honoured: this machine's last pull could not read epoch "
            f"{epoch['seq']} ({reason})") in over.stderr, over.stderr
    assert "run `kint pull` again" in over.stderr
    # B's endpoints are the ones its connect kept: another is given by a connect again, or
    # by the space's own table, named by its label; "rpc_url in config.toml" (the
    # machine's) changed nothing for it (kint.chain.endpoint_source).
    kept = ("`kint connect --rpc-urls URL` again, which replaces the endpoints the last one "
            "kept for this space, or rpc_url in the space's "
            f'[spaces."{b.label(b.sibyl_db)}"] table in config.toml')
    assert f"through another endpoint if this one keeps failing: {kept})" in over.stderr, \
        over.stderr
    # A push meets the same gap (GAP, gap_hint: before any change is read), and names the
    # same place.
    pushed = b.kint("push")
    assert pushed.returncode == PUSH_PULL_REFUSED and "[GAP]" in pushed.stderr, pushed.stderr
    assert (f"the last one could not read that epoch (through another endpoint if this one "
            f"keeps failing: {kept})") in pushed.stderr, pushed.stderr
    for said in (over.stderr, pushed.stderr):
        assert "rpc_url in config.toml)" not in said and "<label>" not in said, said
    assert kjson(a, "status")["chain_head"]["seq"] == epoch["seq"]  # nothing anchored

    proxy.forward()  # an honest endpoint: the epoch applies, the gap is gone
    pulled = kjson(b, "pull")
    assert pulled["applied"] == [epoch["seq"]] and pulled["gap"] == [], pulled
    assert "unread_gap" not in _mirror(b, space16)
