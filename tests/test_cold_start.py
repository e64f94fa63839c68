"""A cold start asks two DIFFERENT endpoints for the head (v0.3.0's judge claim "freshness
before anything: watermark, two different RPCs on a cold start, a same-endpoint guard";
03-new-machine.md, "Freshness: two endpoints on a cold start").

The guard against the same endpoint and the refusals are in test_settings_chain.py; here,
with two real endpoints (two proxies in front of the devchain), what each one is asked:
the second is asked the head on a cold start and not again once a watermark exists, a
disagreement is asked once more before it refuses, and KINT_ALLOW_SINGLE_RPC=1 never
overrides it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sibyl_memory_client.exceptions import NotFoundError

from chain_machines import (RULE_1, connect_with_code, kjson, new_machine, ok,
                            recovery_code)
from conftest import Sandbox, sibyl_client
from rpc_proxy import RpcProxy
from kint.chain.config import BASE_CHAIN_ID, devchain_record


@pytest.fixture(scope="module")
def source(tmp_path_factory, chain_home):
    """A machine that anchored one row on the devchain."""
    sb = new_machine(tmp_path_factory.mktemp("cold-source"), chain_home)
    connected = kjson(sb, "connect", "--dev")
    sb.owner, sb.space16 = connected["owner"], connected["space"]
    sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "release-gate", {"rule": RULE_1})
    ok(sb.kint("push"))
    record = json.loads(devchain_record(chain_home).read_text())
    sb.devchain_url, sb.anchor = record["rpc_url"], record["anchor"]
    yield sb
    sb.shutdown()


def _fresh(source: Sandbox, root: Path, chain_home: Path, primary: RpcProxy,
           second: RpcProxy) -> Sandbox:
    """A new machine connected with the recovery code, its endpoints the two proxies (off
    the devchain's own endpoint a space is configured as on Base: a cold start asks two).
    It connects under that configuration, so the space is on the chain it is then read
    on (a space connected on the devchain and read on Base is refused before the pull
    reads anything, enrolment.py `other_chain`). Its cold start asks a second endpoint that
    disagrees again after half a second (KINT_TEST_SECOND_OPINION_S,
    tests/support/kint_test_timings.py; 3 s by default). While connect reads the primary it
    answers eth_chainId as Base's would: connect refuses an endpoint of another chain, as a
    pull does; the second endpoint is not asked by connect."""
    fresh = new_machine(root, chain_home, KINT_TEST_SECOND_OPINION_S="0.5")
    fresh.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (fresh.kint_home / "config.toml").write_text(
        f'rpc_url = "{primary.url}"\nrpc_url_2 = "{second.url}"\ncontract = "{source.anchor}"\n')
    with primary.answering_as(BASE_CHAIN_ID):
        connect_with_code(fresh, source.owner, recovery_code(source, source.space16))
    return fresh


def _rule(machine: Sandbox) -> object:
    """The restored rule, or None when the store does not hold it (or does not exist)."""
    if not machine.sibyl_db.exists():
        return None
    client = sibyl_client(machine.sibyl_db, machine.tenant)
    try:
        return client.get_entity("rules", "release-gate")
    except NotFoundError:
        return None
    finally:
        client.storage.close()


def test_the_second_endpoint_is_asked_on_a_cold_start_only(source, tmp_path, chain_home):
    with RpcProxy(source.devchain_url) as primary, RpcProxy(source.devchain_url) as second:
        fresh = _fresh(source, tmp_path / "agree", chain_home, primary, second)
        try:
            assert second.calls == []
            pulled = fresh.kint("pull")
            assert pulled.returncode == 0, pulled.stdout + pulled.stderr
            assert "pull: cold start, both RPCs agree: head seq 1" in pulled.stdout, \
                pulled.stdout
            assert "eth_call" in second.calls  # the head, read from the second endpoint
            assert primary.calls.count("eth_call") >= 1
            assert RULE_1 in json.dumps(_rule(fresh))
            # A watermark now: the next pull checks the head against it, on the primary.
            asked = len(second.calls)
            again = fresh.kint("pull")
            assert again.returncode == 0, again.stdout + again.stderr
            assert "cold start" not in again.stdout
            assert len(second.calls) == asked
        finally:
            fresh.shutdown()


def test_a_disagreement_is_asked_twice_and_single_rpc_never_overrides_it(source, tmp_path,
                                                                         chain_home):
    with RpcProxy(source.devchain_url) as primary, RpcProxy(source.devchain_url) as second:
        second.set_mode("same_seq_other_digest")
        fresh = _fresh(source, tmp_path / "disagree", chain_home, primary, second)
        try:
            refused = fresh.kint("pull", env={"KINT_ALLOW_SINGLE_RPC": "1"})
            assert refused.returncode == 6, refused.stdout + refused.stderr
            assert "two RPCs disagree on the head: seq 1" in refused.stderr, refused.stderr
            assert "refusing to restore from a contested head; nothing was applied" \
                in refused.stderr
            assert len(second.lies) == 2, second.lies  # asked again before refusing
            assert _rule(fresh) is None
            assert not (fresh.kint_home / f"watermark-{source.space16}.json").exists()
        finally:
            fresh.shutdown()
