"""`kint session-key` and the CLI lanes of `kint authorize` on the session's devchain.

Each lane authorizes a real session key on a real EpochAnchor (anvil on 127.0.0.1), driven
through the `kint` command as a user runs it, in a machine of its own (HOME, KINT_HOME). The
owner's signature in the payload lane is made outside kint, with eth-account over the typed
data kint printed. The refusals and messages are kint v0.3.0's (docs: keys, contract, cli).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat

import pytest
from eth_account import Account

from authorize_support import ADDRESS, Machine, new_machine
from chain_machines import make_session_key
from conftest import TENANT, kint_loading, make_sandbox
from machines_together import side_by_side
from table_runs import running_ahead
from kint.chain.config import devchain_record
from kint.protocol import ErrorCode
from kint.protocol.hints import SESSION_KEY_MISSING_HINT
from kint.spaces import space_id

DAY = 86400


@pytest.fixture
def machine(tmp_path, chain_home) -> Machine:
    """A machine whose tests write its enrolment: `session-key show` and `authorize` then
    ask the space's worker for its chain settings, so a supervisor starts; stopped after."""
    m = new_machine(tmp_path / "machine", chain_home)
    yield m
    m.sb.shutdown()


def ok(out):
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out


def refused(out, text: str, code: str | None = None):
    """A refusal as every kint refusal reads (README, "Commands"): exit 2, one line of what
    happened ending in its code from the protocol's closed set, one `hint:` line of what
    to do."""
    assert out.returncode == 2, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    assert text in out.stderr, out.stderr
    lines = out.stderr.rstrip("\n").split("\n")
    message, hint = lines[-2:]
    assert message.startswith("kint: error: ") and message.endswith("]"), out.stderr
    found = message.rsplit(" [", 1)[1][:-1]
    assert found in {c.value for c in ErrorCode}, out.stderr
    assert code is None or found == code, (code, out.stderr)
    assert hint.startswith("hint: ") and len(hint) > len("hint: "), out.stderr
    return out


def sign(owner, typed: dict) -> str:
    return "0x" + Account.sign_typed_data(owner.key, full_message=typed).signature.hex()


def payload(m: Machine, *args: str) -> tuple[dict, str]:
    """(typed data, the submit line kint printed) of `kint authorize payload`."""
    out = ok(m.kint("authorize", "payload", *args))
    assert out.stdout.count("\n") == 1, "the typed data is one line"
    # kint v0.3.0's two lines on stderr (02-quickstart.md): what was stamped, then submit.
    stamped, then = out.stderr.strip().splitlines()
    typed = json.loads(out.stdout)
    message = typed["message"]
    assert stamped == (f"# nonce {message['nonce']}, deadline {message['deadline']}, expiry "
                       f"{message['expiry']}; sign with: cast wallet sign --data --from-file "
                       f"<this file>")
    assert then.startswith("# then: kint authorize submit ")
    return typed, then.removeprefix("# then: ")


def payload_before(m: Machine, owner: str) -> str:
    """The submit line of `kint authorize --owner OWNER payload`: the flag before the action."""
    then = ok(m.kint("authorize", "--owner", owner, "payload")).stderr.strip().splitlines()[-1]
    assert then.startswith("# then: ")
    return then.removeprefix("# then: ")


def run_line(m: Machine, line: str, stdin: str):
    argv = shlex.split(line)
    assert argv[0] == "kint"
    return m.kint(*argv[1:], input=stdin)


# -- session-key ------------------------------------------------------------------------------


def test_session_key_create_show_rotate(tmp_path, chain_home):
    m = new_machine(tmp_path / "machine", chain_home, create_key=False)
    shown = json.loads(ok(m.kint("session-key", "show")).stdout)
    assert shown == {"address": None, "path": str(m.sb.kint_home / "session.key"),
                     "exists": False}

    created = ok(m.kint("session-key", "create"))
    first = created.stdout.strip()
    assert first.startswith("created: ") and ADDRESS.fullmatch(first.split(": ")[1])
    # kint v0.3.0's next step (02-quickstart.md), on stderr: stdout is the one line.
    assert created.stderr.splitlines() == [
        "fund it with a little ETH on Base and authorize it from the owner (kint authorize ...)"]
    address = first.split(": ")[1]
    again = ok(m.kint("session-key", "create"))
    assert again.stdout.strip() == f"exists: {address}" and again.stderr == ""
    keystore = m.sb.kint_home / "session.key"
    assert stat.S_IMODE(keystore.stat().st_mode) == 0o600
    assert stat.S_IMODE(m.sb.kint_home.stat().st_mode) == 0o700

    shown = json.loads(ok(m.kint("session-key", "show")).stdout)
    assert shown == {"address": address, "path": str(keystore), "exists": True,
                     # the devchain's record, read in the command (no space connected)
                     "chain": {"chain_id": 31337, "rpc": m.url,
                               "rpc_source": "devchain record"},
                     "balance_wei": 0, "balance_eth": "0"}
    owner = m.owner(0)
    m.key = address
    m.fund_key(25 * 10**15)
    shown = json.loads(ok(m.kint("session-key", "show", "--owner", owner.address)).stdout)
    assert shown["balance_wei"] == 25 * 10**15 and shown["balance_eth"] == "0.025"
    assert shown["owner"] == owner.address
    assert shown["authorized"] is False and shown["expiry"] == 0

    out = ok(m.kint("session-key", "rotate"))
    old, new = out.stdout.strip().removeprefix("rotated: ").split(" -> ")
    assert old == address and ADDRESS.fullmatch(new) and new != address
    assert "session.key.old" in out.stderr
    assert json.loads((m.sb.kint_home / "session.key.old").read_text())["address"].lower() \
        == address[2:].lower()
    assert json.loads(ok(m.kint("session-key", "show")).stdout)["address"] == new


def test_rotate_with_no_key_names_no_old_keystore(tmp_path, chain_home):
    """A rotate on a machine with no key makes one and moves nothing: its stderr does not
    send the user to a session.key.old that is not there."""
    m = new_machine(tmp_path / "machine", chain_home, create_key=False)
    out = ok(m.kint("session-key", "rotate"))
    assert out.stdout.startswith("rotated: (no previous key) -> 0x")
    assert not (m.sb.kint_home / "session.key.old").exists()
    assert "session.key.old" not in out.stderr and "authorize the new key" in out.stderr


def enrolled(path, owner: str, contract: str, rpc_urls: list[str] | None = None) -> None:
    """An enrolment as `kint connect` writes one (the file that says this machine is
    connected for the space), naming `owner`, the contract it was connected on (authorize
    and show refuse another for the connected owner) and, when given, the space's own
    endpoints."""
    from kint.tenant_worker.enrolment import Enrolment, save_enrolment

    save_enrolment(path, Enrolment(space=space_id(TENANT), tenant=TENANT, owner=owner,
                                   account="eoa", contract=contract, chain_id=31337,
                                   rpc_urls=rpc_urls))


def test_show_and_lanes_default_to_the_connected_owner(machine):
    owner = machine.owner()
    enrol = machine.sb.kint_home / f"enrol-{space_id(TENANT)[:16]}.json"
    enrolled(enrol, owner.address.lower(), machine.anchor.address)
    shown = json.loads(ok(machine.kint("session-key", "show")).stdout)
    assert shown["owner"] == owner.address and shown["authorized"] is False
    typed, line = payload(machine)
    # v0.3.0's submit line: the connected owner is submit's default too.
    assert typed["message"]["owner"] == owner.address
    assert line == (f"kint authorize submit --deadline {typed['message']['deadline']} --expiry "
                    f"{typed['message']['expiry']} --signature -")
    # Another tenant's space is not connected here: its owner must be given.
    refused(machine.kint("--tenant", "someone-else", "authorize", "payload"),
            "no owner known on this machine: pass --owner 0x... or run kint connect",
            "NOT_CONNECTED")


def test_a_connected_spaces_own_endpoints_are_read(machine):
    """`kint connect --rpc-urls` gives a space endpoints of its own, which its worker reads
    and sends through. `session-key show` and `authorize` for that space read the chain
    through them too (v0.3.0: one primary endpoint serves every read and send), and `show`
    names the one it read; for a space not connected here, the machine's endpoint."""
    from rpc_proxy import RpcProxy

    owner = machine.owner()
    enrol = machine.sb.kint_home / f"enrol-{space_id(TENANT)[:16]}.json"
    with RpcProxy(machine.url) as proxy:
        enrolled(enrol, owner.address, machine.anchor.address, rpc_urls=[proxy.url])
        shown = json.loads(ok(machine.kint("session-key", "show")).stdout)
        assert shown["chain"] == {"chain_id": 31337, "rpc": proxy.url,
                                  "rpc_source": "connect --rpc-urls"}, shown
        assert shown["authorized"] is False and "eth_getBalance" in proxy.calls
        typed, _ = payload(machine)
        assert typed["domain"]["chainId"] == 31337
        assert proxy.calls.count("eth_call") >= 2  # authNonce and the contract's digest
        seen = len(proxy.calls)
        elsewhere = json.loads(ok(machine.kint("--tenant", "someone-else", "session-key",
                                               "show", "--owner", owner.address)).stdout)
        assert elsewhere["chain"]["rpc"] == machine.url and len(proxy.calls) == seen


# -- direct -----------------------------------------------------------------------------------


def test_direct_lane_authorizes_from_the_owner_key(machine):
    owner, stranger = machine.owner(), machine.owner()
    refused(machine.kint("authorize", "direct", "--owner", owner.address),
            "KINT_OWNER_KEY is not set", "BAD_REQUEST")
    out = refused(machine.kint("authorize", "direct", "--owner", owner.address,
                               env={"KINT_OWNER_KEY": stranger.key.hex()}),
                  f"KINT_OWNER_KEY is {stranger.address}, not the owner {owner.address}",
                  "WRONG_KEY")
    assert stranger.key.hex().removeprefix("0x") not in out.stdout + out.stderr
    assert machine.tx_count(stranger.address) == 0 and machine.tx_count(owner.address) == 0
    refused(machine.kint("authorize", "direct", "--owner", owner.address,
                         env={"KINT_OWNER_KEY": "0x1234"}), "KINT_OWNER_KEY is not a private key")

    before = machine.now()
    out = ok(machine.kint("authorize", "direct", "--owner", owner.address,
                          env={"KINT_OWNER_KEY": owner.key.hex()}))
    assert owner.key.hex().removeprefix("0x") not in out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    # kint v0.3.0's two lines (02-quickstart.md), then the expiry.
    assert re.fullmatch(r"submitted 0x[0-9a-f]{64}", lines[0]), lines
    sent = machine.anchor.w3.eth.get_transaction(lines[0].split()[1])
    assert sent["from"] == owner.address
    assert re.fullmatch(rf"authorized {machine.key} under {owner.address}; cost "
                        rf"\d+(\.\d+)? ETH, block {sent['blockNumber']}", lines[1]), lines
    assert lines[2].startswith("expiry ") and lines[2].endswith(", 30 days)")
    assert machine.anchor.can_write(owner.address, machine.key)
    expiry = machine.anchor.session_key_expiry(owner.address, machine.key)
    assert before + 30 * DAY <= expiry <= machine.now() + 30 * DAY + 60
    assert machine.anchor.auth_nonce(owner.address) == 1

    # The flags may come before the action, as v0.3.0's parser takes them.
    ok(machine.kint("authorize", "--days", "7", "direct", "--owner", owner.address,
                    env={"KINT_OWNER_KEY": owner.key.hex().removeprefix("0x")}))
    expiry = machine.anchor.session_key_expiry(owner.address, machine.key)
    assert machine.now() + 7 * DAY - 60 <= expiry <= machine.now() + 7 * DAY + 60


# -- payload and submit -----------------------------------------------------------------------


def test_payload_then_submit_with_a_signature_made_outside_kint(machine):
    owner = machine.owner(0)  # the owner never pays in this lane
    typed, line = payload(machine, "--owner", owner.address, "--days", "3")
    message = typed["message"]
    assert typed["primaryType"] == "SessionKeyAuthorization"
    assert typed["domain"] == {"name": "kint EpochAnchor", "version": "1", "chainId": 31337,
                               "verifyingContract": machine.anchor.address}
    assert message["owner"] == owner.address and message["key"] == machine.key
    assert message["nonce"] == 0
    assert abs(message["deadline"] - machine.now() - 300) <= 30
    assert abs(message["expiry"] - machine.now() - 3 * DAY) <= 30
    assert line == (f"kint authorize submit --owner {owner.address} --deadline "
                    f"{message['deadline']} --expiry {message['expiry']} --signature -")
    # The same owner given before the action (docs/authorize.md: flags may come there) is in
    # the submit line too: this machine is connected to no owner, so submit needs it.
    early_line = payload_before(machine, owner.address)
    assert early_line.startswith(f"kint authorize submit --owner {owner.address} --deadline ")
    signature = sign(owner, typed)

    out = refused(run_line(machine, line, signature), "too little for the next transaction")
    assert machine.tx_count(machine.key) == 0
    machine.fund_key()
    out = ok(run_line(machine, line, signature))
    lines = out.stdout.splitlines()
    assert re.fullmatch(r"submitted 0x[0-9a-f]{64}", lines[0]), lines
    sent = machine.anchor.w3.eth.get_transaction(lines[0].split()[1])
    assert sent["from"] == machine.key  # the session key pays
    assert re.fullmatch(rf"authorized {machine.key} under {owner.address} until "
                        rf"\S+; cost \d+(\.\d+)? ETH, block {sent['blockNumber']}",
                        lines[1]), lines
    assert lines[2] == f"authNonce({owner.address}) is now 1"
    assert machine.anchor.can_write(owner.address, machine.key)
    assert machine.anchor.session_key_expiry(owner.address, machine.key) == message["expiry"]
    assert machine.tx_count(owner.address) == 0

    # A replayed signature: the nonce moved on, so the contract's BadSignature, nothing sent.
    sent = machine.tx_count(machine.key)
    path = machine.sb.root / "signature.txt"
    path.write_text(signature + "\n")
    refused(machine.kint(*shlex.split(line)[1:-1], str(path)), "(BadSignature)")
    assert not path.exists(), "a signature file is deleted after reading"
    assert machine.tx_count(machine.key) == sent
    assert machine.anchor.auth_nonce(owner.address) == 1


def test_an_expired_deadline_is_refused(machine):
    owner = machine.owner(0)
    machine.fund_key()
    typed, _ = payload(machine, "--owner", owner.address)
    typed["message"]["deadline"] = machine.now() - 1  # the owner signed too late a payload
    m = typed["message"]
    out = refused(machine.kint("authorize", "submit", "--owner", owner.address, "--deadline",
                               str(m["deadline"]), "--expiry", str(m["expiry"]),
                               input=sign(owner, typed)),
                  "(AuthorizationExpired)", "BAD_REQUEST")
    assert "hint: run kint authorize payload again" in out.stderr
    assert not machine.anchor.can_write(owner.address, machine.key)
    assert machine.anchor.auth_nonce(owner.address) == 0 and machine.tx_count(machine.key) == 0


# -- burn-nonce -------------------------------------------------------------------------------


def test_burn_nonce_kills_an_unsubmitted_signature(machine):
    owner, stranger = machine.owner(), machine.owner()
    machine.fund_key()
    typed, line = payload(machine, "--owner", owner.address)
    withheld = sign(owner, typed)

    refused(machine.kint("authorize", "burn-nonce", "--owner", owner.address,
                         env={"KINT_OWNER_KEY": stranger.key.hex()}),
            f"KINT_OWNER_KEY is {stranger.address}, not the owner {owner.address}")
    out = ok(machine.kint("authorize", "burn-nonce", "--owner", owner.address,
                          env={"KINT_OWNER_KEY": owner.key.hex()}))
    assert out.stdout.splitlines()[0] == f"nonce consumed: authNonce({owner.address}) is now 1"
    assert machine.anchor.session_key_expiry(owner.address, machine.key) == 0  # unchanged

    refused(run_line(machine, line, withheld), "(BadSignature)")
    assert not machine.anchor.can_write(owner.address, machine.key)

    # On an authorized key it keeps the expiry and only moves the nonce.
    ok(machine.kint("authorize", "direct", "--owner", owner.address,
                    env={"KINT_OWNER_KEY": owner.key.hex()}))
    expiry = machine.anchor.session_key_expiry(owner.address, machine.key)
    out = ok(machine.kint("authorize", "burn-nonce", "--owner", owner.address,
                          env={"KINT_OWNER_KEY": owner.key.hex()}))
    assert f"authNonce({owner.address}) is now 3" in out.stdout
    assert machine.anchor.session_key_expiry(owner.address, machine.key) == expiry


# -- refusals ---------------------------------------------------------------------------------


def test_refusals_are_one_line_with_exit_2(tmp_path, chain_home):
    m = new_machine(tmp_path / "machine", chain_home, create_key=False)
    owner = m.owner(0).address
    # Refusals of a machine with no session key, then of one with a key: each command only
    # refuses, so those of one machine state run in two lanes side by side
    # (machines_together.side_by_side), each checked after.
    (no_key, not_address, no_deadline), (no_signature, no_days) = side_by_side(
        lambda: [m.kint("authorize", "payload", "--owner", owner),
                 m.kint("authorize", "payload", "--owner", "0x1234"),
                 m.kint("authorize", "submit", "--owner", owner)],
        lambda: [m.kint("authorize", "--signature", "-", "direct"),
                 m.kint("authorize", "payload", "--owner", owner, "--days", "0")])
    refused(no_key, "no session key on this machine", "NO_SESSION_KEY")
    refused(not_address, "is not an address")
    refused(no_deadline, "--deadline and --expiry are required")
    refused(no_signature, "--signature does not apply to `kint authorize direct`")
    refused(no_days, "at least one day")
    make_session_key(m.sb)  # `session-key create` itself: test_session_key_create_show_rotate
    not_hex, missing = side_by_side(
        lambda: m.kint("authorize", "submit", "--owner", owner, "--deadline", "1", "--expiry",
                       "2", input="not hex\n"),
        lambda: m.kint("authorize", "submit", "--owner", owner, "--deadline", "1", "--expiry",
                       "2", "--signature", str(tmp_path / "missing")))
    refused(not_hex, "the signature is not hex")
    refused(missing, "does not exist")
    assert os.environ.get("KINT_OWNER_KEY") is None


def test_a_refused_command_line_loads_no_web3(tmp_path):
    """web3 (~0.5 s of a fresh command on a busy box, most of a refusal) loads only once the
    command line passed its checks and the session key was found: a refused flag, owner or
    missing session key is answered without it."""
    sb = make_sandbox(tmp_path / "machine")
    owner = "0x000000000000000000000000000000000000dEaD"
    cases = ((("payload", "--owner", "0x1234"), "is not an address"),
             (("direct", "--days", "0"), "at least one day"),
             (("submit", "--owner", owner), "--deadline and --expiry are required"),
             (("--signature", "-", "page"), "--signature does not apply"),
             (("payload",), "no owner known on this machine"),
             (("payload", "--owner", owner), "no session key on this machine"))
    # Refusals only: the cases' commands run two at a time (tests/table_runs.py), each
    # checked in turn.
    runs = {" ".join(argv): (lambda argv=argv: kint_loading(sb.env, "authorize", *argv))
            for argv, _ in cases}
    with running_ahead(runs) as ahead:
        for argv, said in cases:
            out, loaded = ahead.outcome(" ".join(argv))
            refused(out, said)
            if said.startswith("no session key"):
                # No key file: no passphrase to check (KINT_SESSION_PASSPHRASE's words are
                # for a key file that does not open), the one step is to make a key.
                assert out.stderr.rstrip("\n").split("\n")[-1] == \
                    f"hint: {SESSION_KEY_MISSING_HINT}", out.stderr
            assert [m for m in loaded if m == "web3" or m.startswith("web3.")] == [], argv
            assert "kint.commands.authorize" in loaded  # the list is real


def test_payload_lane_for_a_smart_account_owner(machine):
    """A deployed contract account (ERC-1271) owner: its signer signs the same printed typed
    data, and the contract asks the account whether the signature is good."""
    from kint.chain import devchain

    signer = machine.owner(0)
    account = devchain.deploy_test_smart_account(machine.url, signer.address)
    machine.fund_key()
    typed, line = payload(machine, "--owner", account)
    assert typed["message"]["owner"] == account
    refused(run_line(machine, line, sign(machine.owner(0), typed)), "(BadSignature)")
    ok(run_line(machine, line, sign(signer, typed)))
    assert machine.anchor.can_write(account, machine.key)


def test_every_lane_on_an_endpoint_of_another_chain_names_both_chain_ids(tmp_path, chain_home):
    """A second machine pointed at the devchain through KINT_RPC_URL and KINT_CONTRACT, with
    no devchain record, signs for Base (8453) while the endpoint is the devchain (31337).
    `payload`: the contract's digest differs, and the refusal says why instead of blaming
    the contract. `direct`, `burn-nonce`, `submit`: refused the same way before anything is
    signed or sent. `session-key show` says which chain and endpoint it read, and warns
    rather than show another chain's balance and authorization as this one's."""
    m = new_machine(tmp_path / "machine", chain_home)
    record = devchain_record(m.sb.kint_home)
    anchor_address = json.loads(record.read_text())["anchor"]
    record.unlink()
    owner = m.owner()
    env = {"KINT_RPC_URL": m.url, "KINT_CONTRACT": anchor_address}
    other = "answers for chain 31337, not 8453"
    out = refused(m.kint("authorize", "payload", "--owner", owner.address, env=env), other,
                  "STALE_RPC")
    assert "another digest" not in out.stderr
    assert "hint: point KINT_RPC_URL at an endpoint of chain 8453" in out.stderr
    assert out.stdout == "", "no typed data is printed for a chain it would not verify on"

    # The other lanes and `show` refuse or read, and none needs another's outcome: two lanes
    # of commands side by side (machines_together.side_by_side), each checked after.
    owner_env = {**env, "KINT_OWNER_KEY": owner.key.hex()}
    far = str(m.now() + 10 * DAY)
    (direct, burn), (submit, out) = side_by_side(
        lambda: [m.kint("authorize", lane, "--owner", owner.address, env=owner_env)
                 for lane in ("direct", "burn-nonce")],
        lambda: [m.kint("authorize", "submit", "--owner", owner.address, "--deadline", far,
                        "--expiry", far, input="0x" + "ab" * 65 + "\n", env=env),
                 m.kint("session-key", "show", "--owner", owner.address, env=env)])
    for lane in (direct, burn, submit):
        refused(lane, other)
    assert m.tx_count(owner.address) == m.tx_count(m.key) == 0  # nothing was sent

    ok(out)
    shown = json.loads(out.stdout)
    assert shown["chain"] == {"chain_id": 8453, "rpc": m.url, "rpc_source": "this call"}, shown
    assert "balance_wei" not in shown and "authorized" not in shown, shown
    assert other in out.stderr, out.stderr


def test_a_session_key_sealed_under_another_passphrase_is_not_told_to_create_one(machine):
    """`authorize submit` unlocks the session key; under a KINT_SESSION_PASSPHRASE that is
    not the one it was sealed with, the refusal's hint began `run kint session-key create`,
    which keeps the key there (`exists: 0x...`) and changes nothing."""
    owner = machine.owner()
    far = str(machine.now() + 10 * DAY)
    out = refused(machine.kint("authorize", "submit", "--owner", owner.address, "--deadline",
                               far, "--expiry", far, input="0x" + "ab" * 65 + "\n",
                               env={"KINT_SESSION_PASSPHRASE": "not the one"}),
                  "does not open with the local passphrase", "NO_SESSION_KEY")
    hint = out.stderr.rstrip("\n").split("\n")[-1]
    assert "session-key create" not in hint, hint
    assert hint.startswith("hint: give back the local passphrase the key was sealed with"), hint
