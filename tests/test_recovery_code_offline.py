"""`kint connect --recovery-code-stdin` while the chain cannot be read (05-keys.md, "The
recovery code"; lane leftovers17).

The code is bound to the vault before it is trusted. With no header from the chain, v0.3.0
checks it against the cached data key or the newest cached epoch header, and with neither
refuses (a recovery code cannot start a vault). Ours asked the wraps file only: with that
file gone, a machine holding the data key and the epochs could not take its own code, and
the refusal said the chain "holds no epochs" of a chain it never read.

Through the real CLI: machine A connects with --dev through a loopback proxy
(tests/rpc_proxy.py) and anchors one epoch; then the proxy refuses every read of the chain.
What A holds is taken away one file at a time, most trusted first, and each time the code is
checked against the next source (and another vault's code refused, naming that source).
Machine C, which never connected, is refused with the chain named as the reason.
"""

from __future__ import annotations

import json
import shutil

import pytest

from chain_machines import kjson, machine_behind_proxy, new_machine, recovery_code
from conftest import sibyl_client
from kint.chain.config import devchain_record
from kint.custody.recovery_code import encode_recovery_code
from rpc_proxy import RpcProxy

READS = ["eth_call", "eth_getLogs", "eth_blockNumber", "eth_getTransactionByHash",
         "eth_chainId", "eth_getBlockByNumber"]
ANOTHER_VAULTS_CODE = encode_recovery_code(b"\x5a" * 32)
NOT_OURS = "this recovery code does not belong to the vault anchored under this owner"


def refuse_reads(proxy: RpcProxy) -> None:
    proxy.set_mode("error_methods", methods=READS, message="the endpoint is down")


def connect_code(sb, owner: str, code: str):
    return sb.kint("connect", "--owner", owner, "--recovery-code-stdin", "--json",
                   input=code + "\n")


def refused_with(out, phrase: str, hint: str) -> None:
    assert out.returncode != 0, out.stdout + out.stderr
    refusal = json.loads(out.stdout)
    assert phrase in refusal["message"] and hint in refusal["hint"], refusal


@pytest.fixture()
def machine_a(tmp_path, chain_home):
    with machine_behind_proxy(tmp_path, chain_home) as (sb, proxy):
        status = kjson(sb, "status")
        sibyl_client(sb.sibyl_db, sb.tenant).set_entity("rules", "one", {"rule": "anchored"})
        assert kjson(sb, "push")["pushed"] == 1
        sb.owner, sb.space16 = status["owner"], status["space"]
        sb.code = recovery_code(sb, sb.space16)
        refuse_reads(proxy)
        yield sb


def test_the_code_is_checked_against_what_the_machine_holds_in_order(machine_a):
    sb = machine_a
    wraps = sb.kint_home / f"wraps-{sb.space16}.json"
    cache = sb.kint_home / f"vault-{sb.space16}.aes"
    epochs = sb.kint_home / "epochs" / sb.space16

    # 1. The cached data key, with the wraps file gone: main refused the vault's own code.
    wraps.unlink()
    refused_with(connect_code(sb, sb.owner, ANOTHER_VAULTS_CODE), NOT_OURS,
                 "checked against this machine's cached data key")
    connected = json.loads(connect_code(sb, sb.owner, sb.code).stdout)
    assert connected["source"] == "recovery code", connected
    assert "the endpoint is down" in connected["chain_unreadable"], connected
    assert wraps.exists()  # the wraps of that key, from the cached epoch's header

    # 2. The newest cached epoch's header, with the key cache gone too.
    wraps.unlink()
    cache.unlink()
    refused_with(connect_code(sb, sb.owner, ANOTHER_VAULTS_CODE), NOT_OURS,
                 "the header of epoch 1 in this machine's epoch cache")
    assert json.loads(connect_code(sb, sb.owner, sb.code).stdout)["source"] == "recovery code"
    assert cache.exists() and wraps.exists()

    # 3. Nothing left: a recovery code never starts a vault, and the chain is the reason.
    wraps.unlink()
    cache.unlink()
    shutil.rmtree(epochs)
    refused_with(connect_code(sb, sb.owner, sb.code),
                 "a recovery code cannot start a vault: the chain could not be read (",
                 "connect again when the chain can be read (check the endpoints this space "
                 "was given by `kint connect --rpc-urls` and that they answer): ")


def test_a_machine_that_never_connected_is_told_the_chain_is_the_reason(tmp_path, chain_home):
    record = json.loads(devchain_record(chain_home).read_text())
    proxy = RpcProxy(record["rpc_url"], max_hang_s=30).start()
    sb = new_machine(tmp_path / "c", chain_home)
    try:
        refuse_reads(proxy)
        out = sb.kint("connect", "--owner", "0x" + "12" * 20, "--recovery-code-stdin",
                      "--rpc-urls", proxy.url, "--json", input=ANOTHER_VAULTS_CODE + "\n")
        refused_with(out, "a recovery code cannot start a vault: the chain could not be read (",
                     "connect again when the chain can be read (check the URLs given to "
                     "--rpc-urls and that they answer): ")
        # The endpoint that was not read is the one given to this connect, where it said
        # "check KINT_RPC_URL or the space's endpoints", neither of which it used.
        assert "KINT_RPC_URL" not in json.loads(out.stdout)["hint"], out.stdout
        assert "holds no epochs" not in out.stdout
    finally:
        proxy.forward()
        sb.shutdown()
        proxy.stop()


def test_an_agents_connect_with_the_code_is_its_own_to_make_again(machine_a):
    """The same refusal met by an agent's memory_connect (a real kint-server): its hint
    said "connect again when the chain can be read (check KINT_RPC_URL ...)", which the
    translation took for the human's step, whole, and stopped the agent. Connecting again
    is the agent's own call once the endpoint answers; only an endpoint that stays down is
    the human's, named where this space's are set (the ones its connect kept), where it
    said "check KINT_RPC_URL or the space's endpoints" whatever was in force."""
    from mcp_session import AgentProcess

    sb = machine_a
    (sb.kint_home / f"wraps-{sb.space16}.json").unlink()
    (sb.kint_home / f"vault-{sb.space16}.aes").unlink()
    shutil.rmtree(sb.kint_home / "epochs" / sb.space16)
    agent = AgentProcess(sb.env).start()
    try:
        refused = agent.failed("memory_connect", owner=sb.owner, recovery_code=sb.code)
    finally:
        agent.close()
    assert "a recovery code cannot start a vault: the chain could not be read (" in \
        refused["message"], refused
    assert refused["hint"].startswith(
        "call memory_connect again in a minute with the same arguments: the chain could not "
        "be read, and once it can, the head epoch's header checks the code; if it fails "
        "again, stop and tell the human to check the endpoints this space was given by `kint "
        "connect --rpc-urls` and that they answer"), refused


def test_offline_in_config_toml_is_named_where_it_is_set(machine_a):
    """KINT_OFFLINE from `offline = true` in config.toml, nothing in any environment: the
    refusal sent the user to unset KINT_OFFLINE, and an agent's memory_connect (a real
    kint-server) had the human look "where kint-server was started", where nothing sets
    it, so the next connect was refused again. Both now name the file, which is where it
    is unset."""
    from mcp_session import AgentProcess

    sb = machine_a
    (sb.kint_home / f"wraps-{sb.space16}.json").unlink()
    (sb.kint_home / f"vault-{sb.space16}.aes").unlink()
    shutil.rmtree(sb.kint_home / "epochs" / sb.space16)
    config = sb.kint_home / "config.toml"
    before = config.read_text() if config.exists() else ""
    config.write_text("offline = true\n" + before)  # top level, before any table
    config.chmod(0o600)
    assert "KINT_OFFLINE" not in sb.env
    refused_with(connect_code(sb, sb.owner, sb.code),
                 f"KINT_OFFLINE=1 (from file {config}) keeps the chain from being read",
                 f"remove `offline` from {config} (or set it to false) and connect again")
    agent = AgentProcess(sb.env).start()
    try:
        refused = agent.failed("memory_connect", owner=sb.owner, recovery_code=sb.code)
    finally:
        agent.close()
    assert refused["hint"].startswith(
        f"stop and tell the human: `offline` in {config} keeps the chain from being read; "
        f"removing it (or setting it to false) is theirs"), refused
    assert "kint-server" not in refused["hint"], refused
