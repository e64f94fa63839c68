"""A command's own chain call (kint.commands.onchain: `authorize`, `session-key show`) that
fails names where the settings it went through were set, as a worker's refusal names them
(kint.tenant_worker.rpc_hint, kint.chain.contract_source).

Its hints said "check KINT_RPC_URL (or the devchain: kint devchain status)" and "check
KINT_CONTRACT and KINT_RPC_URL" whatever set the endpoint and the contract: of a contract
and an endpoint set in config.toml, or a devchain's record, neither setting named is in
force, and setting it would change the chain the machine reads.

Real parts: the session's devchain (anvil), the real CLI in a machine of its own with no
space connected (the command reads the chain with the machine's settings, no supervisor),
its real config.toml and devchain record; a loopback port nothing listens on stands for an
endpoint that does not answer.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import requests
from eth_account import Account
from eth_hash.auto import keccak

from authorize_support import Machine, new_machine
from conftest import KINT
from kint.chain.config import devchain_record
from kint.protocol.errors import DEVCHAIN_RPC_HINT
from rpc_proxy import RpcProxy, closed_port_url


def _hint(out, code: str) -> str:
    """The hint of refusal `out`, which must be exit 2 with `code`."""
    assert out.returncode == 2, out.stdout + out.stderr
    message, hint = out.stderr.rstrip("\n").split("\n")[-2:]
    assert message.startswith("kint: error: ") and message.endswith(f"[{code}]"), out.stderr
    assert hint.startswith("hint: "), out.stderr
    return hint.removeprefix("hint: ")


# The devchain's endpoint, as a hint names it.
DEVCHAIN = "the devchain's, which `kint devchain status` names"


def _account_as_contract(tmp_path, chain_home) -> tuple[Machine, str, Path]:
    """A machine whose config.toml names an account (no code there) as kint's contract:
    the machine, the account's address and the config file."""
    m = new_machine(tmp_path / "machine", chain_home)
    owner = Account.create().address
    config = m.sb.kint_home / "config.toml"
    config.write_text(f'contract = "{owner}"\n')
    config.chmod(0o600)
    return m, owner, config


def test_a_commands_chain_refusals_name_where_its_endpoint_and_contract_were_set(
        tmp_path, chain_home):
    """`authorize payload` refused three ways, each hint naming what set the setting at
    fault: a `contract` in config.toml with no code (an account's address: the endpoint
    answers its call with no data, where the hint said the devchain's endpoint did not
    answer), an `rpc_url` in config.toml that does not answer, and the devchain's record
    naming an endpoint where no devchain runs."""
    m, owner, config = _account_as_contract(tmp_path, chain_home)
    out = m.kint("authorize", "payload", "--owner", owner)
    hint = _hint(out, "RPC_UNAVAILABLE")
    # The endpoint answered (with no data): not "the chain did not answer". The message
    # says what happened and stops: the step is the hint's (it said "; check the contract
    # setting and that the endpoint serves chain 31337" before the hint said it again).
    assert (f"kint: error: authorize payload: reading the authorization nonce: {m.url} has no "
            f"contract at {owner} (its call returned no data) [RPC_UNAVAILABLE]"
            in out.stderr.splitlines()), out.stderr
    assert hint == (f"check the contract (KINT_CONTRACT: `contract` in {config}) and the "
                    f"endpoint (the devchain's, which `kint devchain status` names): they "
                    f"must name kint's EpochAnchor and an endpoint of chain 31337, where it is "
                    f"deployed"), hint

    dead = closed_port_url()
    config.write_text(f'rpc_url = "{dead}"\nrpc_url_2 = "{dead}/second"\n')
    hint = _hint(m.kint("authorize", "payload", "--owner", owner), "RPC_UNAVAILABLE")
    assert hint == f"check the endpoints set in {config} and that they answer, then try again", \
        hint

    config.unlink()
    record = devchain_record(m.sb.kint_home)
    record.write_text(json.dumps({**json.loads(record.read_text()), "rpc_url": dead}))
    hint = _hint(m.kint("authorize", "payload", "--owner", owner), "RPC_UNAVAILABLE")
    assert hint == DEVCHAIN_RPC_HINT, hint


def _no_contract_hint(contract: str, endpoint: str) -> str:
    """The hint of a view that returned no data, the contract and the endpoint each named
    where it was set."""
    return (f"check the contract ({contract}) and the endpoint ({endpoint}): they must name "
            f"kint's EpochAnchor and an endpoint of chain 31337, where it is deployed")


def test_a_contract_that_computes_another_digest_names_where_it_was_set(tmp_path, chain_home):
    """`authorize payload` through a contract that answers every call, but is not kint's
    EpochAnchor (the authorization digest it computes is not the typed data's): the hint
    said "check KINT_CONTRACT: unset, it is kint's EpochAnchor on Base", naming no place,
    of a contract config.toml set. The code at the address is a real one, set with
    `anvil_setCode`: it returns 32 zero bytes to any call (PUSH1 32 PUSH1 0 RETURN)."""
    m = new_machine(tmp_path / "machine", chain_home)
    other = Account.create().address
    m.rpc("anvil_setCode", [other, "0x60206000f3"])
    config = m.sb.kint_home / "config.toml"
    config.write_text(f'contract = "{other}"\n')
    config.chmod(0o600)
    out = m.kint("authorize", "payload", "--owner", Account.create().address)
    assert out.returncode == 2, out.stdout + out.stderr
    assert _hint(out, "CONFIG_INVALID") == _no_contract_hint(
        f"KINT_CONTRACT: `contract` in {config}", DEVCHAIN), out.stderr
    assert f"the contract at {other} computes another digest" in out.stderr, out.stderr


def test_an_endpoint_set_in_the_commands_environment_is_named_there(tmp_path, chain_home):
    """KINT_RPC_URL and KINT_CONTRACT in the command's own environment (no space connected
    here: the command reads the chain with them): the hint names both there. It named the
    contract so and the endpoint as plain KINT_RPC_URL (review39b S2)."""
    m = new_machine(tmp_path / "machine", chain_home)
    owner = Account.create().address
    out = m.kint("authorize", "payload", "--owner", owner,
                 env={"KINT_RPC_URL": m.url, "KINT_CONTRACT": owner})
    assert _hint(out, "RPC_UNAVAILABLE") == _no_contract_hint(
        "KINT_CONTRACT in this command's environment",
        "KINT_RPC_URL in this command's environment"), out.stderr


def test_session_key_show_says_a_view_with_no_data_as_the_endpoints_answer(tmp_path, chain_home):
    """`session-key show` over a contract setting that names an account: the endpoint
    answered its canWrite with no data, and the warning says so with what to check, where
    it said "the chain did not answer" (review39b S1). The local half still prints."""
    m, owner, config = _account_as_contract(tmp_path, chain_home)
    out = m.kint("session-key", "show", "--owner", owner)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["address"] == m.key, out.stdout
    hint = _no_contract_hint(f"KINT_CONTRACT: `contract` in {config}",
                             "the devchain's, which `kint devchain status` names")
    assert (f"kint: warning: checking write rights: {m.url} has no contract at {owner} (its "
            f"call returned no data); showing the local half only ({hint})"
            in out.stderr.splitlines()), out.stderr
    assert "did not answer" not in out.stderr, out.stderr


def test_a_contract_with_no_epoch_anchor_is_refused_before_the_page_opens(tmp_path,
                                                                         chain_home):
    """`authorize page` over a contract setting that names an account: one canWrite read
    before the page opens is answered with no data, and the command refuses it as
    `authorize payload` refuses it, with no page: the human was sent to the wallet and paid
    gas for a transaction to an address with no EpochAnchor, and only then told
    (review39e M1). The page's wait is cut short, so that a page opened ends soon."""
    m, owner, config = _account_as_contract(tmp_path, chain_home)
    out = m.kint("authorize", "page", "--owner", owner,
                 env={"KINT_AUTHORIZE_PAGE_TIMEOUT": "3"})
    assert _hint(out, "RPC_UNAVAILABLE") == _no_contract_hint(
        f"KINT_CONTRACT: `contract` in {config}",
        "the devchain's, which `kint devchain status` names"), out.stderr
    assert (f"kint: error: authorize page: checking write rights: {m.url} has no contract at "
            f"{owner} (its call returned no data) [RPC_UNAVAILABLE]"
            in out.stderr.splitlines()), out.stderr
    assert out.stdout == "" and "setSessionKey" not in out.stderr, out.stdout + out.stderr


CAN_WRITE = "0x" + keccak(b"canWrite(address,address)")[:4].hex()


class PagePoll:
    """`kint authorize page` through `proxy`, the page's wallet report posted to it as the
    page posts it, once the page is open (its canWrite read before the page answered)."""

    def __init__(self, m: Machine, owner: str, count: int) -> None:
        env = {**m.sb.env, "KINT_AUTHORIZE_POLL_SECONDS": "0.2",
               "KINT_AUTHORIZE_POLL_COUNT": str(count)}
        self.proc = subprocess.Popen([KINT, "authorize", "page", "--owner", owner], text=True,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = [self.proc.stdout.readline(), self.proc.stdout.readline()]
        self.url = self.lines[1].strip()

    def report(self, owner: str, tx: str) -> subprocess.CompletedProcess[str]:
        """Post the wallet's report of `tx`, then wait for the command's end."""
        try:
            assert self.url.startswith("http://127.0.0.1:"), self.lines
            origin = self.url.rsplit("/kint/", 1)[0]
            posted = requests.post(f"{self.url}/result", timeout=10, headers={
                "Content-Type": "application/json", "Origin": origin,
                "Sec-Fetch-Site": "same-origin"}, data=json.dumps(
                    {"tx": tx, "account": owner}).encode())
            assert posted.status_code == 200, posted.text
            stdout, stderr = self.proc.communicate(timeout=120)
        finally:
            self.proc.kill()
            self.proc.wait()
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                           "".join(self.lines) + stdout, stderr)


def test_the_authorize_pages_poll_counts_a_view_with_no_data_as_a_miss(tmp_path, chain_home):
    """Once the wallet has sent setSessionKey, a canWrite the endpoint answers with no data
    (a load-balanced endpoint's node that lags) is a miss of the poll, not its end: the
    authorization that lands is seen at the next check. The first such answer ended the
    command, RPC_UNAVAILABLE with a hint to check settings that were right, and a user who
    followed it paid gas again (review39e M1). One that lasts is said in the TIMEOUT, whose
    hint looks the transaction up. The endpoint is a loopback proxy in front of the real
    devchain, which answers the chosen canWrite calls "0x" (tests/rpc_proxy.py `no_data`);
    the wallet's transaction is the owner's own, sent to the real anvil."""
    m = new_machine(tmp_path / "machine", chain_home)
    owner = m.owner()
    record = devchain_record(m.sb.kint_home)
    with RpcProxy(m.url) as proxy:
        record.write_text(json.dumps({**json.loads(record.read_text()), "rpc_url": proxy.url}))
        # Every check answered with no data, and no transaction: a TIMEOUT that says why.
        run = PagePoll(m, owner.address, count=3)
        proxy.set_mode("no_data", selector=CAN_WRITE, count=100)
        out = run.report(owner.address, "0x" + "ab" * 32)
        assert _hint(out, "TIMEOUT") == ("look up the transaction in the wallet, then kint "
                                         "session-key show"), out.stderr
        check = _no_contract_hint(f"the devchain's, from its record {record}", DEVCHAIN)
        assert (f"kint: error: canWrite({owner.address}, {m.key}) is still false after 3 "
                f"checks (last error: checking write rights: {proxy.url} has no contract at "
                f"{m.anchor.address} (its call returned no data); {check}) [TIMEOUT]"
                in out.stderr.splitlines()), out.stderr

        # The wallet's transaction landed; the poll's first canWrite is answered with no data.
        proxy.forward()
        run = PagePoll(m, owner.address, count=20)
        proxy.set_mode("no_data", selector=CAN_WRITE, count=1)
        receipt = m.anchor.transact(owner, m.anchor.encode_set_session_key(
            m.key, m.now() + 86400))
        out = run.report(owner.address, "0x" + bytes(receipt["transactionHash"]).hex())
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"authorized: {m.key} may push under {owner.address} until " in out.stdout, \
            out.stdout + out.stderr
        assert proxy.lies == [f"eth_call {CAN_WRITE}: no data"] * 4, proxy.lies
