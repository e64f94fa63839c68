"""A chain call a command makes itself (kint.commands.onchain: `session-key show`,
`authorize`) that times out names the KINT_RPC_TIMEOUT it waited and whose it was, as a
worker's request and a watcher's push name it (kint.tenant_worker.rpc_hint).

Such a call said "the endpoint did not answer within KINT_RPC_TIMEOUT" with neither the
value nor where it was set. The value is the one the chain settings were loaded with: for a
connected space, the worker's (`space_chain`), so its source is the worker's too.

Real parts: the session's devchain (anvil), the test supervisor and its worker, the real
CLI; a loopback RPC proxy (tests/rpc_proxy.py) that holds the chain id and newest block reads
unanswered.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from chain_machines import machine_behind_proxy, ok
from kint.chain.calls import RPC_TIMEOUT_WORDS
from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig
from kint.chain.rpc import RpcTracker, RpcUnavailable
from kint.protocol.errors import SPACE_RPC_HINT
from kint.settings.schema import BY_NAME
from test_recycle_sessions import _worker


def test_session_key_show_and_authorize_name_the_rpc_timeout_they_waited_and_whose(
        tmp_path, chain_home):
    """The space is connected through a proxy that never answers eth_chainId nor
    eth_getBlockByNumber (the first read of each command): `session-key show` warns,
    `authorize payload` refuses, each naming KINT_RPC_TIMEOUT's value and source, given by
    the caller's environment, then by the supervisor's, which only the space's worker
    reads: a lookup in the command's own process would say "the default". The supervisor
    runs with 0.75 s, which the test needs in its environment; the set-up's connect sends
    the default as its own value, so a slow anvil answer on a loaded box does not fail it.
    The refusal's hint names the endpoints the space's connect kept, the worker's."""
    sane = {"KINT_RPC_TIMEOUT": str(BY_NAME["KINT_RPC_TIMEOUT"].default)}
    with machine_behind_proxy(tmp_path, chain_home, connect_settings=sane,
                              KINT_RPC_TIMEOUT="0.75") as (sb, proxy):
        del sb.env["KINT_RPC_TIMEOUT"]  # the supervisor was started with it; commands are not
        proxy.set_mode("hang_methods", methods=["eth_chainId", "eth_getBlockByNumber"])
        shown = ok(sb.kint("session-key", "show", env={"KINT_RPC_TIMEOUT": "0.5"}))
        assert f"{RPC_TIMEOUT_WORDS}=0.5s (from this call; ReadTimeout)" in shown.stderr, \
            shown.stderr
        assert "showing the local half only" in shown.stderr, shown.stderr
        # `authorize`'s refusal (onchain.chain_errors, which opened the anchor itself).
        refused = sb.kint("authorize", "payload", env={"KINT_RPC_TIMEOUT": "0.5"})
        assert refused.returncode == 2 and "[RPC_UNAVAILABLE]" in refused.stderr, \
            refused.stderr
        assert (f"authorize payload: the chain did not answer (reading the newest block: "
                f"{RPC_TIMEOUT_WORDS}=0.5s (from this call; ReadTimeout))") in refused.stderr, \
            refused.stderr
        # Its hint names the endpoints the space's worker reads through, those its connect's
        # --rpc-urls kept, where it said "check KINT_RPC_URL", which the worker does not use.
        assert f"hint: {SPACE_RPC_HINT}" in refused.stderr, refused.stderr
        shown = ok(sb.kint("session-key", "show"))
        assert (f"{RPC_TIMEOUT_WORDS}=0.75s (from the supervisor's environment; ReadTimeout)"
                in shown.stderr), shown.stderr
        refused = sb.kint("authorize", "payload")
        assert (f"{RPC_TIMEOUT_WORDS}=0.75s (from the supervisor's environment; ReadTimeout)"
                in refused.stderr), refused.stderr


def test_where_the_timeout_came_from_does_not_make_verifys_head_anchor_anew(tmp_path):
    """Verify's head Anchor is kept while the chain configuration is the same
    (SpaceContext.head_anchor): a new one is a new provider, HTTP session and TCP
    connection. Where KINT_RPC_TIMEOUT came from took part in the comparison, so verifies
    alternating between an agent whose MCP environment sets it and a terminal that does
    not made one each time, for the same timeout. A real worker over a real store (not
    serving); the Anchor makes no call here."""
    chain = ChainConfig(("http://127.0.0.1:1",), 31337, "0x" + "11" * 20, 1, 2.0,
                        rpc_retries=False)
    worker = _worker(tmp_path)
    try:
        kept = worker.ctx.head_anchor(chain)
        agent = replace(chain, rpc_timeout_source="this call", rpc_timeout_where="an agent")
        assert worker.ctx.head_anchor(agent) is kept
        assert worker.ctx.head_anchor(replace(chain, rpc_timeout_s=3.0)) is not kept
    finally:
        worker.close()


def test_a_chain_errors_block_names_the_chain_opened_in_it_or_given_it(capsys):
    """`chain_errors` names the KINT_RPC_TIMEOUT of the chain `open_anchor` gave inside the
    block. The chain stayed in the process's context after the block, so a second
    invocation in the same process (click's CliRunner) whose call timed out before it
    opened one named the first's. A block of calls through an Anchor an earlier block
    opened is given it (`authorize page`'s last read)."""
    from kint.commands import onchain

    first = ChainConfig(("http://127.0.0.1:1",), 31337, "0x" + "11" * 20, 1, 7.0,
                        rpc_timeout_source="this call")
    with onchain.chain_errors("one"):
        onchain._opened.set(first)  # as open_anchor sets it, inside the block
    timed_out = RpcUnavailable(f"reading the newest block: {RPC_TIMEOUT_WORDS} (ReadTimeout)")
    left = onchain._opened.set(first)  # left before the block: each block starts with none
    try:
        with pytest.raises(SystemExit), onchain.chain_errors("two"):
            raise timed_out
    finally:
        onchain._opened.reset(left)
    err = capsys.readouterr().err
    assert f"two: the chain did not answer (reading the newest block: {RPC_TIMEOUT_WORDS} " \
           "(ReadTimeout))" in err, err
    with pytest.raises(SystemExit), onchain.chain_errors("three", Anchor(first, RpcTracker())):
        raise timed_out
    err = capsys.readouterr().err
    assert "KINT_RPC_TIMEOUT=7s (from this call; ReadTimeout)" in err, err


def test_a_chain_config_from_a_worker_of_another_kint_is_read():
    """During an upgrade on disk the worker a command asks (`space_chain`) may be of a newer
    or older kint: a field this kint does not know raised TypeError and the command failed;
    it is dropped, and a field the worker did not send takes its default."""
    import dataclasses

    from kint.tenant_worker.space_chain import chain_config

    chain = ChainConfig(("http://127.0.0.1:1",), 31337, "0x" + "11" * 20, 1, 7.0,
                        rpc_timeout_source="this call")
    sent = {**dataclasses.asdict(chain), "a_field_of_a_newer_kint": 1}
    taken = chain_config({"chain": sent})
    assert taken == chain and taken.rpc_timeout_source == "this call"
    del sent["rpc_timeout_source"], sent["rpc_timeout_where"]  # an older kint's worker
    assert chain_config({"chain": sent}).rpc_timeout_source == "default"


def test_a_chain_field_this_kint_does_not_know_is_dropped_and_its_timeout_named():
    """A chain from another kint's worker (`space_chain`, during an upgrade on disk) may
    carry a field this kint has none for (here a bound's name): the field is dropped and the
    timeout said as KINT_RPC_TIMEOUT with the value and source the worker sent (an unknown
    field raised TypeError in ChainConfig, while the command was already saying why a chain
    call failed)."""
    import dataclasses

    from kint.tenant_worker.rpc_hint import chain_timeout_named
    from kint.tenant_worker.space_chain import chain_config

    sent = dataclasses.asdict(ChainConfig(("http://127.0.0.1:1",), 31337, "0x" + "11" * 20,
                                          1, 4.0, rpc_timeout_source="file",
                                          rpc_timeout_where="/h/config.toml"))
    sent["rpc_timeout_name"] = "KINT_A_NEWER_KINTS_BOUND"
    chain = chain_config({"chain": sent})
    said = chain_timeout_named(f"{RPC_TIMEOUT_WORDS} (ReadTimeout)", chain)
    assert said == f"{RPC_TIMEOUT_WORDS}=4s (from file /h/config.toml; ReadTimeout)", said


def test_a_bound_a_caller_set_is_waited_once_and_the_loaded_chain_names_its_own():
    """A chain whose timeout a caller replaced (ChainConfig.with_rpc_timeout: verify's head
    read, here ChainHeadSource through a real Anchor to a closed port, waits
    KINT_VERIFY_HEAD_SECONDS) waits that bound once, not three times; the chain as loaded,
    the one a command names a timeout of (chain_timeout_named's one caller,
    kint.commands.onchain, passes the chain the worker loaded, from space_chain), still says
    its own KINT_RPC_TIMEOUT and whose it is."""
    from kint.tenant_worker.chain_head import ChainHeadSource
    from kint.tenant_worker.rpc_hint import chain_timeout_named
    from rpc_proxy import closed_port_url

    loaded = ChainConfig((closed_port_url(),), 31337, "0x" + "11" * 20, 1, 30.0,
                         rpc_timeout_source="file", rpc_timeout_where="/h/config.toml")
    tracker = RpcTracker()
    given: list[ChainConfig] = []

    def anchor_for(config: ChainConfig) -> Anchor:
        given.append(config)
        return Anchor(config, tracker)

    reading = ChainHeadSource(loaded, tracker, anchor_for, "0x" + "33" * 20,
                              "22" * 32).read(0.5)
    assert reading.head is None and len(given) == 1, reading
    assert given[0].rpc_timeout_s == 0.5 and not given[0].rpc_retries, given[0]
    assert given[0] == loaded.with_rpc_timeout(0.5)
    said = chain_timeout_named(f"{RPC_TIMEOUT_WORDS} (ReadTimeout)", loaded)
    assert said == f"{RPC_TIMEOUT_WORDS}=30s (from file /h/config.toml; ReadTimeout)", said
