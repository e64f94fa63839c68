"""A command's own chain call (kint.commands.onchain: `authorize`, `session-key show`) that
fails names where the settings it went through were set, as a worker's refusal names them
(kint.tenant_worker.rpc_hint, kint.tenant_worker.enrolled_chain.contract_source).

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

import requests
from eth_account import Account

from authorize_support import new_machine
from conftest import KINT
from kint.chain.config import devchain_record
from kint.protocol.errors import DEVCHAIN_RPC_HINT
from rpc_proxy import closed_port_url


def _hint(out, code: str) -> str:
    """The hint of refusal `out`, which must be exit 2 with `code`."""
    assert out.returncode == 2, out.stdout + out.stderr
    message, hint = out.stderr.rstrip("\n").split("\n")[-2:]
    assert message.startswith("kint: error: ") and message.endswith(f"[{code}]"), out.stderr
    assert hint.startswith("hint: "), out.stderr
    return hint.removeprefix("hint: ")


def test_a_commands_chain_refusals_name_where_its_endpoint_and_contract_were_set(
        tmp_path, chain_home):
    """`authorize payload` refused three ways, each hint naming what set the setting at
    fault: a `contract` in config.toml with no code (an account's address: the endpoint
    answers its call with no data, where the hint said the devchain's endpoint did not
    answer), an `rpc_url` in config.toml that does not answer, and the devchain's record
    naming an endpoint where no devchain runs."""
    m = new_machine(tmp_path / "machine", chain_home)
    owner = Account.create().address
    config = m.sb.kint_home / "config.toml"
    config.write_text(f'contract = "{owner}"\n')
    config.chmod(0o600)
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
    m = new_machine(tmp_path / "machine", chain_home)
    owner = Account.create().address
    config = m.sb.kint_home / "config.toml"
    config.write_text(f'contract = "{owner}"\n')
    config.chmod(0o600)
    out = m.kint("session-key", "show", "--owner", owner)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["address"] == m.key, out.stdout
    hint = _no_contract_hint(f"KINT_CONTRACT: `contract` in {config}",
                             "the devchain's, which `kint devchain status` names")
    assert (f"kint: warning: checking write rights: {m.url} has no contract at {owner} (its "
            f"call returned no data); showing the local half only ({hint})"
            in out.stderr.splitlines()), out.stderr
    assert "did not answer" not in out.stderr, out.stderr


def test_the_authorize_pages_poll_ends_on_a_view_with_no_data(tmp_path, chain_home):
    """`authorize page` over a contract setting that names an account: the wallet reports a
    transaction, and the first canWrite the endpoint answers with no data ends the poll,
    refused as `authorize payload` refuses it. Each check was a miss and the command
    waited them all out, then said canWrite was "still false" (TIMEOUT) with the chain's
    words of a failed call (review39b S1). The page is a real loopback server of the real
    CLI; the wallet's report is posted to it as the page posts it."""
    m = new_machine(tmp_path / "machine", chain_home)
    owner = Account.create().address
    config = m.sb.kint_home / "config.toml"
    config.write_text(f'contract = "{owner}"\n')
    config.chmod(0o600)
    # A few checks, so that one waited out ends too, and is told apart by what it says.
    env = {**m.sb.env, "KINT_AUTHORIZE_POLL_SECONDS": "0.2", "KINT_AUTHORIZE_POLL_COUNT": "3"}
    proc = subprocess.Popen([KINT, "authorize", "page", "--owner", owner], text=True, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdout.readline()
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        origin = url.rsplit("/kint/", 1)[0]
        posted = requests.post(f"{url}/result", timeout=10, headers={
            "Content-Type": "application/json", "Origin": origin,
            "Sec-Fetch-Site": "same-origin"}, data=json.dumps(
                {"tx": "0x" + "ab" * 32, "account": owner}).encode())
        assert posted.status_code == 200, posted.text
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    out = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    assert _hint(out, "RPC_UNAVAILABLE") == _no_contract_hint(
        f"KINT_CONTRACT: `contract` in {config}",
        "the devchain's, which `kint devchain status` names"), stderr
    assert (f"kint: error: authorize page: checking write rights: {m.url} has no contract at "
            f"{owner} (its call returned no data) [RPC_UNAVAILABLE]"
            in stderr.splitlines()), stderr
    assert "still false" not in stderr, stderr
