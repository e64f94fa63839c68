"""The chain endpoint as users meet it, under a running worker: a metered endpoint's rate
limit (HTTP 429), a send it refuses (or refuses as a spent nonce), a node that answers an
old head (behind), an endpoint that now serves another network (its chain id changed under
the worker), and a chain that lost its last block (a reorganisation, anvil_reorg). Each ends in a
refusal with its code, words that name the cause, and a hint, or works; never a traceback, and never
the wrong cause (CHAIN_MOVED's "another machine pushed", "does not decode", "HTTPError").

One machine per test on the session's devchain behind a loopback proxy (tests/rpc_proxy.py:
`rate_limited`, `stale_head`, `other_chain`) switched after the machine anchored two
epochs, so the space's worker is running when the endpoint changes. The tests' machines
are made and their supervisors started together, once for the module (each still new to
its test: nothing connected, nothing anchored, until its test takes it).
"""

from __future__ import annotations

import json

import pytest
from web3 import Web3

from chain_machines import behind_proxy, kjson, ok, owner_account
from conftest import write_rules as write
from machines_together import MachinePool
from kint.chain.config import devchain_record
from kint.commands.exit_codes import PUSH_PULL_REFUSED

ALL_READS = ["eth_call", "eth_getLogs", "eth_blockNumber", "eth_getTransactionCount",
             "eth_chainId", "eth_estimateGas", "eth_sendRawTransaction", "eth_getBalance",
             "eth_gasPrice", "eth_getBlockByNumber", "eth_maxPriorityFeePerGas",
             "eth_feeHistory", "eth_getTransactionByHash", "eth_getTransactionReceipt"]


@pytest.fixture(scope="module")
def started(request, tmp_path_factory, chain_home):
    """One machine for each test of this module the session runs, started together (one
    start's wait where each test waited its own); each test takes one and stops it, the
    rest are stopped at the end."""
    pool = MachinePool(request, "machine", tmp_path_factory.mktemp("node-faults"), chain_home)
    try:
        yield pool
    finally:
        pool.shutdown()


@pytest.fixture
def machine(started, chain_home):
    """A machine that anchored two epochs through the proxy, one change left unanchored;
    `block` is epoch 2's."""
    with behind_proxy(started.take(), chain_home) as (m, proxy):
        write(m.sibyl_db, m.tenant, **{"release-gate": "ship on green only"})
        kjson(m, "push")
        write(m.sibyl_db, m.tenant, **{"deploy-window": "deploys only before 3pm"})
        (epoch,) = kjson(m, "push")["epochs"]
        write(m.sibyl_db, m.tenant, **{"third": "written after epoch 2"})
        yield m, proxy, epoch


# Where a space whose endpoints a `kint connect --rpc-urls` kept (as behind_proxy's are) is
# given another: the hints that ask for one name it (kint.chain.endpoint_source).
KEPT_AGAIN = ("`kint connect --rpc-urls URL` again, which replaces the endpoints the last one "
              "kept for this space")


def _refused(out, code: str) -> str:
    assert out.returncode == PUSH_PULL_REFUSED, out.stdout + out.stderr
    assert f"[{code}]" in out.stderr and "hint: " in out.stderr, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    return out.stderr


def test_a_rate_limited_endpoint_is_said_as_such(machine):
    """HTTP 429 on every call: push and pull refuse RPC_UNAVAILABLE saying the endpoint
    rate limits this client (it said "HTTPError"); once it lets up, the push goes. Not
    retried: v0.3.0 retries a call that fails on a connection error or a timeout
    (10-configuration.md, KINT_RPC_TIMEOUT), and a 429 is an answer. The receipt wait, and
    verify and status, which read the head on their own, say the rate limit too."""
    m, proxy, _ = machine
    proxy.set_mode("rate_limited", methods=ALL_READS, count=10_000)
    for command in ("push", "pull"):
        said = _refused(m.kint(command), "RPC_UNAVAILABLE")
        assert "the endpoint is rate limiting this client (HTTP 429 Too Many Requests)" in said
    proxy.forward()
    assert [e["seq"] for e in kjson(m, "push")["epochs"]] == [3]

    # The limit met by the receipt wait alone, after the epoch was sent: said as the rate
    # limit (it said "waiting for a receipt: HTTPError"), with the journal that settles it.
    write(m.sibyl_db, m.tenant, **{"fourth": "written under a rate limit"})
    proxy.set_mode("rate_limited", methods=["eth_getTransactionReceipt"], count=10_000)
    said = _refused(m.kint("push"), "RPC_UNAVAILABLE")
    assert ("waiting for a receipt: the endpoint is rate limiting this client (HTTP 429 "
            "Too Many Requests)") in said and "epoch 4 was signed and may still land" in said
    # Verify and status, which check against the mirror while the head cannot be read, say
    # the rate limit (they said "rpc unresponsive" of an endpoint that answered).
    proxy.set_mode("rate_limited", methods=["eth_call"], count=10_000)
    limited = "(rpc rate limited (HTTP 429 Too Many Requests))"
    assert limited in ok(m.kint("status")).stdout
    assert f"chain head unavailable {limited}" in m.kint("verify", "release gate",
                                                          "--no-write").stderr
    proxy.forward()
    assert kjson(m, "pull")["head"]["seq"] == 4  # the journal settled: epoch 4 landed


def test_a_send_that_never_left_says_the_epoch_was_never_sent(machine):
    """The endpoint stops listening after the balance read that comes just before the
    send, so the send's connection is refused: nothing left this machine, and the push
    says the epoch was never sent and what the next push does with it (it said the epoch
    "may still land"). Once the endpoint listens again, the next push sends the journal's
    transaction and records epoch 3."""
    m, proxy, _ = machine
    proxy.calls.clear()
    proxy.set_mode("close_after", methods=["eth_getBalance"])
    said = _refused(m.kint("push"), "RPC_UNAVAILABLE")
    assert "sending a transaction: the endpoint could not be reached" in said, said
    assert ("epoch 3 was signed but never sent (no connection to the endpoint was made): "
            "the next push or pull sends it") in said, said
    assert "may still land" not in said
    assert "eth_sendRawTransaction" not in proxy.calls
    proxy.reopen()
    ok(m.kint("push"))
    assert kjson(m, "status")["head"]["seq"] == 3
    assert proxy.calls.count("eth_sendRawTransaction") == 1


def test_a_send_the_endpoint_refused_says_the_epoch_cannot_land(machine):
    """The endpoint answers the send with an error object: it did not take the epoch's
    transaction, so the push says it was refused and cannot land, and drops its journal
    (it said "may still land" and kept both journal and nonce, so the next push waited on
    a nonce the endpoint had never held). Once the endpoint takes sends again, the next
    push seals and sends epoch 3 at the nonce given back."""
    m, proxy, _ = machine
    proxy.set_mode("error_methods", methods=["eth_sendRawTransaction"],
                   message="transaction underpriced by the test")
    said = _refused(m.kint("push"), "RPC_UNAVAILABLE")
    assert ("sending a transaction" not in said
            and "the endpoint refused the transaction (" in said
            and "transaction underpriced by the test" in said
            and "the epoch was not taken and cannot land" in said), said
    assert "may still land" not in said
    # The endpoint the push sent through is one of those the space's connect kept: the
    # hint names them alone, where it named KINT_RPC_URL too, which this space does not use.
    assert ("hint: check what the endpoint said (one of those this space was given by `kint "
            "connect --rpc-urls`), then push again") in said, said
    assert "KINT_RPC_URL" not in said, said
    assert not list(m.kint_home.glob("pending-*.json"))
    proxy.forward()
    assert [e["seq"] for e in kjson(m, "push")["epochs"]] == [3]


def test_a_refused_send_under_a_notice_still_names_the_spaces_endpoints(machine):
    """`push --reanchor` on a chain that lost nothing, its send refused: the push's notice
    ("--reanchor not used") rides under the refusal's hint, and the hint still names the
    endpoints this space's connect kept. The notice was joined under the hint before it was
    named, so the hint matched none of the machine-wide ones and kept "KINT_RPC_URL, or the
    endpoints given to `kint connect --rpc-urls`", a setting this space does not use."""
    m, proxy, _ = machine
    proxy.set_mode("error_methods", methods=["eth_sendRawTransaction"],
                   message="transaction underpriced by the test")
    said = _refused(m.kint("push", "--reanchor"), "RPC_UNAVAILABLE")
    assert "the epoch was not taken and cannot land" in said, said
    assert ("hint: check what the endpoint said (one of those this space was given by `kint "
            "connect --rpc-urls`), then push again\n"
            "kint: --reanchor not used: the chain holds every epoch this machine saw "
            "anchored") in said, said
    assert "KINT_RPC_URL" not in said, said
    proxy.forward()
    assert [e["seq"] for e in kjson(m, "push")["epochs"]] == [3]


def test_a_send_refused_as_a_spent_nonce_keeps_its_journal(machine):
    """The endpoint refuses the send saying its nonce is spent ("nonce too low"). That
    nonce may have been spent by this very transaction, sent before through another
    space's endpoint (nonces.unstick), so the push keeps its journal and its nonce and says
    the next push or pull settles the epoch, not that it cannot land. Here the endpoint
    lied: the next push finds the nonce unspent, sends the journal's transaction, and
    records epoch 3 from it."""
    m, proxy, _ = machine
    proxy.set_mode("error_methods", methods=["eth_sendRawTransaction"], message="nonce too low")
    said = _refused(m.kint("push"), "RPC_UNAVAILABLE")
    assert ("the endpoint counts epoch 3's nonce as spent, perhaps by its own transaction "
            "sent before: the next push or pull settles it") in said, said
    assert "cannot land" not in said
    (pending,) = m.kint_home.glob("pending-*.json")
    journal = json.loads(pending.read_text())
    proxy.forward()
    ok(m.kint("push"))
    assert kjson(m, "status")["head"]["seq"] == 3
    # The journal's own transaction, by its hash, is the one mined: the devchain's latest
    # block may by now hold another test's (the suite's two workers share one anvil; CI's
    # run at 0a4739f read one there).
    w3 = Web3(Web3.HTTPProvider(proxy.url))
    sent = w3.eth.get_transaction(Web3.keccak(hexstr=journal["raw_tx"]))
    assert sent["nonce"] == journal["nonce"] and sent["blockNumber"] is not None


def test_an_endpoint_behind_this_machine_is_a_stale_rpc_to_push_too(machine):
    """The endpoint answers the head as it was before epoch 2: push refuses STALE_RPC
    naming the stale endpoint (it said CHAIN_MOVED, "another machine pushed", exit 4,
    sending the user to a pull that only refuses the same head), pull refuses it as
    before, verify refuses, and status says the endpoint is behind this machine."""
    m, proxy, epoch = machine
    proxy.set_mode("stale_head", block=epoch["block"] - 1)
    said = _refused(m.kint("push"), "STALE_RPC")
    assert ("the endpoint's head (seq 1) is older than the seq 2 this machine last saw "
            "anchored: a stale or lagging RPC") in said, said
    assert "another machine pushed" not in said
    pulled = m.kint("pull")
    assert pulled.returncode == 6 and "[STALE_RPC]" in pulled.stderr, pulled.stderr
    assert kjson(m, "verify", "release gate", "--no-write")["decision"] == "refuse"
    status = ok(m.kint("status")).stdout
    assert ("(BEHIND this machine: a stale or lagging RPC, or a reorganisation: `kint push` "
            "says which)") in status, status
    proxy.forward()
    assert [e["seq"] for e in kjson(m, "push")["epochs"]] == [3]


def test_an_endpoint_now_on_another_chain_is_named(machine):
    """The endpoint starts answering for chain 1, where no EpochAnchor is: push and pull
    name the chain it answers for and the one the space is on (they said "the endpoint's
    answer does not decode (Tried to read 32 bytes, only got 0 bytes.)"), and so do verify
    and status, which said "rpc unresponsive"."""
    m, proxy, _ = machine
    proxy.set_mode("other_chain", chain_id=1)
    other = f"{proxy.url} answers for chain 1, not 31337, the chain this space is on"
    for command in ("push", "pull"):
        said = _refused(m.kint(command), "RPC_UNAVAILABLE")
        assert other in said and "point the space's endpoint at chain 31337" in said, said
        # The space's endpoints are those its connect kept: a connect again replaces them,
        # where the machine-wide rpc_url the hint named changes nothing.
        assert KEPT_AGAIN in said and "rpc_url in config.toml, or" not in said, said
    # verify checks against the mirror, as for any endpoint it cannot read, and says why
    # (it said "rpc unresponsive" of an endpoint that answered)
    checked = m.kint("verify", "release gate", "--no-write")
    assert f"kint: chain head unavailable (reading the head: {other}" in checked.stderr, \
        checked.stderr
    assert f"chain head: unavailable (reading the head: {other}" in ok(m.kint("status")).stdout
    proxy.forward()
    assert [e["seq"] for e in kjson(m, "push")["epochs"]] == [3]


# Drops the devchain's last block (anvil_reorg): alone on the run's devchain.
@pytest.mark.chain_exclusive
def test_a_chain_that_lost_the_last_block_is_said_as_a_reorganisation(machine, chain_home):
    """The anvil drops its last block, the one that carried epoch 2 (`anvil_reorg`, depth
    1, the transaction not put back): the endpoint is at that height again with the head
    at seq 1. Push and pull refuse STALE_RPC naming a reorganisation that dropped epoch 2
    and asking for a second endpoint's word (they said a stale endpoint, to wait for it to
    catch up, which would never help); verify refuses. Nothing is changed here."""
    m, _, epoch = machine
    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    assert w3.eth.block_number == epoch["block"], "the push's block is not the last"
    answer = w3.provider.make_request("anvil_reorg", [1, []])
    assert "error" not in answer, answer
    lost = (f"the endpoint's head (seq 1) is older than the seq 2 this machine saw anchored "
            f"at block {epoch['block']}, yet the endpoint is at block {epoch['block']}: a "
            f"reorganisation dropped epoch 2 from the chain, or the endpoint is lying")
    said = _refused(m.kint("push"), "STALE_RPC")
    assert lost in said and f"ask another endpoint ({KEPT_AGAIN}" in said, said
    pulled = m.kint("pull")
    assert pulled.returncode == 6 and lost in pulled.stderr, pulled.stderr
    assert f"ask another endpoint ({KEPT_AGAIN}" in pulled.stderr, pulled.stderr
    assert kjson(m, "verify", "release gate", "--no-write")["decision"] == "refuse"


def test_a_block_check_the_endpoint_refuses_lets_pull_and_push_go_on(machine):
    """This machine's record of epoch 2 names another block than the head does (as after
    the chain put it back in a later one), and the endpoint refuses the Epoch event read
    that would check it (eth_getLogs answered with an error object). The correction is a
    refinement: pull and push go on, the record unchanged and one log line said, where
    both failed RPC_UNAVAILABLE; the next pull, the endpoint well again, corrects it."""
    m, proxy, epoch = machine
    (meta_path,) = (m.kint_home / "epochs").glob("*/00000002.meta.json")
    meta = json.loads(meta_path.read_text())
    assert meta["block"] == epoch["block"]

    def record_elsewhere() -> None:
        meta_path.write_text(json.dumps({**meta, "block": epoch["block"] - 1}))

    record_elsewhere()
    proxy.set_mode("error_methods", methods=["eth_getLogs"], message="logs are switched off")
    assert kjson(m, "pull")["applied"] == []
    assert json.loads(meta_path.read_text())["block"] == epoch["block"] - 1
    log = (m.kint_home / "supervisor.log").read_text(errors="replace")
    assert f"epoch 2 not checked at block {epoch['block']}" in log, log[-2000:]
    proxy.forward()
    assert kjson(m, "pull")["applied"] == []
    assert json.loads(meta_path.read_text())["block"] == epoch["block"]

    record_elsewhere()
    proxy.set_mode("error_methods", methods=["eth_getLogs"], message="logs are switched off")
    assert [e["seq"] for e in kjson(m, "push")["epochs"]] == [3]


def _kept_or_table(m) -> str:
    """Where another endpoint is given to `m`'s space (its connect kept its endpoints): a
    connect again, or the space's own table, named by the space's label."""
    return (f"{KEPT_AGAIN}, or rpc_url in the space's [spaces.\"{m.label(m.sibyl_db)}\"] "
            f"table in config.toml")


def test_reanchor_past_an_endpoint_that_contradicts_itself_asks_another(machine):
    """`push --reanchor` where the endpoint answers the head at seq 1 (as it stood before
    epoch 2's block) while it serves epoch 2's transaction in that block: the endpoint
    contradicts itself, nothing is sent (reanchor._not_known), and the hint asks another
    endpoint's word, named where this space's are set; the space's table by its label,
    where it said `<label>`. With epoch 2's cached prev not the endpoint's seq 1, the
    chain below is not the one this machine saw (reanchor._dropped), and the hint asks
    another endpoint for the head, named alike. Neither refusal had a test."""
    m, proxy, epoch = machine
    space16 = kjson(m, "status")["space"]
    other = _kept_or_table(m)
    # The push's one head read answered from before epoch 2's block; eth_blockNumber
    # forwarded, at or past that block: a reorganisation's picture, not a lagging node's.
    proxy.set_mode("stale_head", block=epoch["block"] - 1, reads=1)
    out = m.kint("push", "--reanchor", "--dry-run")
    said = _refused(out, "STALE_RPC")
    assert (f"epoch 2's transaction {epoch['tx'][:14]} is in block {epoch['block']} at the "
            f"endpoint, yet its head is below seq 2: the endpoint contradicts itself; "
            f"--reanchor sent nothing") in said, said
    assert f"hint: ask another endpoint ({other})" in said, said
    assert "<label>" not in said, said
    meta = m.kint_home / "epochs" / space16 / "00000002.meta.json"
    cached = json.loads(meta.read_text())
    meta.write_text(json.dumps({**cached, "prev": "ee" * 32}))
    proxy.set_mode("stale_head", block=epoch["block"] - 1, reads=1)
    said = _refused(m.kint("push", "--reanchor", "--dry-run"), "STALE_RPC")
    assert ("epoch 2 that this machine holds chains on eeeeeeeeeeee, not on the "
            f"{cached['prev'][:12]} the endpoint holds at seq 1") in said, said
    assert f"hint: ask another endpoint for the head ({other}) before anything else" in said
    assert "<label>" not in said, said


def _owner_env(m) -> dict[str, str]:
    """The environment of the space's owner for `kint authorize direct` (`connect --dev`
    made the owner wallet on this machine)."""
    owner = kjson(m, "status")["owner"]
    return {"KINT_OWNER_KEY": owner_account(m, owner).key.hex()}


def test_an_owner_send_the_endpoint_refused_names_the_spaces_endpoints(machine):
    """`kint authorize direct`, its send refused by the endpoint (an error object for
    eth_sendRawTransaction): the hint names the endpoints this space's connect kept, which
    the command sent through (the worker's, `space_chain`), as a push's refused send names
    them. It said "check what the endpoint said and KINT_RPC_URL", a setting this space
    does not use."""
    m, proxy, _ = machine
    proxy.set_mode("error_methods", methods=["eth_sendRawTransaction"],
                   message="transaction underpriced by the test")
    out = m.kint("authorize", "direct", "--days", "2", env=_owner_env(m))
    assert out.returncode != 0 and "[RPC_UNAVAILABLE]" in out.stderr, out.stdout + out.stderr
    assert "transaction underpriced by the test" in out.stderr, out.stderr
    assert ("hint: check what the endpoint said (one of those this space was given by `kint "
            "connect --rpc-urls`), then run the command again") in out.stderr, out.stderr
    assert "KINT_RPC_URL" not in out.stderr, out.stderr


def test_an_owner_command_on_an_endpoint_of_another_chain_names_the_spaces_table(machine):
    """`kint session-key show` where the space's endpoint answers for chain 1, where no
    EpochAnchor is, from just after the command's own chain id check (the proxy forwards
    that one read): the contract read that returned no data names both chains and where
    the space is given another endpoint, its table by the space's label. The command
    reads the chain in its own process, which serves no space, and said `<label>`."""
    m, proxy, _ = machine
    proxy.set_mode("other_chain", chain_id=1, true_ids=1)
    out = ok(m.kint("session-key", "show"))
    assert f"{proxy.url} answers for chain 1, not 31337" in out.stderr, out.stderr
    assert _kept_or_table(m) in out.stderr, out.stderr
    assert "<label>" not in out.stderr, out.stderr
