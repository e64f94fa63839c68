"""What session 36's dogfood lane found, walking two machines on one devchain.

- After `kint join` on a second machine, the `next:` line said to put a few cents of ETH on
  the new session key, and then `kint authorize page` or `payload`/`submit`: on the
  devchain no wallet holds its ETH and no kint command gave any, and both lanes ask for a
  wallet the devchain's throwaway owner is not in. `kint devchain fund ADDRESS` now sends
  devchain ETH from anvil's first dev account (refused off the devchain), and the line
  names it and `kint authorize direct` with the owner key `kint connect --dev` keeps.
  Following that line word for word makes B's writes on. A push before the fund named
  the chain's id to send ETH on, as on Base: it names the same command.
"""

from __future__ import annotations

import json
import re

import pytest

from chain_machines import RULE_1, join_devchain, kjson, make_session_key, ok
from conftest import make_sandbox, sibyl_client
from machines_together import running_together
from rpc_proxy import RpcProxy, closed_port_url
from kint.chain.config import devchain_record
from kint.chain.devchain.errors import STOPPED_HINT
from kint.commands.join_steps import next_line
from kint.tenant_worker.dev_owner import owner_key_path

ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
DIRECT = "KINT_OWNER_KEY=\"$(cat <the owner's key file>)\" kint authorize direct"


def _note(owner: str) -> str:
    return (f"if kint connect --dev made this owner, that file is KINT_HOME/devchain/"
            f"owner-{owner.lower()}.key on the machine that ran it; docs/quickstart.md")


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """A (connected with `--dev`, one epoch anchored) and B (no session key yet: its join
    makes it), on the session's devchain."""
    made = {}
    for name in ("a", "b"):
        sb = make_sandbox(tmp_path_factory.mktemp(f"dog36-{name}"))
        join_devchain(chain_home, sb)
        if name == "a":
            make_session_key(sb)
        made[name] = sb
    with running_together(made):
        a = made["a"]
        client = sibyl_client(a.sibyl_db, a.tenant)
        try:
            client.set_entity("rules", "release-gate", {"rule": RULE_1})
        finally:
            client.storage.close()
        owner = kjson(a, "connect", "--dev")["owner"]
        kjson(a, "push")
        yield {**made, "owner": owner}


def test_a_joiner_follows_the_next_line_on_the_devchain_and_writes(machines):
    a, b, owner = machines["a"], machines["b"], machines["owner"]
    code = next(a.kint_home.glob("RECOVERY-*.txt")).read_text().strip().splitlines()[-1]
    out = b.kint("join", "--owner", owner, "--recovery-code-stdin", "--no-setup",
                 input=code + "\n", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    key = next(l for l in out.stdout.splitlines() if l.startswith("session key: ")).split()[2]
    nxt = out.stdout.splitlines()[-1]
    # Was: "put a few cents of ETH on 0x… (the devchain), then kint authorize page, or kint
    # authorize payload then submit": no kint command funds, no wallet holds devchain ETH.
    assert nxt == f"next: kint devchain fund {key}, then {DIRECT} ({_note(owner)})", nxt

    # doctor's warning names the same command.
    check = next(c for c in kjson(b, "doctor")["checks"] if c["name"] == "session key")
    assert check["warn"] and check["hint"] == (
        f"fund it (kint devchain fund {key}) and authorize it (kint authorize) before pushing; "
        f"pulls and reads need neither"), check

    # The line's two steps, the authorization first (the owner pays for it, so either order
    # works): it says, as the key holds nothing yet, which command funds it. The owner's
    # key (from A, where `connect --dev` kept it) in the environment only.
    owner_key = owner_key_path(a.kint_home, owner).read_text().strip()
    said = ok(b.kint("authorize", "direct", env={"KINT_OWNER_KEY": owner_key}))
    assert owner_key.removeprefix("0x") not in said.stdout + said.stderr
    assert said.stderr == (f"the session key {key} holds no ETH yet: `kint devchain fund "
                           f"{key}` gives it devchain ETH before it pushes\n"), said.stderr
    # A push before it is refused, and names the same command (it said "send ETH on chain
    # 31337 to 0x…", as on Base, where no wallet holds devchain ETH).
    client = sibyl_client(b.sibyl_db, b.tenant)
    try:
        client.set_entity("rules", "deploy-window", {"rule": "deploy only before noon"})
    finally:
        client.storage.close()
    poor = b.kint("push", timeout=300)
    assert poor.returncode != 0 and "too little for the next transaction" in poor.stderr, \
        poor.stdout + poor.stderr
    assert f"hint: `kint devchain fund {key}` gives it devchain ETH, then try again" \
        in poor.stderr, poor.stderr
    # Then the fund command, word for word as the line names it.
    funded = ok(b.kint(*nxt.removeprefix("next: kint ").split(",")[0].split()))
    assert re.fullmatch(rf"funded {key} with 1 ETH from anvil's dev account 0x[0-9a-fA-F]{{40}}: "
                        rf"tx 0x[0-9a-f]{{64}} block \d+; it holds 1 ETH\n", funded.stdout), \
        funded.stdout

    # B's row, written above, anchors; A pulls and both verify it.
    ok(b.kint("push", timeout=300))
    ok(a.kint("pull", timeout=300))
    for sb in (a, b):
        assert kjson(sb, "verify", "deploy window")["decision"] == "proceed"

    # A join again: writes on.
    again = b.kint("join", "--owner", owner, "--recovery-code-stdin", "--no-setup",
                   input=code + "\n", timeout=300)
    assert again.stdout.splitlines()[-1] == "writes: on", again.stdout + again.stderr


def test_devchain_fund_json_adds_to_the_balance(machines):
    b = machines["b"]
    target = "0x" + "ab" * 20
    first = kjson(b, "devchain", "fund", target, "--eth", "0.25")
    assert {k: first[k] for k in ("amount_wei", "amount_eth", "balance_wei", "balance_eth")} \
        == {"amount_wei": 25 * 10**16, "amount_eth": "0.25", "balance_wei": 25 * 10**16,
            "balance_eth": "0.25"}, first
    assert first["address"].lower() == target and ADDRESS.fullmatch(first["from"])
    second = kjson(b, "devchain", "fund", target, "--eth", "0.5")
    assert second["balance_eth"] == "0.75" and second["block"] > first["block"], second


def test_devchain_fund_is_refused_off_the_devchain_and_for_bad_input(machines, tmp_path):
    b = machines["b"]
    target = "0x" + "cd" * 20
    elsewhere = b.kint("devchain", "fund", target, env={"KINT_RPC_URL": "http://127.0.0.1:1"})
    assert elsewhere.returncode == 2, elsewhere.stderr
    assert elsewhere.stderr.startswith("kint: error: kint reads http://127.0.0.1:1 here "
                                       "(KINT_RPC_URL), not the devchain at "), elsewhere.stderr
    assert "[CONFIG_INVALID]" in elsewhere.stderr and "not the devchain" in elsewhere.stderr
    bare = make_sandbox(tmp_path / "bare")  # no devchain record: a machine on Base
    none = bare.kint("devchain", "fund", target, "--json")
    assert none.returncode == 3, none.stdout + none.stderr
    assert json.loads(none.stdout)["error"] == "RPC_UNAVAILABLE", none.stdout
    for args in (["0x12"], [target, "--eth", "abc"], [target, "--eth", "0"],
                 [target, "--eth", "1001"], [target, "--eth", "nan"],
                 # below one wei (it sent a 0-wei transfer, "funded"), more than 18 decimals
                 # (cut to whole wei unsaid)
                 [target, "--eth", "1e-19"], [target, "--eth", "0.0000000000000000019"]):
        out = b.kint("devchain", "fund", *args)
        assert out.returncode == 2 and "[BAD_REQUEST]" in out.stderr, (args, out.stderr)
    # Nothing was sent by any of them.
    assert kjson(b, "devchain", "fund", target, "--eth", "1")["balance_eth"] == "1"


def _copied_record_naming(chain_home, root, rpc_url: str):
    """A machine whose copy of the devchain's record names `rpc_url` for its endpoint."""
    sb = make_sandbox(root)
    join_devchain(chain_home, sb)
    record = devchain_record(sb.kint_home)
    record.write_text(json.dumps({**json.loads(record.read_text()), "rpc_url": rpc_url}))
    return sb


def test_devchain_fund_of_a_stopped_devchain_exits_as_devchain_status(chain_home, tmp_path):
    """A record whose devchain does not answer (the first machine's stopped, its copy left
    here): refused RPC_UNAVAILABLE with exit 2 and the hint `kint devchain start` starts
    it, a chain of this machine's own on a second one; now exit 3, as `kint devchain
    status` for a devchain not running, and a hint true on both machines."""
    gone = _copied_record_naming(chain_home, tmp_path / "gone", closed_port_url())
    out = gone.kint("devchain", "fund", "0x" + "ef" * 20, "--json")
    assert out.returncode == 3, out.stdout + out.stderr
    said = json.loads(out.stdout)
    assert said["error"] == "RPC_UNAVAILABLE" and "nothing was sent" in said["message"], said
    assert said["hint"] == STOPPED_HINT and "on the machine that started it" in said["hint"]


def test_devchain_fund_refuses_an_endpoint_of_another_chain(machines, chain_home, tmp_path):
    """The last check before the send: the record's endpoint answers for chain 8453 (a
    proxy in front of the devchain's anvil, its eth_chainId rewritten: a real anvil of
    chain 8453 is not started for this). Refused CONFIG_INVALID, exit 2; nothing sent."""
    target = "0x" + "fe" * 20
    upstream = json.loads(devchain_record(chain_home).read_text())["rpc_url"]
    with RpcProxy(upstream) as proxy, proxy.answering_as(8453):
        other = _copied_record_naming(chain_home, tmp_path / "other", proxy.url)
        out = other.kint("devchain", "fund", target)
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines()[0] == (
            f"kint: error: {proxy.url} answers for chain 8453, not the devchain's 31337; "
            f"nothing was sent [CONFIG_INVALID]"), out.stderr
        assert "eth_sendTransaction" not in proxy.calls, proxy.calls
    balance = machines["b"].kint("devchain", "fund", target, "--eth", "1", "--json")
    assert json.loads(ok(balance).stdout)["balance_eth"] == "1", balance.stdout


def test_devchain_fund_json_redacts_the_endpoint(machines, chain_home):
    """A KINT_RPC_URL naming the devchain's endpoint with a key in its query is still the
    devchain's (same_endpoint ignores the query): `--json`'s `rpc` printed it whole."""
    upstream = json.loads(devchain_record(chain_home).read_text())["rpc_url"]
    keyed = upstream + "/?apikey=SECRET36H"
    out = ok(machines["b"].kint("devchain", "fund", "0x" + "9a" * 20, "--eth", "0.01",
                                "--json", env={"KINT_RPC_URL": keyed}))
    assert "SECRET36H" not in out.stdout + out.stderr, out.stdout
    assert json.loads(out.stdout)["rpc"] == upstream + "/<redacted>", out.stdout


KEY, OWNER, UNTIL = "0x" + "5a" * 20, "0x" + "A8" * 20, "2027-01-03 14:29 UTC"
PAGE_OR_PAYLOAD = "kint authorize page, or kint authorize payload then submit (docs/authorize.md)"


@pytest.mark.parametrize("funded,authorized,base_account,line", [
    (False, False, False, f"put a few cents of ETH on {KEY} (Base), then {PAGE_OR_PAYLOAD}"),
    (False, False, True, f"put a few cents of ETH on {KEY} (Base), then kint authorize page"),
    (False, True, False, f"put a few cents of ETH on {KEY} (Base; it holds 0.00001 ETH and is "
                         f"authorized until {UNTIL})"),
    (True, False, False, f"{PAGE_OR_PAYLOAD} (the key holds 0.00001 ETH)"),
    (True, False, True, "kint authorize page (the key holds 0.00001 ETH)"),
])
def test_the_next_line_on_base_is_as_it_was(funded, authorized, base_account, line):
    """Off the devchain the `next:` line is main's, word for word: the devchain's change
    had made the unfunded one `(Base) (it holds …)`, two parentheticals, and no test read
    Base's words."""
    assert next_line(False, base_account, OWNER, KEY, funded, authorized, "0.00001",
                     UNTIL) == line


def test_the_next_line_on_the_devchain_says_where_a_dev_owner_key_is_if_any():
    """The owner key's file exists only for an owner `kint connect --dev` made (not one of
    one's own: `--signature`, `join --new-vault`), so the line says "if"; the key is read
    from the file, never typed into the shell's history; a funded key's line has one
    parenthetical, not two."""
    note = _note(OWNER)
    assert next_line(True, False, OWNER, KEY, False, False, "0", UNTIL) == \
        f"kint devchain fund {KEY}, then {DIRECT} ({note})"
    assert next_line(True, False, OWNER, KEY, True, False, "1", UNTIL) == \
        f"{DIRECT} (the key holds 1 ETH; {note})"
    assert next_line(True, False, OWNER, KEY, False, True, "0", UNTIL) == \
        f"kint devchain fund {KEY} (it holds 0 ETH and is authorized until {UNTIL})"
    assert next_line(True, True, OWNER, KEY, False, False, "0", UNTIL) == \
        f"kint devchain fund {KEY}, then kint authorize page"
