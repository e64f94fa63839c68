"""`kint join` and `kint export` on the real devchain, with real supervisors.

Machine A writes a memory through Sibyl's own client, connects (`--dev`, a throwaway EOA
owner) and anchors it. Machine B is wiped (a new Sandbox: its own HOME and KINT_HOME): the
owner's wallet signs the vault message and `kint join` does the rest. Machine C tries the
ways join stops: a tenant with no epochs (the vault step, exit 2, until `--new-vault`), and
a store holding rows the chain never saw (the restore, a fork: exit 4, then
`--discard-local`)."""

from __future__ import annotations

import json

import pytest
from eth_account import Account

from chain_machines import (RULE_1, authorize_machine, devchain_anchor, join_devchain, kjson,
                            make_session_key, ok, owner_account, wallet_signature)
from conftest import kint_loading, make_sandbox, sibyl_client, write_store
from machines_together import running_together, side_by_side
from kint.chain.config import devchain_record
from kint.custody.vault_message import canonical_payload
from kint.protocol.errors import SPACE_RPC_HINT
from kint.rows.export import connect_ro, export_rows
from kint.spaces import space_id

MIN_WEI = 2 * 10**13  # 0.00002 ETH
DEAD = "http://127.0.0.1:1"  # nothing listens on port 1
WRITES_OFF = ("writes: off until the session key is funded and authorized by the owner; "
              "reads work now")


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """Machines A, B and C on the session's devchain, made as `chain_machines.new_machine`
    makes each, their test supervisors started side by side (each start is mostly its
    interpreter's and forkserver's imports: machines_together.py). B has no session key
    beforehand: the first join makes it, at kint's own cost, and says so. C is never
    recycled (KINT_WORKER_RECYCLE_MIB=0): the discard test needs another space's worker to
    stay up, holding the store, from its status to the refused join."""
    specs = {"a": ({}, True), "b": ({}, False), "c": ({"KINT_WORKER_RECYCLE_MIB": "0"}, True)}
    made = {}
    for name, (env, made_key) in specs.items():
        sb = make_sandbox(tmp_path_factory.mktemp(f"join-{name}"), **env)
        join_devchain(chain_home, sb)
        if made_key:
            make_session_key(sb)
        made[name] = sb
    with running_together(made):
        yield made


@pytest.fixture(scope="module")
def vault(machines):
    """Machine A with an anchored memory, and its owner's wallet."""
    a = machines["a"]
    client = sibyl_client(a.sibyl_db, a.tenant)
    try:
        client.set_entity("rules", "release-gate", {"rule": RULE_1})
        client.set_entity("notes", "ünïcode", {"text": "naïve café ✓", "n": [1, 2.5, None]},
                          status="open")
        client.set_state("focus", {"now": "joining"})
        client.set_reference("runbook", "step one, then step two", metadata={"v": 1})
        for _ in range(2):  # identical events stay two rows
            client.write_event(acted=["the same thing"], ts="2026-01-02T00:00:00Z")
    finally:
        client.storage.close()
    connected = kjson(a, "connect", "--dev")
    kjson(a, "push")
    return a, owner_account(a, connected["owner"]), connected


@pytest.fixture(scope="module")
def machine_b(machines):
    return machines["b"]


@pytest.fixture(scope="module")
def first_join(vault, machine_b):
    """Machine B's first join, wiped as it was made: its output. Every test of B asks for
    it, so that the join on a wiped machine is always this one and each test of B runs
    alone or in any order. A test that authorizes B's key revokes it again; the balance it
    put on the key stays (no test of B reads it: WRITES_OFF's words do not depend on it,
    and this join's `next:` line was printed while the key held nothing). A join that
    failed stops here, with its own words, not in each test of B."""
    b = machine_b
    assert not b.sibyl_db.exists()
    out = _join(b, vault[1], "--no-setup")
    assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.fixture(scope="module")
def machine_c(machines):
    return machines["c"]


def _rows(sb) -> list[tuple]:
    conn = connect_ro(str(sb.sibyl_db))
    try:
        return [(r.tier, r.category, r.key, r.fields) for r in export_rows(conn, sb.tenant)]
    finally:
        conn.close()


def _join(sb, account, *extra: str, env: dict[str, str] | None = None):
    # The vault message: `kint canonical-payload` prints the same bytes for an owner
    # whatever the machine or tenant (it reads nothing; the command's bytes are pinned in
    # test_custody_v030.py), so it is made here rather than paid a command start (~0.5 s).
    payload = canonical_payload(account.address).decode()
    return sb.kint("join", "--owner", account.address, "--signature", "-", *extra,
                   input=wallet_signature(account, payload) + "\n", timeout=300, env=env)


def _lines(out) -> list[str]:
    return out.stdout.splitlines()


def _set_balance(chain_home, address: str, wei: int) -> None:
    """anvil_setBalance: the devchain's own way to put an exact balance on a key."""
    anchor = devchain_anchor(chain_home)
    anchor.w3.provider.make_request("anvil_setBalance", [address, hex(wei)])
    assert anchor.balance(address) == wei


def _doctor(sb) -> tuple[int, dict]:
    """kint doctor's exit status and its session key check."""
    out = sb.kint("doctor", "--json")
    checks = json.loads(out.stdout)["checks"]
    return out.returncode, next(c for c in checks if c["name"] == "session key")


def _session_check(sb) -> dict:
    return _doctor(sb)[1]


def test_join_restores_a_wiped_machine_byte_exact(vault, machine_b, first_join, chain_home):
    a, account, connected = vault
    b, out = machine_b, first_join
    assert out.returncode == 0, out.stdout + out.stderr
    lines = _lines(out)
    anchor = devchain_anchor(chain_home)
    block = anchor.head(account.address, space_id(b.tenant)).block
    address = lines[4].split()[2]
    # v0.3.0's lines (docs/site/03-new-machine.md, "One command: kint join"), in its order.
    assert lines == [
        f"join: owner {account.address}",
        f"      tenant {b.tenant} (from credentials.json), space {connected['space']}",
        # The store under the user's home as `~/...`, as v0.3.0's example prints it.
        f"      contract {anchor.address}, store ~/.sibyl-memory/memory.db",
        "      this command writes nothing to the chain",
        f"session key: {address} (created; it signs epochs for this machine and can never "
        f"decrypt)",
        f"vault: head epoch 1 at block {block}",
        f"connected: key tag {connected['key_tag']}, data key from chain head header",
        f"pull: applied epoch 1 (6 rows, 0 deletions) from block {block}",
        f"restore: restored 1 epoch(s), 6 rows; head seq 1 at block {block}; store root "
        f"matches the anchored root",
        "harnesses: not registered (--no-setup)",
        WRITES_OFF,
        f"next: kint devchain fund {address}, then KINT_OWNER_KEY=\"$(cat <the owner's key "
        f"file>)\" kint authorize direct (if kint connect --dev made this owner, that file is "
        f"KINT_HOME/devchain/owner-{account.address.lower()}.key on the machine that ran it; "
        f"docs/quickstart.md)",
    ], lines

    assert _rows(b) == _rows(a)  # every row, byte for byte, in rowid order
    verdict = kjson(b, "verify", "release rule")
    assert verdict["decision"] == "proceed", verdict

    # kint export: the same rows as JSON lines, read-only.
    exported = ok(b.kint("export"))
    got = [json.loads(line) for line in exported.stdout.splitlines()]
    want = _rows(a)
    assert [(g["tier"], g["category"], g["key"]) for g in got] == [w[:3] for w in want]
    for g, (_, _, _, fields) in zip(got, want):
        assert {k: g[k] for k in fields} == fields
        assert len(g["leaf"]) == 64
    assert set(got[0]) == {"tier", "category", "key", "status", "body", "leaf"}
    assert json.loads(got[0]["body"]) == {"rule": RULE_1}

    # Writes are off, and `kint push --dry-run` (09-cli.md: "read the chain head and report
    # what would be anchored; send nothing") still says what the first push would anchor:
    # the key's refusal is a line, where it refused the preview (exit 5).
    client = sibyl_client(b.sibyl_db, b.tenant)
    try:
        client.set_entity("notes", "written-on-b", {"n": 1})
        preview = ok(b.kint("push", "--dry-run"))
        assert "would anchor 1 row change(s) in 1 epoch(s)" in preview.stdout, preview.stdout
        assert f"kint: a push would be refused: session key {address} is not authorized " \
            f"for owner {account.address}" in preview.stderr, preview.stderr
        refused = b.kint("push")
        assert refused.returncode == 5 and "[NOT_CONNECTED]" in refused.stderr, refused.stderr
    finally:
        client.delete_entity("notes", "written-on-b")
        client.storage.close()


def test_a_second_join_resumes_and_reports_writes_on_once_authorized(vault, machine_b,
                                                                    first_join, chain_home):
    _, account, connected = vault
    b = machine_b
    try:
        _writes_on_once_authorized(b, account, connected, chain_home)
    finally:  # B's key unauthorized again, as the other tests of B find it
        said = next((l for l in _lines(first_join) if l.startswith("session key: 0x")), None)
        anchor = devchain_anchor(chain_home)
        # No such line: nothing was authorized from it, and the test's own failure shows.
        if said is not None and anchor.session_key_expiry(account.address, said.split()[2]):
            anchor.transact(account, anchor.encode_revoke_session_key(said.split()[2]))


def _writes_on_once_authorized(b, account, connected, chain_home) -> None:
    out = _join(b, account, "--no-setup")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = _lines(out)
    session = next(l for l in lines if l.startswith("session key: 0x"))
    assert session.endswith("(kept)"), session
    address = session.split()[2]
    block = devchain_anchor(chain_home).head(account.address, space_id(b.tenant)).block
    assert f"connected: key tag {connected['key_tag']}, data key from local wraps" in lines
    assert not any(l.startswith("pull: applied epoch") for l in lines), lines
    assert (f"restore: up to date; head seq 1 at block {block}; store root matches the "
            f"anchored root") in lines, lines
    assert lines[-2] == WRITES_OFF

    # kint doctor's session key check says the same, in its own words: a warning, as in
    # v0.3.0 (02-quickstart.md), so the doctor of a machine that only restores and reads
    # (03-new-machine.md) does not exit 1 for it.
    status, check = _doctor(b)
    assert check.get("warn") and "NOT authorized" in check["detail"], check
    assert "kint authorize" in check["hint"], check
    assert status == 0, check

    authorize_machine(chain_home, account, address)  # authorized and funded (devchain)
    out = _join(b, account, "--no-setup")
    assert out.returncode == 0, out.stdout + out.stderr
    assert _lines(out)[-1] == "writes: on"
    check = _session_check(b)
    assert check["ok"] and f"{address}: " in check["detail"], check
    assert "authorized for" in check["detail"] and "NOT" not in check["detail"]

    # The threshold, 0.00002 ETH: join's writes are on at it, doctor wants more than it.
    # Asked with --json: each step's result under its name, in one object, and no line.
    _set_balance(chain_home, address, MIN_WEI)
    out = _join(b, account, "--no-setup", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    joined = json.loads(out.stdout)
    assert {k: joined[k] for k in ("owner", "tenant", "tenant_from", "space", "store")} == {
        "owner": account.address, "tenant": b.tenant, "tenant_from": "credentials.json",
        "space": connected["space"], "store": str(b.sibyl_db)}
    assert joined["session_key"] == {"address": address, "created": False}
    assert joined["vault"] == {"head_seq": 1, "head_block": block, "starts_here": False}
    assert joined["connect"]["source"] == "local wraps"
    assert joined["restore"]["head"]["seq"] == 1 and joined["restore"]["applied"] == []
    assert joined["harnesses"] is None
    assert joined["writes"]["on"] is True and joined["writes"]["balance_wei"] == MIN_WEI
    assert joined["writes"]["next"] is None
    assert _session_check(b).get("warn")
    _set_balance(chain_home, address, MIN_WEI + 1)
    check = _session_check(b)  # one doctor: a second read of the same balance adds nothing
    assert check["ok"] and not check.get("warn"), check
    _set_balance(chain_home, address, MIN_WEI - 1)
    lines = _lines(_join(b, account, "--no-setup"))
    assert lines[-2] == WRITES_OFF
    assert lines[-1].startswith(f"next: kint devchain fund {address} (it holds "
                                f"0.000019999999999999 ETH and is authorized until "), lines
    _set_balance(chain_home, address, 10**18)


def test_a_rerun_reads_the_chain_through_the_spaces_own_endpoints(vault, machine_b,
                                                                    first_join, chain_home):
    """A space connected with endpoints of its own (`kint connect --rpc-urls`, kept in its
    enrolment) has its connect and restore read through them by its worker; join's own
    reads (the vault's head, the session key's facts) go there too, not to the machine's."""
    from rpc_proxy import RpcProxy

    _, account, _ = vault
    b = machine_b
    enrol = b.kint_home / f"enrol-{space_id(b.tenant)[:16]}.json"
    kept = enrol.read_text()
    record = json.loads(devchain_record(chain_home).read_text())
    with RpcProxy(record["rpc_url"]) as proxy:
        enrol.write_text(json.dumps({**json.loads(kept), "rpc_urls": [proxy.url]}))
        try:
            out = _join(b, account, "--no-setup")
            assert out.returncode == 0, out.stdout + out.stderr
            # eth_getBalance is join's own read (its writes step): the worker's connect
            # and restore read no balance.
            assert "eth_getBalance" in proxy.calls, proxy.calls
            assert json.loads(enrol.read_text())["rpc_urls"] == [proxy.url]
            # Those endpoints dead: the vault step's hint names them, not KINT_RPC_URL,
            # which sets no endpoint of this space.
            enrol.write_text(json.dumps({**json.loads(kept), "rpc_urls": [DEAD]}))
            out = _join(b, account, "--no-setup")
            assert out.returncode == 2, out.stdout + out.stderr
            stopped, hint = out.stderr.splitlines()[:2]
            assert stopped.startswith("join stopped at vault: cannot read the chain head: ")
            assert stopped.endswith(" [RPC_UNAVAILABLE]"), out.stderr
            assert hint == f"hint: {SPACE_RPC_HINT}", out.stderr
        finally:
            enrol.write_text(kept)


def test_join_reads_the_chain_where_its_worker_does_not_through_its_environment(
        vault, machine_b, first_join, chain_home):
    """join's own reads (the contract it names, the vault's head, the session key's facts)
    go where its connect and restore go: the space's worker, with the running supervisor's
    settings. A dead endpoint and another contract in join's environment only (its
    supervisor runs without them) stopped it at `vault: cannot read the chain head`, where
    `kint connect` from the same shell ran; and it named a contract its worker does not
    read. Now it runs to its end, names the space's contract, and says once of each value
    that it is not used, in the line `kint connect` prints."""
    _, account, _ = vault
    b = machine_b
    dead, contract = DEAD, "0x" + "12" * 20
    anchor = devchain_anchor(chain_home)
    label = b.label(b.sibyl_db)
    for extra in ((), ("--json",)):
        out = _join(b, account, "--no-setup", *extra,
                    env={"KINT_RPC_URL": dead, "KINT_CONTRACT": contract})
        assert out.returncode == 0, out.stdout + out.stderr
        # Under --json the lines are the object's `notices` only (docs/commands.md).
        said = json.loads(out.stdout)["notices"] if extra else out.stderr.splitlines()
        assert not extra or "in this environment is not used" not in out.stderr, out.stderr
        for name, value in (("KINT_RPC_URL", dead), ("KINT_CONTRACT", contract)):
            unused = f"kint: {name}={value} in this environment is not used: space {label} "
            assert [l.startswith(unused) for l in said].count(True) == 1, out.stderr
        if extra:
            joined = json.loads(out.stdout)
            assert joined["contract"] == anchor.address, joined
            assert joined["vault"]["head_seq"] == 1 and joined["writes"]["on"] is not None
            continue
        lines = _lines(out)
        assert lines[2] == f"      contract {anchor.address}, store ~/.sibyl-memory/memory.db", \
            lines
        assert lines[5].startswith("vault: head epoch 1 at block "), lines
        assert lines[-2] == WRITES_OFF, lines  # B's key unauthorized, as every test of B finds it
    # KINT_OFFLINE travels with the call, as every call setting does: join refuses it.
    out = _join(b, account, "--no-setup", env={"KINT_OFFLINE": "1"})
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[:2] == [
        "join stopped at vault: KINT_OFFLINE=1, and join reads the chain head and restores "
        "from the chain [BAD_REQUEST]", "hint: unset KINT_OFFLINE"], out.stderr


def test_the_workers_join_chain_op_checks_the_addresses_it_is_sent(vault, machine_b,
                                                                  first_join):
    """The op behind join's chain reads puts the owner and the session key into chain
    calls: one that is not an address is refused by name, before any read, and so is one
    whose mixed case is not its EIP-55 checksum (a character mistyped), as the command
    line refuses it."""
    from kint.client import KintError

    _, account, _ = vault
    b = machine_b
    at = next(i for i, c in enumerate(account.address) if i > 1 and c.isalpha())
    mistyped = account.address[:at] + account.address[at].swapcase() + account.address[at + 1:]
    for args, name in (({"owner": account.address, "key": "0x1234"}, "key"),
                       ({"owner": "not an owner", "head": True}, "owner"),
                       ({"owner": mistyped, "head": True}, "owner"),
                       ({"head": True}, "owner")):
        with pytest.raises(KintError) as refused:
            b.call("join_chain", b.sibyl_db, args=args)
        assert refused.value.code == "BAD_REQUEST", refused.value.message
        assert f"argument {name!r} must be an address" in refused.value.message
    assert b.call("join_chain", b.sibyl_db, args={})["devchain"] is True


def test_join_registers_kint_server_with_the_tenant_pinned(vault, machine_b, first_join):
    """The harness step is `kint setup`'s own registration (here Codex, whose file setup
    writes itself), with KINT_TENANT pinned to the tenant joined and the --env pairs."""
    import tomllib

    _, account, _ = vault
    b = machine_b
    out = _join(b, account, "--setup", "codex", "--env", "KINT_QUIET_SECONDS=60")
    assert out.returncode == 0, out.stdout + out.stderr
    config = b.home / ".codex" / "config.toml"
    assert f"harnesses: codex: wrote [mcp_servers.kint] to {config}" in _lines(out)
    table = tomllib.loads(config.read_text())["mcp_servers"]["kint"]
    assert table["command"].endswith("kint-server")
    assert table["env"]["KINT_TENANT"] == b.tenant
    assert table["env"]["KINT_QUIET_SECONDS"] == "60"
    assert table["env"]["KINT_HOME"] == str(b.kint_home)
    assert table["env"]["SIBYL_MEMORY_DB"] == str(b.sibyl_db)

    out = _join(b, account, "--setup", "codex", "--env", "KINT_QUIET_SECONDS=60")
    assert out.returncode == 0, out.stdout + out.stderr
    assert any(l.startswith("harnesses: codex: already configured") for l in _lines(out))


def test_join_stops_at_the_vault_without_epochs_unless_new_vault(machine_c):
    """On a store of its own, which no other test writes: on C's own store, which the
    discard test writes, "a failed join creates no store" could not fail when that test
    ran first."""
    c = machine_c
    fresh = Account.create()
    tenant = "kint-join-empty"
    store = c.home / "empty-vault" / "memory.db"
    assert not store.exists()

    def join(*extra: str):
        return _join(c, fresh, "--no-setup", "--tenant", tenant, "--db", str(store), *extra)

    out = join()
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"tenant {tenant} (from --tenant)" in out.stdout
    assert out.stderr.startswith(f"join stopped at vault: the chain holds no epochs for owner "
                                 f"{fresh.address} under tenant {tenant}"), out.stderr
    # The code ends the line, as on every refusal line (and a worker's refusal at restore).
    assert out.stderr.splitlines()[0].endswith(" [BAD_REQUEST]"), out.stderr
    assert "--new-vault" in out.stderr
    assert "connected:" not in out.stdout
    out = join("--json")
    assert out.returncode == 2 and out.stderr == "", out.stdout + out.stderr
    refused = json.loads(out.stdout)  # the refusal object, naming the step
    assert refused["error"] == "BAD_REQUEST" and refused["step"] == "vault", refused
    assert refused["message"].startswith(f"the chain holds no epochs for owner {fresh.address}")
    assert "--new-vault" in refused["hint"]
    assert not (c.kint_home / f"enrol-{space_id(tenant)[:16]}.json").exists()
    assert not store.exists()  # a failed join creates no store

    out = join("--new-vault")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "vault: no epochs yet; --new-vault" in out.stdout
    assert "data key from fresh vault" in out.stdout
    assert (f"fresh vault: recovery code written to "
            f"{c.kint_home / f'RECOVERY-{space_id(tenant)[:16]}.txt'}") in _lines(out)
    assert "restore: up to date (the vault has no epochs yet)" in out.stdout
    assert (c.kint_home / f"RECOVERY-{space_id(tenant)[:16]}.txt").exists()

    # Run again without --new-vault: the vault is this machine's, so it resumes.
    out = join()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "this machine already holds the vault" in out.stdout
    assert "data key from local wraps" in out.stdout


def test_a_restore_refusal_exits_with_the_pull_status_then_discard_local(vault, machine_c):
    """One Sibyl store holds many tenants. kint's own worker for another tenant's space on
    it keeps the store open between ops, so the discarding join is refused BUSY, naming it
    as kint's worker and how to stop it (this once came as a flake: the worker of the test
    above opened the store when its background count happened to fall in this test)."""
    a, account, _ = vault
    c = machine_c
    write_store(c.sibyl_db, {"stray": {"rule": "written before kint"}}, tenant=c.tenant)
    other = "kint-join-other"
    out = _join(c, Account.create(), "--no-setup", "--tenant", other, "--new-vault")
    assert out.returncode == 0, out.stdout + out.stderr
    ok(c.kint("--tenant", other, "status"))  # its worker reads the store now, and keeps it
    out = _join(c, account, "--no-setup")
    assert out.returncode == 4, out.stdout + out.stderr  # a fork, as kint pull exits
    assert any(l.startswith("connected: key tag ") for l in _lines(out)), out.stdout
    assert out.stderr.startswith("join stopped at restore: "), out.stderr
    assert "[FORK]" in out.stderr and "--discard-local" in out.stderr

    out = _join(c, account, "--no-setup", "--discard-local")
    assert out.returncode == 5, out.stdout + out.stderr  # BUSY, as kint pull exits
    # One: this test's other tenant (the empty vault of the test above has a store of its own).
    assert "(kint's worker for another space on this store)" in out.stderr, out.stderr
    assert "`kint supervisor stop` stops them" in out.stderr, out.stderr
    assert "an agent's MCP server" not in out.stderr  # nothing but kint's worker holds it
    assert not any(l.startswith("moved aside: ") for l in _lines(out)), out.stdout
    assert not list(c.sibyl_db.parent.glob("*.kint-backup-*"))

    c.shutdown()  # `kint supervisor stop`, as the hint says
    c.start_entitled()  # the test's supervisor again (Sibyl's account gate entitled)
    out = _join(c, account, "--no-setup", "--discard-local")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(kept)" in out.stdout and "data key from local wraps" in out.stdout
    assert any(l.startswith("moved aside: ") for l in _lines(out)), out.stdout
    assert _rows(c) == _rows(a)


def test_join_refuses_bad_flags_before_any_step(vault, machine_c):
    _, account, _ = vault
    c = machine_c
    cases = [
        (["--owner", account.address, "--no-setup"], "exactly one of"),
        (["--owner", account.address, "--base-account", "--recovery-code-stdin"],
         "exactly one of"),
        (["--owner", "0x1234", "--recovery-code-stdin"], "is not an address"),
        (["--owner", account.address, "--recovery-code-stdin", "--setup", "claude",
          "--no-setup"], "--setup or --no-setup"),
        (["--owner", account.address, "--recovery-code-stdin", "--env", "NOEQUALS"],
         "KEY=VALUE"),
        (["--owner", account.address, "--recovery-code-stdin", "--env", "KINT_TENANT=other"],
         "give --tenant other"),
        (["--owner", account.address, "--recovery-code-stdin", "--env", "KINT_OWNER_KEY=0x1"],
         "--env KINT_OWNER_KEY is refused"),
        # The store joined and the store registered are one: two are refused, not one
        # dropped without a word.
        (["--owner", account.address, "--recovery-code-stdin", "--db", str(c.sibyl_db),
          "--env", f"SIBYL_MEMORY_DB={c.sibyl_db}.other"], "name two different stores"),
        (["--owner", account.address, "--recovery-code-stdin", "--env",
          "KINT_QUIET_SECONDS=soon"], "--env KINT_QUIET_SECONDS='soon' is not a number"),
    ]

    def refused(lane: list[tuple[list[str], str]]) -> None:
        for args, message in lane:
            out = c.kint("join", *args, input="")
            assert out.returncode == 2, (args, out.stdout + out.stderr)
            assert message in out.stderr, (args, out.stderr)
            assert "join: owner" not in out.stdout

    # Each refusal is a command that reads and writes nothing: two lanes at once.
    side_by_side(lambda: refused(cases[::2]), lambda: refused(cases[1::2]))
    out = c.kint("join", "--owner", account.address, "--no-setup", "--json", input="")
    assert out.returncode == 2 and out.stderr == "", out.stdout + out.stderr
    assert json.loads(out.stdout)["error"] == "BAD_REQUEST"


def test_a_refused_join_command_line_loads_no_web3(tmp_path):
    """join's flags are checked before any step, and a refusal of them is answered without
    web3 and eth_account (~0.5 s of a fresh command on a busy box), as authorize's are:
    join reads the chain only at its vault step."""
    sb = make_sandbox(tmp_path / "machine")
    owner = "0x000000000000000000000000000000000000dEaD"
    for argv, said in ((("--owner", "0x1234", "--recovery-code-stdin"), "is not an address"),
                       (("--owner", owner, "--no-setup"), "exactly one of")):
        out, loaded = kint_loading(sb.env, "join", *argv)
        assert out.returncode == 2 and said in out.stderr, out.stdout + out.stderr
        heavy = [m for m in loaded if m.split(".")[0] in ("web3", "eth_account")]
        assert heavy == [], argv
        assert "kint.commands.join" in loaded  # the list is real


def test_a_garbled_devchain_record_stops_join_with_its_own_code(tmp_path):
    """The chain configuration's refusal keeps its code and hint at the vault step, as the
    worker and `kint authorize` give them (join called every such refusal CONFIG_INVALID,
    with no hint): a garbled devchain record is CORRUPT_STATE, with `kint devchain`'s own
    way out."""
    sb = make_sandbox(tmp_path / "machine")
    record = devchain_record(sb.kint_home)
    record.parent.mkdir(parents=True, mode=0o700)
    sb.kint_home.chmod(0o700)
    record.write_text("not a record")
    from kint.custody.recovery_code import encode_recovery_code

    code = encode_recovery_code(b"\x01" * 32)  # a code on its face: join reads it first
    try:  # join's vault step asks the space's worker, so a supervisor starts: stop it after
        out = sb.kint("join", "--owner", "0x000000000000000000000000000000000000dEaD",
                      "--recovery-code-stdin", "--no-setup", "--json", input=code + "\n")
    finally:
        sb.shutdown()
    assert out.returncode == 2 and out.stderr == "", out.stdout + out.stderr
    refused = json.loads(out.stdout)
    assert refused == {"error": "CORRUPT_STATE", "message": f"{record} is corrupt",
                       "hint": "remove it and run `kint devchain start`", "step": "vault"}


def test_a_session_key_file_kint_cannot_read_stops_join_naming_it_and_the_way_out(tmp_path):
    """A session.key that is not a keystore stops join at its session key step naming the
    file, saying it is not a session key kint can read, and how to get past it: join keeps a
    key that is there, so "fix or move the file named" (its old hint) left the user to
    guess that rotating makes a new one. The file is never rewritten."""
    sb = make_sandbox(tmp_path / "machine")
    sb.kint_home.mkdir(mode=0o700, exist_ok=True)
    path = sb.kint_home / "session.key"
    path.write_text("not a keystore\n")
    path.chmod(0o600)
    from kint.custody.errors import SessionKeyCorrupt
    from kint.custody.recovery_code import encode_recovery_code
    from kint.tenant_worker.custody_errors import as_protocol_error

    code = encode_recovery_code(b"\x01" * 32)
    argv = ("join", "--owner", "0x000000000000000000000000000000000000dEaD",
            "--recovery-code-stdin", "--no-setup")
    try:  # join reads the chain through the space's worker first, so a supervisor starts
        with sb.chain_out_of_reach():  # and should it go on past the step, a closed port
            plain = sb.kint(*argv, input=code + "\n")
            asked = sb.kint(*argv, "--json", input=code + "\n")
    finally:
        sb.shutdown()
    message = f"{path} is not a session key kint can read: it is not valid JSON"
    # The hint every command and op gives for it (custody_errors), join's next step after.
    hint = ("`kint session-key rotate` moves it aside and makes a new key, which needs the "
            "owner's authorization (kint authorize); then run kint join again")
    assert hint.startswith(as_protocol_error(SessionKeyCorrupt(path, "is not valid JSON")).hint
                           + "; ")
    assert plain.returncode == 2, plain.stdout + plain.stderr
    stopped, said = plain.stderr.splitlines()[:2]
    assert stopped.startswith(f"join stopped at session key: {message}"), plain.stderr
    assert stopped.endswith("; it was left as it is [CORRUPT_STATE]"), plain.stderr
    assert said == f"hint: {hint}", plain.stderr
    assert asked.returncode == 2 and asked.stderr == "", asked.stdout + asked.stderr
    refused = json.loads(asked.stdout)
    assert refused["error"] == "CORRUPT_STATE" and refused["step"] == "session key", refused
    assert refused["message"].startswith(message) and refused["hint"] == hint, refused
    assert path.read_text() == "not a keystore\n"


def test_a_join_that_goes_past_its_session_key_step_meets_the_guards_closed_port(tmp_path):
    """The guard of the tests whose join must stop at its session key step
    (`Sandbox.chain_out_of_reach`): a join that goes on (here one with no key, which makes
    one and goes on, as a regressed check would) reads the vault's head at the closed port
    the guard names, and stops there, never at Base's public endpoints, which its space's
    worker, outside this process's network guard, would otherwise ask."""
    sb = make_sandbox(tmp_path / "machine")
    from kint.custody.recovery_code import encode_recovery_code

    code = encode_recovery_code(b"\x01" * 32)
    try:
        with sb.chain_out_of_reach():
            out = sb.kint("join", "--owner", "0x000000000000000000000000000000000000dEaD",
                          "--recovery-code-stdin", "--no-setup", "--json", input=code + "\n")
    finally:
        sb.shutdown()
    refused = json.loads(out.stdout)
    assert (out.returncode, refused["error"], refused["step"]) == (2, "RPC_UNAVAILABLE",
                                                                  "vault"), out.stdout
    assert "the endpoint could not be reached" in refused["message"], refused
    assert refused["hint"].startswith(f"check the endpoints set in "
                                      f"{sb.kint_home / 'config.toml'} "), refused


def test_the_restore_lines_of_a_cold_start_on_base():
    """The cold start's `both RPCs agree` line and an epoch with deletions, printed from a
    pull result as the worker returns it. The devchain cannot give that result (one local
    endpoint, so no second opinion is asked, and its chain id is not Base's), so the result
    here is written out by hand; the other lines of join run end to end above."""
    from kint.commands.join_steps import restore_lines

    digest = "b64dcde033b03249" + "0" * 48
    assert restore_lines({
        "applied": [1, 2], "backups": [], "skipped": [], "closed": [], "warnings": [],
        "gap": [], "rows_total": 13, "rpcs_agreed": True, "report": "store root matches "
        "the anchored root", "message": "restored 2 epoch(s), 13 rows; head seq 2 at block "
        "51081880; store root matches the anchored root",
        "applied_epochs": [{"seq": 1, "block": 51081867, "rows": 14, "deletions": 0},
                           {"seq": 2, "block": 51081880, "rows": 1, "deletions": 1}],
        "head": {"seq": 2, "block": 51081880, "digest": digest},
        "chain_head": {"seq": 2, "block": 51081880, "digest": digest},
    }) == [
        "pull: cold start, both RPCs agree: head seq 2, digest b64dcde033b03249, block 51081880",
        "pull: applied epoch 1 (14 rows, 0 deletions) from block 51081867",
        "pull: applied epoch 2 (1 rows, 1 deletions) from block 51081880",
        "restore: restored 2 epoch(s), 13 rows; head seq 2 at block 51081880; store root "
        "matches the anchored root",
    ]


def test_join_prints_the_epochs_it_did_not_apply_as_kint_pull_does():
    """SKIPPED and CLOSED lines, in v0.3.0's words (09-cli.md, "kint pull"), from the one
    printer `kint pull` uses too (its lines are checked end to end in test_chain_e2e.py):
    a skipped epoch a later snapshot carried past, one the pull stopped at, and an epoch
    sealed under a retired data key."""
    from kint.commands.join_steps import restore_lines

    digest = "ab" * 32
    assert restore_lines({
        "applied": [], "backups": [], "warnings": [], "gap": [3], "rows_total": 2,
        "report": "", "message": "stopped at epoch 3: this machine cannot apply it",
        "skipped": [{"seq": 2, "block": 40, "reason": "not a kint epoch", "superseded_by": 4},
                    {"seq": 3, "block": 50, "reason": "AES-GCM refused the epoch"}],
        "closed": [{"seq": 1, "block": 30, "reason": "sealed under a retired data key"}],
        "applied_epochs": [], "head": {"seq": 2, "block": 40, "digest": digest},
    }) == [
        "SKIPPED epoch 2 block 40: not a kint epoch (snapshot epoch 4 carries the whole state, "
        "the pull carried on)",
        "SKIPPED epoch 3 block 50: AES-GCM refused the epoch",
        "CLOSED epoch 1 block 30: sealed under a retired data key",
        "restore: stopped at epoch 3: this machine cannot apply it",
    ]
