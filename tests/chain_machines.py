"""Two machines on one devchain: each a Sandbox with its own HOME and KINT_HOME, both
pointed at the same anvil (machine B gets a copy of the devchain's record, the way a second
machine would be told where the chain is)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from unittest import mock

from eth_account import Account
from eth_account.signers.local import LocalAccount

from conftest import Sandbox, make_sandbox, sibyl_client, write_rules
from rpc_proxy import RpcProxy
from kint.chain.config import devchain_record
from kint.paths import devchain_dir

RULE_1 = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"


# KINT_VERIFY_HEAD_SECONDS of every machine the suite joins to the devchain (join_devchain):
# 20 s, not v0.3.0's 2 s. On a loaded two-core box (CI's run at 0a4739f, load 12; a fresh
# clone's `make test` beside other work, session 31) one head read ran past 2 s, and a space
# whose endpoint missed a read is not read again for 30 s (the tracker's window), so every
# later status of that test had no chain head (test_handshake_only, test_over_skipped_scope).
# On a devchain that answers, the budget is never waited out, so it costs nothing. A test
# whose subject is the budget or a head read that fails (a hung or slow endpoint: those of
# test_chain_faults, test_doctor_chain) gives the machine the value it depends on; one that
# must see the setting unset (test_call_switches' started_with) joins with head_s=None.
LOADED_BOX_HEAD_S = "20"


def join_devchain(chain_home: Path, machine: Sandbox, *,
                  head_s: str | None = LOADED_BOX_HEAD_S) -> None:
    """`machine` on the session's devchain: a copy of its record, and KINT_VERIFY_HEAD_SECONDS
    at `head_s` where the machine's environment gives none (None: left unset). Called before
    the machine's supervisor starts, which takes the value for the requests that carry none."""
    if head_s is not None:
        machine.env.setdefault("KINT_VERIFY_HEAD_SECONDS", head_s)
    devchain_dir(machine.kint_home).mkdir(parents=True, exist_ok=True, mode=0o700)
    machine.kint_home.chmod(0o700)
    shutil.copy(devchain_record(chain_home), devchain_record(machine.kint_home))


# The scrypt cost of the session keystores `make_session_key` writes. kint's production cost
# (2^18) takes ~3 s to write a keystore and ~2 s for each worker to unlock it, at every
# connect of every machine here; the keystore's format and reader are under test in
# test_session_keystore.py at this same cost, and the production one still runs wherever
# kint makes the key itself (`kint session-key create` and rotate in test_authorize_cli.py,
# join in test_join.py, the installed wheel's connect, the demo).
SESSION_SCRYPT_N = 2


def make_session_key(sb: Sandbox) -> str:
    """The machine's session key, written by kint's own writer (as `kint session-key create`
    does) at SESSION_SCRYPT_N, under the machine's environment, so under the local secret
    its processes will find (never the test process's own): connect, join and the workers
    find the key and keep it. Returns its address. Written in this process, the test's
    environment swapped for the machine's for the call: a process of its own for each of
    the suite's ~60 keys cost its start and eth_account's imports (~0.5 s each, more on a
    loaded box) for a write of a few milliseconds."""
    from kint.custody.session_key import create_session_key

    with mock.patch.dict(os.environ, sb.env, clear=True):
        address, existed = create_session_key(scrypt_n=SESSION_SCRYPT_N)
    assert not existed, f"no new session key in {sb.kint_home}: {address} was there"
    return address


def new_machine(root: Path, chain_home: Path, *, made_key: bool = True, **env: str) -> Sandbox:
    """A machine on the session's devchain, its test supervisor running; with `made_key`,
    its session key made beforehand at a test's scrypt cost (`make_session_key`)."""
    sb = make_sandbox(root, **env)
    join_devchain(chain_home, sb)
    if made_key:
        make_session_key(sb)
    sb.start_entitled()
    return sb


@contextmanager
def anchored(sb: Sandbox, **rules: str) -> Iterator[Sandbox]:
    """`sb` connected on the devchain with `rules` written and pushed as its first epoch,
    the shape of a module's shared machine; stopped on the way out, or when that set-up
    fails. The connect and push are the ops `kint connect --dev` and `kint push` send,
    asked from the test process: no module sharing such a machine checks those two
    commands (each a command's start, its interpreter and imports, spared)."""
    try:
        sb.call("connect", sb.sibyl_db, args={"dev": True}, timeout_s=300)
        write_rules(sb.sibyl_db, sb.tenant, **rules)
        sb.call("push", sb.sibyl_db, timeout_s=300)
        yield sb
    finally:
        sb.shutdown()


@contextmanager
def behind_proxy(machine: Sandbox, chain_home: Path, *,
                 connect_settings: dict[str, str] | None = None
                 ) -> Iterator[tuple[Sandbox, RpcProxy]]:
    """`machine` connected to the session's devchain through a loopback RPC proxy the test
    switches (tests/rpc_proxy.py). On the way out the proxy forwards again, so nothing of
    the machine's shutdown waits on a hung call, then the machine is stopped, then the
    proxy. The connect is the op `kint connect --dev --rpc-urls <proxy>` sends, asked from
    the test process: no test behind the proxy checks that command (its start, interpreter
    and imports, spared). `connect_settings` are the connect's own (a caller's call-scope
    values, as a command sends its environment's): a machine whose supervisor runs with a
    short KINT_RPC_TIMEOUT connects under a sane one, which a slow anvil answer on a loaded
    box does not fail."""
    record = json.loads(devchain_record(chain_home).read_text())
    proxy = RpcProxy(record["rpc_url"], max_hang_s=30).start()
    args: dict[str, object] = {"dev": True, "rpc_urls": proxy.url}
    if connect_settings:
        args["settings"] = connect_settings
    try:
        machine.call("connect", machine.sibyl_db, args=args, timeout_s=300)
        yield machine, proxy
    finally:
        proxy.forward()
        machine.shutdown()
        proxy.stop()


@contextmanager
def machine_behind_proxy(root: Path, chain_home: Path, *,
                         connect_settings: dict[str, str] | None = None,
                         **env: str) -> Iterator[tuple[Sandbox, RpcProxy]]:
    """A new machine (`new_machine`), connected through a proxy as `behind_proxy` says."""
    with behind_proxy(new_machine(root, chain_home, **env), chain_home,
                      connect_settings=connect_settings) as pair:
        yield pair


def ok(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def kjson(sb: Sandbox, *args: str) -> dict:
    return json.loads(ok(sb.kint(*args, "--json")).stdout)


def kdb(sb: Sandbox, db: Path, *args: str,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    """`kint --db DB ARGS` on machine `sb`: the space of a store that is not its default."""
    return sb.kint("--db", str(db), *args, input=input)


def jdb(sb: Sandbox, db: Path, *args: str, input: str | None = None) -> dict:
    """`kdb` with `--json`, which must succeed: its object."""
    return json.loads(ok(kdb(sb, db, *args, "--json", input=input)).stdout)


def recovery_code(sb: Sandbox, space16: str) -> str:
    """The code in RECOVERY-<space16>.txt: its last non-empty line."""
    lines = (sb.kint_home / f"RECOVERY-{space16}.txt").read_text().splitlines()
    return [line for line in lines if line.strip()][-1].strip()


def owner_account(first: Sandbox, owner: str) -> LocalAccount:
    """The owner wallet `kint connect --dev` made on `first` (a throwaway devchain key)."""
    from kint.tenant_worker.dev_owner import load_owner

    account = load_owner(first.kint_home, owner)
    assert account is not None, f"no devchain key for {owner} under {first.kint_home}"
    return account


def wallet_signature(account: LocalAccount, payload: str) -> str:
    """What the owner's wallet (`cast wallet sign --data`) makes of `kint canonical-payload`."""
    signed = Account.sign_typed_data(account.key, full_message=json.loads(payload))
    return "0x" + signed.signature.hex()


def connect_with_wallet(machine: Sandbox, account: LocalAccount, *extra: str,
                        db: Path | None = None) -> dict:
    """A new machine connects the way an EOA owner does it: the wallet signs the vault
    message, the signature piped on stdin. With `db`, the space of that store (`--db`).
    The message is the bytes `kint canonical-payload` prints, made in this process: they
    depend on the owner alone (the command's are pinned in test_custody_v030.py), and a
    command start for them cost ~0.5 s at every connect."""
    from kint.custody.vault_message import canonical_payload

    on = ("--db", str(db)) if db is not None else ()
    payload = canonical_payload(account.address).decode()
    out = ok(machine.kint(*on, "connect", "--owner", account.address, "--signature", "-",
                          *extra, "--json", input=wallet_signature(account, payload) + "\n"))
    return json.loads(out.stdout)


def connect_with_code(machine: Sandbox, owner: str, code: str, db: Path | None = None) -> dict:
    """Connect with the recovery code on stdin; with `db`, the space of that store."""
    on = ("--db", str(db)) if db is not None else ()
    out = ok(machine.kint(*on, "connect", "--owner", owner, "--recovery-code-stdin", "--json",
                          input=code + "\n"))
    return json.loads(out.stdout)


def devchain_anchor(chain_home: Path):  # noqa: ANN201 - kint.chain.anchor.Anchor
    from kint.chain.anchor import Anchor
    from kint.chain.config import load_chain_config
    from kint.chain.rpc import RpcTracker

    return Anchor(load_chain_config(chain_home), RpcTracker())


def authorize_machine(chain_home: Path, owner: LocalAccount, session_address: str) -> None:
    """The owner (an EOA here) authorizes a machine's session key and the key gets gas
    money, as `kint authorize direct` and a transfer would on Base."""
    from kint.tenant_worker.dev_owner import authorize

    anchor = devchain_anchor(chain_home)
    authorize(anchor, anchor.config.rpc_urls[0], owner, session_address)


def deploy_second_anchor(chain_home: Path) -> str:
    """Another EpochAnchor on the session's devchain (same chain id, another address): for
    the tests of a space read on a contract other than the one it was connected on."""
    from web3 import Web3

    from kint.chain.artifact import epoch_anchor_artifact
    from kint.chain.devchain.powers import deploy_artifact

    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    address = deploy_artifact(w3, epoch_anchor_artifact())
    assert address.lower() != record["anchor"].lower()
    return address


def on(db: Path, *args: str) -> tuple[str, ...]:
    """`kint` arguments for the space of store `db`: tests that share one machine give each
    test a store (so a space) of its own, `Sandbox.profile_db(name)`."""
    return ("--db", str(db), *args)


def devchain_web3(chain_home: Path):  # noqa: ANN201 - web3.Web3
    """web3 on the session's anvil, for what a test asks of the chain itself (a reorg, a
    mempool, a block): no retries, so a refusal is seen as the endpoint gave it."""
    from web3 import Web3

    record = json.loads(devchain_record(chain_home).read_text())
    return Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10},
                                  exception_retry_configuration=None))


def connected_profile(sb: Sandbox, profile: str, **rules: str) -> Path:
    """A connected space of its own on `sb`: Hermes profile `profile`'s store holding
    `rules` (one space each, one session key for all: a test's pushes are its own)."""
    db = sb.profile_db(profile)
    db.parent.mkdir(parents=True, exist_ok=True)
    write_rules(db, sb.tenant, **rules)
    kjson(sb, *on(db, "connect", "--dev"))
    return db


def anchored_then_forgotten(sb: Sandbox, tmp_path: Path, tenant: str) -> Path:
    """A store of `tenant` whose one rule was anchored, then forgotten through Sibyl
    (memory_forget archives an entity): a store holding none of the anchored rows, which
    only its archive tells from a lost one. The archive tests damage or lock it after."""
    db = tmp_path / "forgets.db"
    write_rules(db, tenant, **{"forgotten": "anchored, then forgotten"})
    kjson(sb, "--tenant", tenant, "--db", str(db), "connect", "--dev")
    kjson(sb, "--tenant", tenant, "--db", str(db), "push")
    forget_rule(db, tenant)
    return db


def forget_rule(db: Path, tenant: str) -> None:
    """Sibyl's memory_forget of `tenant`'s rule `forgotten`: moved into the archive."""
    client = sibyl_client(db, tenant)
    try:
        client.archive_entity("rules", "forgotten", reason="no longer true")
    finally:
        client.storage.close()
