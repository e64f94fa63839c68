"""`kint session-key show` and `kint authorize` use the endpoint and contract of the caller's
space's worker, the ones its push and pull use, not the caller's environment (lane
join21).

They read the chain in the command's own process, through its environment: a KINT_RPC_URL
or KINT_CONTRACT of the caller's that the space's worker does not use took them elsewhere
(a dead endpoint, another contract, a local chain taken for Base and refused as a move of
the space) while `kint status` and `kint push` from the same shell ran on the space's.
The worker now hands them its settings (its `space_chain` op), and the caller's values it
does not use are said once each on stderr, as every space command says them. With no space
connected here there is no worker's endpoint to follow: the machine's settings are used,
and authorize names the endpoint on stderr (but `payload`, whose stderr is v0.3.0's two
lines and whose typed data names the chain and contract; session-key show names it in its
JSON's `chain`).

Through the real CLI on the session's devchain, with a second EpochAnchor deployed on it.
The module's two machines (one connected, one never connected) start side by side, and
the page runs that each wait out KINT_AUTHORIZE_PAGE_TIMEOUT run side by side too
(tests/machines_together.py): none reads what another writes.
"""

from __future__ import annotations

import json

import pytest
from eth_account import Account

from chain_machines import deploy_second_anchor, devchain_anchor, kjson, ok, owner_account
from machines_together import machines_started, side_by_side
from kint.chain.config import devchain_record


DEAD = "http://127.0.0.1:1"  # nothing listens on port 1


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """(the machine the module connects, one never connected), started side by side."""
    with machines_started([tmp_path_factory.mktemp(f"space-endpoint-{name}")
                           for name in ("connected", "none")], chain_home) as made:
        yield made


@pytest.fixture(scope="module")
def machine(machines):
    """Connected with --dev on the devchain: its worker reads the devchain's record."""
    sb = machines[0]
    connected = kjson(sb, "connect", "--dev")
    sb.owner = connected["owner"]
    return sb


@pytest.fixture(scope="module")
def fresh(machines):
    """A machine with no space connected (nothing the tests below run connects one)."""
    return machines[1]


def page(sb, owner: str):
    """`kint authorize page` for `owner`, given up on after its shortest timeout."""
    return sb.kint("authorize", "page", "--owner", owner,
                   env={"KINT_AUTHORIZE_PAGE_TIMEOUT": "1"})


@pytest.fixture(scope="module")
def caller_env(chain_home) -> dict[str, str]:
    """A shell whose KINT_RPC_URL is dead and whose KINT_CONTRACT names another
    EpochAnchor than the space's."""
    return {"KINT_RPC_URL": DEAD, "KINT_CONTRACT": deploy_second_anchor(chain_home)}


def test_show_and_payload_read_where_the_space_s_worker_reads(machine, chain_home,
                                                             caller_env):
    ok(machine.kint("status"))  # the supervisor runs: no command below starts one
    env = caller_env
    out = machine.kint("session-key", "show", env=env)
    assert out.returncode == 0, (out.stdout, out.stderr)
    shown = json.loads(out.stdout)
    assert shown["chain"]["chain_id"] == 31337, shown
    assert shown["chain"]["rpc_source"] == "devchain record", shown
    assert shown["authorized"] is True, shown  # read on the space's own contract
    assert f"kint: KINT_RPC_URL={DEAD} in this environment is not used" in out.stderr
    assert "kint: KINT_CONTRACT=" in out.stderr and "warning" not in out.stderr, out.stderr
    payload = machine.kint("authorize", "payload", env=env)
    assert payload.returncode == 0, (payload.stdout, payload.stderr)
    typed = json.loads(payload.stdout)
    assert typed["domain"]["verifyingContract"] == devchain_anchor(chain_home).address
    assert typed["domain"]["chainId"] == 31337


def test_direct_sends_through_the_space_s_endpoint(machine, caller_env):
    owner = owner_account(machine, machine.owner)
    env = {**caller_env, "KINT_OWNER_KEY": owner.key.hex()}
    out = machine.kint("authorize", "direct", "--days", "2", env=env)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert out.stdout.startswith("submitted 0x"), out.stdout
    assert owner.key.hex() not in out.stdout + out.stderr


def test_with_no_space_connected_authorize_names_the_endpoint_it_reads(fresh, chain_home):
    out = page(fresh, Account.create().address)
    assert out.returncode == 2 and "[TIMEOUT]" in out.stderr, (out.stdout, out.stderr)
    record = json.loads(devchain_record(chain_home).read_text())
    said = [x for x in out.stderr.splitlines() if x.startswith("kint: no space")]
    assert len(said) == 1, out.stderr
    assert said[0].endswith(f"the chain is read through {record['rpc_url']} (chain 31337, "
                            f"from devchain record ({devchain_record(fresh.kint_home)}))"), said


def test_page_for_an_owner_not_connected_here_names_a_base_account_by_its_code(
        fresh, chain_home):
    """v0.3.0's page is for Base Account owners, and a new machine authorizes before it
    connects (03-new-machine.md: pass --owner): with no enrolment kint printed the neutral
    line for every owner. An owner with code on chain is a deployed smart account, so it
    gets v0.3.0's Base Account line; one without code (an EOA, or a Base Account never
    used) keeps the neutral one."""
    smart, plain = Account.create().address, Account.create().address
    devchain_anchor(chain_home).w3.provider.make_request("anvil_setCode", [smart, "0x6001"])
    lines = {}
    for owner, out in zip((smart, plain), side_by_side(lambda: page(fresh, smart),
                                                       lambda: page(fresh, plain))):
        assert out.returncode == 2 and "[TIMEOUT]" in out.stderr, (out.stdout, out.stderr)
        lines[owner] = out.stdout.splitlines()[0]
    assert lines[smart] == (f"open this page in the browser where your Base Account is "
                            f"logged in (owner {smart}):"), lines
    assert lines[plain] == (f"open this page in the browser whose wallet holds the owner "
                            f"account (owner {plain}):"), lines
