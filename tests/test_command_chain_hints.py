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

from eth_account import Account

from authorize_support import new_machine
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
    # The endpoint answered (with no data): not "the chain did not answer".
    assert (f"kint: error: authorize payload: reading the authorization nonce: {m.url} has no "
            f"contract at {owner} (its call returned no data)") in out.stderr, out.stderr
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
