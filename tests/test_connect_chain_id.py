"""`kint connect` through an endpoint of another chain than the one this machine signs for.

Off the devchain (no devchain record here) kint signs for Base, chain 8453, whatever
KINT_RPC_URL names. A dogfood round pointed a second machine's `rpc_url` at machine A's
anvil (chain 31337, the EpochAnchor at the address given as `contract`): `kint connect
--recovery-code-stdin` read that chain's head and header as Base's, exited 0 and recorded
the space as connected on Base; only the next `kint pull` refused (STALE_RPC, "answers for
chain 31337, not 8453"). A new owner's connect there started a fresh vault and wrote its
recovery code. Connect now refuses as that pull does, in the words kint.chain.chain_id
builds for both, and keeps nothing of the space: no wraps, data key, recovery file,
enrolment or mirror (kint.tenant_worker.connect `_refuse_another_chain`). Every refusal
of such an endpoint names where it came from: a setting, `--rpc-urls`, or the endpoints a
space's enrolment keeps from `kint connect --rpc-urls` (kint.chain.chain_id
`endpoint_names`), which join's vault step and a pull's cold start read through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_account import Account

from chain_machines import (kjson, make_session_key, new_machine, ok, recovery_code,
                            wallet_signature)
from conftest import Sandbox, make_sandbox, write_rules
from kint.chain.config import devchain_record
from kint.settings.reload import LAST_GOOD_NAME
from rpc_proxy import RpcProxy, closed_port_url

BASE_SEPOLIA = 84532
# What a connect keeps of a space (kint.paths): none may be written by a refused one.
KEPT = ("enrol-", "wraps-", "vault-", "RECOVERY-", "mirror-", "watermark-", "pending-")


@pytest.fixture(scope="module")
def source(tmp_path_factory, chain_home):
    """Machine A: a vault on the session's devchain with one epoch anchored."""
    sb = new_machine(tmp_path_factory.mktemp("chain-id-source"), chain_home)
    connected = kjson(sb, "connect", "--dev")
    sb.owner, sb.space16 = connected["owner"], connected["space"]
    write_rules(sb.sibyl_db, sb.tenant, release="a rule anchored on the devchain")
    ok(sb.kint("push"))
    record = json.loads(devchain_record(chain_home).read_text())
    sb.devchain_url, sb.anchor = record["rpc_url"], record["anchor"]
    yield sb
    sb.shutdown()


def _off_the_devchain(root: Path, rpc_url: str | None, anchor: str, *,
                      made_key: bool = True) -> Sandbox:
    """Machine B: no devchain record, its config.toml naming `rpc_url` (None: none, so
    KINT_RPC_URL is Base's default) and A's contract; with `made_key`, its session key made
    beforehand (a machine-wide key, not the space's)."""
    sb = make_sandbox(root)
    sb.kint_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    named = f'rpc_url = "{rpc_url}"\n' if rpc_url is not None else ""
    (sb.kint_home / "config.toml").write_text(f'{named}contract = "{anchor}"\n')
    if made_key:
        make_session_key(sb)
    sb.start_entitled()
    return sb


def _refused_keeping_nothing(sb: Sandbox, out, url: str, chain_id: int,  # noqa: ANN001
                             todo: str = "point KINT_RPC_URL at",
                             source: str = "KINT_RPC_URL") -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    message, hint = out.stderr.splitlines()[:2]
    assert message == (f"kint: error: {url} ({source}) answers for chain {chain_id}, not "
                       f"8453, the chain this machine signs for; nothing was connected "
                       f"[STALE_RPC]"), out.stderr
    assert hint == (f"hint: {todo} an endpoint of chain 8453; for a local "
                    "devchain, copy its record ($KINT_HOME/devchain/devchain.json) to this "
                    "machine instead"), out.stderr
    kept = sorted(p.name for p in sb.kint_home.iterdir() if p.name.startswith(KEPT))
    assert kept == [], kept


def test_a_recovery_code_through_the_devchains_anvil_read_as_base_is_refused(source, tmp_path):
    """The dogfood's machine B: A's anvil as its rpc_url, no devchain record, A's code."""
    fresh = _off_the_devchain(tmp_path / "b", source.devchain_url, source.anchor)
    try:
        out = fresh.kint("connect", "--owner", source.owner, "--recovery-code-stdin",
                         input=recovery_code(source, source.space16) + "\n")
        _refused_keeping_nothing(fresh, out, source.devchain_url, 31337)
        # Nothing says the space is connected: a pull finds no enrolment.
        pulled = fresh.kint("pull")
        assert pulled.returncode == 5 and "NOT_CONNECTED" in pulled.stderr, pulled.stderr
    finally:
        fresh.shutdown()


def test_a_new_owners_signature_starts_no_vault_on_another_chain(source, tmp_path):
    """A new owner's wallet signature, through an endpoint answering for Base Sepolia: the
    chain holds no epochs for them, so the connect would start a fresh vault there and
    write its recovery code."""
    from kint.custody.vault_message import canonical_payload

    with RpcProxy(source.devchain_url) as proxy:
        proxy.set_mode("forward", chain_id=BASE_SEPOLIA)
        fresh = _off_the_devchain(tmp_path / "c", proxy.url, source.anchor)
        try:
            owner = Account.create()
            signed = wallet_signature(owner, canonical_payload(owner.address).decode())
            out = fresh.kint("connect", "--owner", owner.address, "--signature", "-",
                             input=signed + "\n")
            _refused_keeping_nothing(fresh, out, proxy.url, BASE_SEPOLIA)
            assert "eth_chainId" in proxy.calls, proxy.calls
        finally:
            fresh.shutdown()


def test_an_endpoint_given_to_rpc_urls_is_named_as_that(source, tmp_path):
    """KINT_RPC_URL left at Base's default, A's anvil given to `--rpc-urls`: the refusal
    names `--rpc-urls`, the endpoint's real source, and says to pass it one of Base's; it
    once said "(KINT_RPC_URL)" and sent the user to a setting that was already right."""
    fresh = _off_the_devchain(tmp_path / "d", None, source.anchor)
    try:
        out = fresh.kint("connect", "--owner", source.owner, "--recovery-code-stdin",
                         "--rpc-urls", source.devchain_url,
                         input=recovery_code(source, source.space16) + "\n")
        _refused_keeping_nothing(fresh, out, source.devchain_url, 31337,
                                 todo="pass --rpc-urls", source="--rpc-urls")
    finally:
        fresh.shutdown()


def _tree(home: Path, *besides: str) -> list[str]:
    """What KINT_HOME holds, but the space's worker's lock (the worker started for the
    connect takes it, whatever the connect does) and `besides` (the config file's last
    good copy, which the supervisor writes when it reads the file, at its own time)."""
    return sorted(str(p.relative_to(home)) for p in home.rglob("*")
                  if not p.name.startswith("worker-") and p.name not in besides)


def test_a_refused_connect_on_a_fresh_machine_makes_no_session_key(source, tmp_path):
    """A machine with no session key yet: the refused connect made one (and said "making
    this machine's session key") before it asked the endpoint's chain, leaving a new
    machine-wide key and the local secret that locks it, a key the owner would be asked to
    authorize on a chain this machine never connected to. It writes nothing now: KINT_HOME
    holds what it held before the connect."""
    fresh = _off_the_devchain(tmp_path / "f", source.devchain_url, source.anchor,
                              made_key=False)
    try:
        before = _tree(fresh.kint_home)
        out = fresh.kint("connect", "--owner", source.owner, "--recovery-code-stdin",
                         input=recovery_code(source, source.space16) + "\n")
        _refused_keeping_nothing(fresh, out, source.devchain_url, 31337)
        assert _tree(fresh.kint_home) == before, out.stderr
    finally:
        fresh.shutdown()


def test_an_endpoint_of_base_given_on_the_devchain_is_refused(chain_home, tmp_path):
    """A machine whose devchain record is in force, `--rpc-urls` naming an endpoint that
    answers for Base: the option changes how the space reaches the devchain, never which
    chain it is, and the connect went through, reading that endpoint as the devchain's
    (chain 31337 signed for, the devchain's contract) and keeping it in the enrolment. It
    is asked now, as off the devchain, and refused before anything is written: no owner
    key, session key, wraps or enrolment. The hint says how a space gets to Base there."""
    record = json.loads(devchain_record(chain_home).read_text())
    dev = new_machine(tmp_path / "g", chain_home, made_key=False)
    try:
        with RpcProxy(record["rpc_url"]) as proxy, proxy.answering_as(8453):
            before = _tree(dev.kint_home)
            out = dev.kint("connect", "--dev", "--rpc-urls", proxy.url)
            assert out.returncode == 2, out.stdout + out.stderr
            message, hint = out.stderr.splitlines()[:2]
            assert message == (f"kint: error: {proxy.url} (--rpc-urls) answers for chain 8453, "
                               f"not 31337, the chain this machine signs for; nothing was "
                               f"connected [STALE_RPC]"), out.stderr
            assert hint == f"hint: pass --rpc-urls an endpoint of chain 31337; {TO_BASE_HERE}"
            assert _tree(dev.kint_home) == before, out.stderr
    finally:
        dev.shutdown()


TO_BASE_HERE = ("for Base while the devchain's record is in force here, point KINT_RPC_URL at "
                "an endpoint of Base for the whole machine (every space here then reads Base)")


def _space_table(sb: Sandbox, rpc_url: str) -> None:
    """config.toml giving `sb`'s space the endpoint `rpc_url` in its own table."""
    config = sb.kint_home / "config.toml"
    config.write_text(f'[spaces."{sb.label(sb.sibyl_db)}"]\nrpc_url = "{rpc_url}"\n')
    config.chmod(0o600)


def test_a_space_tables_endpoint_of_base_on_the_devchain_is_refused(chain_home, tmp_path):
    """The same endpoint set by the space's `[spaces."<label>"]` table, not `--rpc-urls`: the
    table, too, changes how the space reaches the devchain, never which chain it is, and
    only `--rpc-urls` was asked, so the connect went through ("data key from fresh vault")
    and doctor then failed `rpc primary` (answers for chain 8453, not 31337). Only the
    endpoint the devchain's record sets is left unasked now."""
    dev = new_machine(tmp_path / "j", chain_home, made_key=False)
    record = json.loads(devchain_record(chain_home).read_text())
    try:
        with RpcProxy(record["rpc_url"]) as proxy, proxy.answering_as(8453):
            _space_table(dev, proxy.url)
            before = _tree(dev.kint_home, LAST_GOOD_NAME)
            out = dev.kint("connect", "--dev")
            assert out.returncode == 2, out.stdout + out.stderr
            assert out.stderr.splitlines()[:2] == [
                f"kint: error: {proxy.url} (KINT_RPC_URL) answers for chain 8453, not 31337, the "
                f"chain this machine signs for; nothing was connected [STALE_RPC]",
                f"hint: point KINT_RPC_URL at an endpoint of chain 31337; {TO_BASE_HERE}"
            ], out.stderr
            assert "eth_chainId" in proxy.calls, proxy.calls
            assert _tree(dev.kint_home, LAST_GOOD_NAME) == before, out.stderr
    finally:
        dev.shutdown()


def test_a_dev_connect_whose_session_key_is_refused_keeps_no_owner_key(chain_home, tmp_path):
    """A fresh devchain machine whose local.secret others may read (mode 0644): making the
    session key refuses (CORRUPT_STATE). The connect wrote `--dev`'s throwaway owner key
    first, for a vault it never started; it makes the session key first now, so the refusal
    leaves KINT_HOME as it found it."""
    dev = new_machine(tmp_path / "k", chain_home, made_key=False)
    try:
        secret = dev.kint_home / "local.secret"
        secret.write_text("a" * 43 + "\n")
        secret.chmod(0o644)
        before = _tree(dev.kint_home)
        out = dev.kint("connect", "--dev")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "[CORRUPT_STATE]" in out.stderr and "local.secret" in out.stderr, out.stderr
        assert _tree(dev.kint_home) == before, out.stderr
    finally:
        dev.shutdown()


def test_join_names_no_head_of_another_chain(source, tmp_path):
    """`kint join` through A's anvil read as Base: its vault step printed `vault: head epoch
    N at block B` of that chain, and only its connect step then refused the endpoint. It
    stops at the vault step now, in connect's words, having said nothing of a head."""
    fresh = _off_the_devchain(tmp_path / "e", source.devchain_url, source.anchor)
    try:
        out = fresh.kint("join", "--owner", source.owner, "--recovery-code-stdin",
                         "--no-setup", input=recovery_code(source, source.space16) + "\n")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "head epoch" not in out.stdout + out.stderr, out.stdout + out.stderr
        stopped, hint = out.stderr.splitlines()[:2]
        assert stopped == (f"join stopped at vault: {source.devchain_url} (KINT_RPC_URL) "
                           f"answers for chain 31337, not 8453, the chain this machine signs "
                           f"for; join read no head from it [STALE_RPC]"), out.stderr
        assert hint.startswith("hint: point KINT_RPC_URL at an endpoint of chain 8453"), hint
        kept = sorted(p.name for p in fresh.kint_home.iterdir() if p.name.startswith(KEPT))
        assert kept == [], kept
    finally:
        fresh.shutdown()


def test_join_on_the_devchain_reads_no_head_through_a_tables_endpoint_of_base(source,
                                                                             chain_home,
                                                                             tmp_path):
    """join's vault step on a devchain machine whose space's table names an endpoint of
    Base: it asked no endpoint on the devchain, printed that endpoint's head as the vault's
    and only its connect step refused it. It stops at the vault step now, in connect's
    words."""
    dev = new_machine(tmp_path / "m", chain_home)
    try:
        with RpcProxy(source.devchain_url) as proxy, proxy.answering_as(8453):
            _space_table(dev, proxy.url)
            out = dev.kint("join", "--owner", source.owner, "--recovery-code-stdin",
                           "--no-setup", input=recovery_code(source, source.space16) + "\n")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "head epoch" not in out.stdout + out.stderr, out.stdout + out.stderr
        assert out.stderr.splitlines()[:2] == [
            f"join stopped at vault: {proxy.url} (KINT_RPC_URL) answers for chain 8453, not "
            f"31337, the chain this machine signs for; join read no head from it [STALE_RPC]",
            f"hint: point KINT_RPC_URL at an endpoint of chain 31337; {TO_BASE_HERE}"
        ], out.stderr
    finally:
        dev.shutdown()


GAVE = "`kint connect --rpc-urls`"
TO_BASE = ("for a local devchain, copy its record ($KINT_HOME/devchain/devchain.json) to "
           "this machine instead")


def _connected_through(sb: Sandbox, source: Sandbox, proxy: RpcProxy, urls: str) -> None:
    """`sb` connected with `--rpc-urls urls` (its enrolment keeps them), the proxy in front
    of A's anvil answering as Base's endpoint while the connect asks it (the connect's own
    check passes, as for a machine whose endpoint was on Base then)."""
    with proxy.answering_as(8453):
        ok(sb.kint("connect", "--owner", source.owner, "--recovery-code-stdin",
                   "--rpc-urls", urls, input=recovery_code(source, source.space16) + "\n"))


def test_join_names_a_kept_endpoint_by_the_connect_that_gave_it(source, tmp_path):
    """A space connected with `--rpc-urls`, then joined again: join's vault step reads
    through the kept endpoint, and its refusal called it "(KINT_RPC_URL)" and said to point
    KINT_RPC_URL at Base, a setting that was not in force (and right)."""
    fresh = _off_the_devchain(tmp_path / "h", None, source.anchor)
    try:
        with RpcProxy(source.devchain_url) as proxy:
            _connected_through(fresh, source, proxy, proxy.url)
            out = fresh.kint("join", "--owner", source.owner, "--recovery-code-stdin",
                             "--no-setup", input=recovery_code(source, source.space16) + "\n")
        assert out.returncode == 2, out.stdout + out.stderr
        stopped, hint = out.stderr.splitlines()[:2]
        assert stopped == (f"join stopped at vault: {proxy.url} ({GAVE}) answers for chain "
                           f"31337, not 8453, the chain this machine signs for; join read no "
                           f"head from it [STALE_RPC]"), out.stderr
        assert hint == f"hint: pass {GAVE} an endpoint of chain 8453; {TO_BASE}", out.stderr
    finally:
        fresh.shutdown()


def test_a_cold_start_names_the_kept_endpoints_by_the_connect_that_gave_them(source,
                                                                              tmp_path):
    """A pull's cold start through the space's kept endpoints: its refusals named
    KINT_RPC_URL_2 for a second endpoint the space was never given (one endpoint kept), and
    "(KINT_RPC_URL)" and both settings to point for a primary of another chain."""
    fresh = _off_the_devchain(tmp_path / "i", None, source.anchor)
    dead = closed_port_url()
    try:
        with RpcProxy(source.devchain_url) as proxy:
            _connected_through(fresh, source, proxy, proxy.url)
            one = fresh.kint("pull")
            _connected_through(fresh, source, proxy, f"{proxy.url},{dead}")
            other = fresh.kint("pull")
        assert one.returncode == 6, one.stdout + one.stderr
        assert one.stderr.splitlines()[:2] == [
            f"kint: error: cold start needs a second, independent RPC and the endpoints {GAVE} "
            f"gave this space name one [STALE_RPC]",
            "hint: give the space two of different operators (`kint connect --rpc-urls "
            "URL,URL`), or set KINT_ALLOW_SINGLE_RPC=1 to accept one"], one.stderr
        assert other.returncode == 6, other.stdout + other.stderr
        assert other.stderr.splitlines()[:2] == [
            f"kint: error: {proxy.url} ({GAVE}) answers for chain 31337, not 8453, the chain "
            f"this machine signs for: could not get a second opinion on the head from {dead} "
            f"[STALE_RPC]",
            f"hint: pass {GAVE} two endpoints of chain 8453; {TO_BASE}"], other.stderr
    finally:
        fresh.shutdown()


def _secondary(sb: Sandbox) -> dict:
    """doctor's `rpc secondary` check."""
    checks = json.loads(sb.kint("doctor", "--json").stdout)["checks"]
    return next(c for c in checks if c["name"] == "rpc secondary")


def test_a_silent_second_kept_endpoint_is_named_as_the_connects(source, tmp_path):
    """Two kept endpoints of the right chain, the second not answering: a pull's cold start
    says to check the second endpoint the connect gave the space, not KINT_RPC_URL_2, a
    setting the kept endpoints replace (no endpoint answers for another chain here, so
    this is the refusal itself, not on_other_chain's words in its place). Doctor's `rpc
    secondary` said KINT_RPC_URL_2 for it, and for a space given one endpoint; it hints as
    the cold start does now."""
    fresh = _off_the_devchain(tmp_path / "l", None, source.anchor)
    dead = closed_port_url()
    silent = f"check the second endpoint {GAVE} gave this space, or set KINT_ALLOW_SINGLE_RPC=1"
    try:
        with RpcProxy(source.devchain_url) as proxy, proxy.answering_as(8453):
            ok(fresh.kint("connect", "--owner", source.owner, "--recovery-code-stdin",
                          "--rpc-urls", f"{proxy.url},{dead}",
                          input=recovery_code(source, source.space16) + "\n"))
            pulled = fresh.kint("pull")
            second = _secondary(fresh)
            ok(fresh.kint("connect", "--owner", source.owner, "--recovery-code-stdin",
                          "--rpc-urls", proxy.url,
                          input=recovery_code(source, source.space16) + "\n"))
            alone = _secondary(fresh)
        assert pulled.returncode == 6, pulled.stdout + pulled.stderr
        assert pulled.stderr.splitlines()[:2] == [
            f"kint: error: could not get a second opinion on the head from {dead} [STALE_RPC]",
            f"hint: {silent}"], pulled.stderr
        assert not second["ok"] and second["detail"].startswith(f"{dead}: "), second
        assert second["hint"] == silent, second
        assert alone["detail"] == ("none configured: a cold-start pull would refuse without "
                                   "one"), alone
        assert alone["hint"] == (f"give the space two of different operators ({GAVE[:-1]} "
                                 f"URL,URL`), or set KINT_ALLOW_SINGLE_RPC=1 to accept one")
    finally:
        fresh.shutdown()
