"""A pull through a node that will not serve old epochs (kint/tenant_worker/walk_history.py):
a pruned node's eth_getLogs below its horizon (an error, or no logs at all), a node that
keeps logs but no old transactions, and a log read refused once.

v0.3.0's 16-limits.md ("A malicious or lagging RPC"): such an endpoint can serve a pruned
node, and the pull then stops, at a gap or with an error, for the next pull to retry. Here
the stop says which epoch, at which block, and names the setting to change (an archive
endpoint), instead of a generic transport error, a freshness refusal (exit 6) that sent the
user after a stale head, or, for unserved transactions, a walk to epoch 1 ending in a gap
at exit 0 with nothing restored. A `--full` walk that read a snapshot before the missing
epoch starts there: the pull is whole, and the backfill names where history stopped.

The source machine anchors epochs 1 to 3 (diffs), 4 (`kint compact`, a snapshot) and 5; a
new machine restores with the recovery code through a loopback proxy (tests/rpc_proxy.py,
`pruned` and `rate_limited`) in front of the real anvil, the second opinion of its cold
start asked of the anvil itself. The new machines, one per test, are started together
once for the module.
"""

from __future__ import annotations

import json

import pytest
from sibyl_memory_client.exceptions import NotFoundError

from chain_machines import RULE_1, connect_with_code, kjson, new_machine, ok, recovery_code
from conftest import Sandbox, sibyl_client
from machines_together import MachinePool
from rpc_proxy import RpcProxy
from kint.chain.config import BASE_CHAIN_ID, devchain_record
from kint.commands.exit_codes import PUSH_PULL_REFUSED

ARCHIVE = "give the space an archive endpoint"
# The restoring machines' pause before the walk asks a refused log read once more (1 s in
# kint; KINT_TEST_LOG_RETRY_S, tests/support/kint_test_timings.py): the second ask is what
# these tests count, in three of them, not how long the worker paused before it.
FRESH_ENV = {"KINT_TEST_LOG_RETRY_S": "0.05"}


@pytest.fixture(scope="module")
def source(tmp_path_factory, chain_home):
    """A machine that anchored epochs 1-3, the snapshot 4 and epoch 5; `blocks[seq]`."""
    sb = new_machine(tmp_path_factory.mktemp("pruned-source"), chain_home)
    connected = kjson(sb, "connect", "--dev")
    sb.owner, sb.space16 = connected["owner"], connected["space"]
    client = sibyl_client(sb.sibyl_db, sb.tenant)
    try:
        for n in range(3):
            client.set_entity("rules", f"rule-{n}", {"rule": f"{RULE_1} ({n})"})
            ok(sb.kint("push"))
        ok(sb.kint("compact"))
        client.set_entity("rules", "rule-last", {"rule": RULE_1})
        ok(sb.kint("push"))
    finally:
        client.storage.close()
    record = json.loads(devchain_record(chain_home).read_text())
    sb.devchain_url, sb.anchor = record["rpc_url"], record["anchor"]
    epochs = sb.kint_home / "epochs" / sb.space16
    sb.blocks = {seq: json.loads((epochs / f"{seq:08d}.meta.json").read_text())["block"]
                 for seq in range(1, 6)}
    assert len(set(sb.blocks.values())) == 5, sb.blocks
    yield sb
    sb.shutdown()


@pytest.fixture(scope="module")
def unused(request, tmp_path_factory, chain_home):
    """A new machine for each test of this module the session runs, started together (one
    start's wait where each test waited its own); each test takes one (`_fresh`) and stops
    it, the rest are stopped at the end."""
    pool = MachinePool(request, "unused", tmp_path_factory.mktemp("pruned-fresh"), chain_home,
                       **FRESH_ENV)
    try:
        yield pool
    finally:
        pool.shutdown()


def _fresh(source: Sandbox, unused: MachinePool, primary: RpcProxy) -> Sandbox:
    """A new machine connected with the recovery code, the proxy its primary endpoint and
    the devchain itself the second (so its first pull is a cold start that asks both).
    Off the devchain's own endpoint the space is configured as on Base, so the proxy
    answers eth_chainId as Base's would while connect reads it (connect refuses an endpoint
    of another chain, as a pull does), then forwards again, as before."""
    fresh = unused.take()
    fresh.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (fresh.kint_home / "config.toml").write_text(
        f'rpc_url = "{primary.url}"\nrpc_url_2 = "{source.devchain_url}"\n'
        f'contract = "{source.anchor}"\n')
    with primary.answering_as(BASE_CHAIN_ID):
        connect_with_code(fresh, source.owner, recovery_code(source, source.space16))
    return fresh


def _rule(machine: Sandbox, key: str) -> object:
    if not machine.sibyl_db.exists():
        return None
    client = sibyl_client(machine.sibyl_db, machine.tenant)
    try:
        return client.get_entity("rules", key)
    except NotFoundError:
        return None
    finally:
        client.storage.close()


def _nothing_applied(machine: Sandbox, source: Sandbox) -> None:
    assert not (machine.kint_home / f"watermark-{source.space16}.json").exists()
    assert _rule(machine, "rule-last") is None


@pytest.mark.parametrize("logs", ["error", "empty"])
def test_a_cold_start_on_a_node_without_old_logs_is_refused_naming_an_archive_endpoint(
        source, unused, logs):
    """Epoch 5's log is served, epoch 4's block is below the node's horizon: refused at
    epoch 4, exit 5, with the setting to change, nothing applied. An error answer used to
    be a bare transport refusal, and no logs at all a freshness refusal (exit 6) telling
    the user the endpoint answered an old head."""
    with RpcProxy(source.devchain_url) as primary:
        fresh = _fresh(source, unused, primary)
        try:
            primary.set_mode("pruned", before=source.blocks[5], logs=logs)
            out = fresh.kint("pull")
            assert out.returncode == PUSH_PULL_REFUSED, out.stdout + out.stderr
            assert (f"cannot walk back to epoch 4 at block {source.blocks[4]} (the head is "
                    f"epoch 5)") in out.stderr, out.stderr
            assert "the 1 newer epoch(s) read need it before they apply" in out.stderr
            assert "nothing was applied [RPC_UNAVAILABLE]" in out.stderr, out.stderr
            assert ARCHIVE in out.stderr and "Traceback" not in out.stderr
            # The endpoint is set where it is in force, this machine's config.toml: the
            # hint names that file, where it named "rpc_url in config.toml, or `kint
            # connect --rpc-urls`" whatever set it (kint.chain.endpoint_source).
            where = fresh.kint_home / "config.toml"
            assert (f"{ARCHIVE} (rpc_url in {where}, where the endpoints in force are "
                    f"set) and pull") in out.stderr, out.stderr
            assert "--rpc-urls" not in out.stderr, out.stderr
            _nothing_applied(fresh, source)
            primary.forward()  # an archive endpoint: the same pull restores
            ok(fresh.kint("pull"))
            assert RULE_1 in json.dumps(_rule(fresh, "rule-last"))
        finally:
            fresh.shutdown()


def test_a_cold_start_on_a_node_without_old_transactions_stops_at_the_first(source, unused):
    """Logs kept, transactions below the horizon not served: the restore stops at epoch 4,
    the first it cannot fetch, and refuses with the setting to change. It used to walk on
    to epoch 1, asking for every older transaction, and end in a gap at epoch 1 with
    nothing restored and exit 0."""
    with RpcProxy(source.devchain_url) as primary:
        fresh = _fresh(source, unused, primary)
        try:
            primary.set_mode("pruned", before=source.blocks[5], logs="kept")
            asked = len(primary.calls)
            out = fresh.kint("pull")
            assert out.returncode == PUSH_PULL_REFUSED, out.stdout + out.stderr
            assert (f"cannot restore from this endpoint: epoch 4 at block "
                    f"{source.blocks[4]}: transaction 0x") in out.stderr, out.stderr
            assert "is not served by the RPC" in out.stderr and ARCHIVE in out.stderr
            assert "nothing was applied [RPC_UNAVAILABLE]" in out.stderr, out.stderr
            pruned = [lie for lie in primary.lies if "eth_getTransactionByHash" in lie]
            assert len(pruned) == 1, pruned  # epoch 4's; none older was asked for
            assert primary.calls[asked:].count("eth_getLogs") == 2, primary.calls[asked:]
            _nothing_applied(fresh, source)
        finally:
            fresh.shutdown()


def test_a_full_pull_starts_at_a_snapshot_read_before_the_missing_epoch(source, unused):
    """`--full` walks past the snapshot; epoch 3's log is gone: the pull starts at the
    snapshot (4) and applies 4 and 5, whole, and the backfill names epoch 3 as where
    history stopped. It used to refuse the whole pull."""
    with RpcProxy(source.devchain_url) as primary:
        fresh = _fresh(source, unused, primary)
        try:
            primary.set_mode("pruned", before=source.blocks[4])
            pulled = json.loads(ok(fresh.kint("pull", "--full", "--json")).stdout)
            assert pulled["applied"] == [4, 5] and pulled["gap"] == [], pulled
            assert pulled["head"]["seq"] == 5 and pulled["store_root_matches"], pulled
            assert pulled["backfill_stopped"]["seq"] == 3, pulled
            assert "cannot read its Epoch event" in pulled["backfill_stopped"]["reason"]
            assert RULE_1 in json.dumps(_rule(fresh, "rule-last"))
            assert _rule(fresh, "rule-0") is not None  # the snapshot carries the older rows
        finally:
            fresh.shutdown()


def test_a_log_read_refused_once_is_asked_again(source, unused):
    """One eth_getLogs answered 429 (a rate limit's burst) in the walk: asked once more,
    and the pull goes through."""
    with RpcProxy(source.devchain_url) as primary:
        fresh = _fresh(source, unused, primary)
        try:
            seen = len(primary.lies)  # the connect's chain id, answered as Base's
            primary.set_mode("rate_limited", methods=["eth_getLogs"], count=1)
            pulled = json.loads(ok(fresh.kint("pull", "--json")).stdout)
            assert pulled["applied"] == [4, 5], pulled
            assert len(primary.lies[seen:]) == 1, primary.lies
        finally:
            fresh.shutdown()


def test_a_connect_whose_given_endpoint_fails_names_those_it_was_given(source, unused):
    """A new machine whose config.toml names an endpoint that answers, connected with
    `--rpc-urls` of one that does not: the refusal's hint names the URLs given to
    `--rpc-urls`, which the connect used. It said "change the RPC (rpc_url in
    .../config.toml, where the endpoints in force are set)", whose endpoint answers and
    changes nothing for a connect given `--rpc-urls` (the hint was named from the
    settings on the way out of the worker). Nothing is connected."""
    from kint.custody.vault_message import canonical_payload

    from chain_machines import owner_account, wallet_signature

    fresh = unused.take()
    try:
        fresh.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
        (fresh.kint_home / "config.toml").write_text(
            f'rpc_url = "{source.devchain_url}"\ncontract = "{source.anchor}"\n')
        account = owner_account(source, source.owner)
        signature = wallet_signature(account, canonical_payload(account.address).decode())
        out = fresh.kint("connect", "--owner", account.address, "--signature", "-",
                         "--rpc-urls", "http://127.0.0.1:9", input=signature + "\n")
        assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stderr
        assert "cannot read the chain head" in out.stderr, out.stderr
        assert ("hint: that is a transport failure, never a verdict on the vault: try again, "
                "or change the RPC (the URLs given to this connect's --rpc-urls, which it "
                "used in place of settings)") in out.stderr, out.stderr
        assert "config.toml" not in out.stderr and "KINT_RPC_URL" not in out.stderr
        assert not list(fresh.kint_home.glob("enrol-*.json")), list(fresh.kint_home.iterdir())
    finally:
        fresh.shutdown()
