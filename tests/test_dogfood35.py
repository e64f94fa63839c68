"""What session 35's dogfood lane found, walking the docs' main job on the devchain.

- `kint verify --limit abc`, `push --confirmations x`, `history --block q`: click named its
  IntRange "integer range", so a value that is no number was refused as "'abc' is not a
  valid integer range", as if a range (1-5) were asked for; `--days abc` said "is not a
  valid integer". Every bounded number now says the latter (kint.commands.common.Whole).
- `kint --tenant nosuch verify ...` on a store holding another tenant's rows refused with
  Sibyl's bare `empty_store` verdict and its "this memory store holds no rows yet": nothing
  pointed at the mistyped tenant. The reason now names the tenant searched and those the
  store holds (kint.tenant_worker.verify_empty).
- The cap gate counted every byte under KINT_HOME, the devchain's anvil state among them
  (`devchain/state.json`, ~40 KB more per epoch pushed), so on the devchain the free cap's
  5 MiB went after ~130 pushes and `kint status` called the anvil's blocks `kint state
  (mirror, epoch cache, keys)`. The devchain's folder is left out (kint.paths).
"""

from __future__ import annotations

import json

import pytest

from conftest import make_sandbox, sibyl_client, write_store
from kint.chain.devchain.records import state_path
from kint.paths import devchain_dir
from kint.spaces import space_id
from kint.tenant_worker.mirror_file import LEAF_LEN, Mirror, MirrorRow

ARCHIVED_ONLY = "archived-only"
EMPTY = "no ranked candidate to act on: Sibyl's verdict is empty_store"
HINT = ("(the tenant searched is mistyped, or has written nothing yet: --tenant or KINT_TENANT "
        "picks it)")
NOT_AN_INTEGER = [
    (["verify", "q", "--limit", "abc"], "--limit", "abc"),
    (["push", "--confirmations", "x"], "--confirmations", "x"),
    (["compact", "--confirmations", "x"], "--confirmations", "x"),
    (["history", "entity", "k", "--category", "c", "--block", "q"], "--block", "q"),
]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """One machine for the module: its store holding one rule of the test account's
    tenant, written through Sibyl's client, and its test supervisor (Sibyl's real account
    gate trusting the test's signer). No chain: nothing here is connected."""
    sb = make_sandbox(tmp_path_factory.mktemp("dogfood35"))
    tenant = sb.start_entitled()
    write_store(sb.sibyl_db, tenant=tenant)
    # Rows no Sibyl search reaches: an entity each archived (memory_forget's move), the
    # account's and that of a tenant holding nothing else. Sibyl calls the latter's store
    # empty (`empty_store`), and neither row is a memory the why may count.
    for who in (tenant, ARCHIVED_ONLY):
        client = sibyl_client(sb.sibyl_db, who)
        client.set_entity("rules", "gone", {"rule": "forgotten"})
        client.archive_entity("rules", "gone")
        client.storage.close()
    try:
        yield sb
    finally:
        sb.shutdown()


@pytest.mark.parametrize("argv,flag,value", NOT_AN_INTEGER, ids=[a[0][0] for a in NOT_AN_INTEGER])
def test_a_bounded_number_that_is_no_number_is_said_to_be_no_integer(machine, argv, flag,
                                                                       value):
    out = machine.kint(*argv)
    assert out.returncode == 2, out.stderr
    first = out.stderr.splitlines()[0]
    assert first == (f"kint: error: Invalid value for '{flag}': '{value}' is not a valid "
                     f"integer [BAD_REQUEST]"), out.stderr
    as_json = machine.kint(*argv, "--json")
    assert json.loads(as_json.stdout)["message"] == (
        f"Invalid value for '{flag}': '{value}' is not a valid integer"), as_json.stdout


def test_verify_of_a_tenant_with_no_rows_names_the_tenants_the_store_holds(machine):
    out = machine.kint("--tenant", "no-such-tenant", "verify", "release rule")
    assert out.returncode == 1, out.stdout + out.stderr
    decision = [line for line in out.stdout.splitlines() if line.startswith("DECISION:")]
    assert decision == [
        f"DECISION: REFUSE: {EMPTY}: the store {machine.sibyl_db} holds no rows of tenant "
        f"no-such-tenant; it holds those of 1 other tenant(s): {machine.tenant} (2 rows) "
        f"{HINT}"], out.stdout
    as_json = json.loads(machine.kint("--tenant", "no-such-tenant", "verify", "release rule",
                                      "--json").stdout)
    assert as_json["decision"] == "refuse"
    assert as_json["verdict"]["code"] == "empty_store"
    assert as_json["reason"].endswith(HINT), as_json
    # The tenant that wrote the rule gets Sibyl's hit, so no why at all (it follows an
    # `empty_store` verdict only, which this tenant's rows rule out: the count's own check
    # of them is for a write landing between the search and the count, not timed here):
    # this machine never pushed, so its refusal is the mirror's, as before.
    own = machine.kint("verify", "release rule", "--json")
    assert "holds no rows of tenant" not in json.loads(own.stdout)["reason"], own.stdout


def test_a_tenant_whose_rows_no_search_reaches_is_told_of_the_others(machine):
    """Only the tables Sibyl's `empty_store` covers are counted (sibyl_memory_client
    .verdicts._SEARCHABLE_TABLES): a tenant holding only an archived entity gets the why,
    and is no other tenant in anyone else's."""
    out = machine.kint("--tenant", ARCHIVED_ONLY, "verify", "release rule", "--json")
    assert json.loads(out.stdout)["reason"] == (
        f"{EMPTY}: the store {machine.sibyl_db} holds no rows of tenant {ARCHIVED_ONLY}; it "
        f"holds those of 1 other tenant(s): {machine.tenant} (2 rows) {HINT}"), out.stdout


def test_the_tenants_named_are_the_largest_and_the_rest_are_counted(machine):
    """Five tenants in a store of their own: the three with the most rows are named,
    largest first (a tie by name), and the other two counted: the tenant meant is most
    likely one that wrote much, never hidden among the "more" by its name's place."""
    crowd = machine.root / "crowd" / "memory.db"
    crowd.parent.mkdir(mode=0o700)
    for who, n in (("aa", 1), ("bb", 2), ("cc", 5), ("dd", 3), ("ee", 3)):
        client = sibyl_client(crowd, who)
        for i in range(n):
            client.set_entity("rules", f"r{i}", {"rule": f"rule {i} of {who}"})
        client.storage.close()
    out = machine.kint("--tenant", "crowd-searcher", "--db", str(crowd), "verify",
                       "release rule", "--json")
    assert json.loads(out.stdout)["reason"] == (
        f"{EMPTY}: the store {crowd} holds no rows of tenant crowd-searcher; it holds those "
        f"of 5 other tenant(s): cc (5 rows), dd (3 rows), ee (3 rows) and 2 more {HINT}"
    ), out.stdout


def _anchored(machine, label: str, n: int):
    """The mirror a push of `n` rows would have left for space `label` (kint's own encoding,
    the file at its 0600): what this machine saw anchored, which verify's why counts."""
    sid = space_id(label)
    rows = [MirrorRow("entity", "rules", f"r{i}", bytes(LEAF_LEN), 1) for i in range(n)]
    path = machine.kint_home / f"mirror-{sid[:16]}.json.gz"
    path.write_bytes(Mirror(space_id=sid, rows={r.canonical_id: r for r in rows}).encode())
    path.chmod(0o600)
    return path


def test_anchored_rows_of_the_tenant_searched_are_said_to_be_on_chain(machine):
    """Beside other tenants' rows, and alone, in a store where the tenant searched has
    none: its rows anchored from here are named, with what becomes of them: a pull
    restores rows the store lost, not rows the tenant forgot there."""
    mirror = _anchored(machine, "anchored-elsewhere", 2)
    try:
        out = machine.kint("--tenant", "anchored-elsewhere", "verify", "release rule", "--json")
    finally:
        mirror.unlink()
    assert json.loads(out.stdout)["reason"] == (
        f"{EMPTY}: the store {machine.sibyl_db} holds no rows of tenant anchored-elsewhere; "
        f"it holds those of 1 other tenant(s): {machine.tenant} (2 rows) {HINT}; 2 row(s) "
        f"anchored for this tenant are on chain (check --db or SIBYL_MEMORY_DB; `kint pull` "
        f"restores them)"), out.stdout
    # A store whose one row its tenant forgot (archived): Sibyl calls it empty, and the
    # mirror still holds the row anchored from it.
    forgotten = machine.root / "forgotten" / "memory.db"
    forgotten.parent.mkdir(mode=0o700)
    client = sibyl_client(forgotten, "forgetful")
    client.set_entity("rules", "r0", {"rule": "kept on chain"})
    client.archive_entity("rules", "r0")
    client.storage.close()
    mirror = _anchored(machine, "forgetful", 1)
    try:
        out = machine.kint("--tenant", "forgetful", "--db", str(forgotten), "verify",
                           "release rule", "--json")
    finally:
        mirror.unlink()
    # Forgotten here (its archive holds it: changes.store_lost), so a pull restores nothing
    # and the next push anchors the deletion (test_shared_store.py's forgotten store).
    assert json.loads(out.stdout)["reason"] == (
        f"{EMPTY}: the store {forgotten} holds no rows of tenant forgetful; 1 row(s) anchored "
        f"for this tenant were forgotten here (the next `kint push` anchors their deletion)"
    ), out.stdout


def test_the_tables_counted_are_the_ones_sibyl_searches():
    from sibyl_memory_client.verdicts import _SEARCHABLE_TABLES

    from kint.tenant_worker.store import TIER_TABLES

    assert sorted(TIER_TABLES.values()) == sorted(_SEARCHABLE_TABLES)


def test_a_garbled_mirror_leaves_the_refusal_a_refusal(machine):
    """The why's anchored count reads the mirror: garbled, it is left out of the why, and
    verify still refuses (decide() answers a garbled mirror with a refusal too), never
    CORRUPT_STATE, exit 2, where `--json` promises a `decision`."""
    mirror = machine.kint_home / f"mirror-{space_id('garbled-mirror')[:16]}.json.gz"
    mirror.write_bytes(b"not a gzip file")
    mirror.chmod(0o600)
    try:
        out = machine.kint("--tenant", "garbled-mirror", "verify", "release rule", "--json")
    finally:
        mirror.unlink()
    assert out.returncode == 0, out.stdout + out.stderr
    answer = json.loads(out.stdout)
    assert answer["decision"] == "refuse", answer
    assert answer["reason"] == (
        f"{EMPTY}: the store {machine.sibyl_db} holds no rows of tenant garbled-mirror; it "
        f"holds those of 1 other tenant(s): {machine.tenant} (2 rows) {HINT}"), answer


def test_a_garbled_mirror_beside_no_store_leaves_the_refusal_a_refusal(machine):
    """The same for a store that does not exist, whose why reads the mirror too: the
    refusal says the store is missing and that the mirror could not say more."""
    absent = machine.root / "absent" / "memory.db"
    mirror = machine.kint_home / f"mirror-{space_id('garbled-absent')[:16]}.json.gz"
    mirror.write_bytes(b"not a gzip file")
    mirror.chmod(0o600)
    try:
        out = machine.kint("--tenant", "garbled-absent", "--db", str(absent), "verify",
                           "release rule", "--json")
    finally:
        mirror.unlink()
    assert out.returncode == 0, out.stdout + out.stderr
    answer = json.loads(out.stdout)
    assert answer["decision"] == "refuse", answer
    assert answer["reason"].startswith(
        f"{EMPTY}: the store {absent} does not exist (check --db or SIBYL_MEMORY_DB); "
        f"kint's state file {mirror} "), answer
    assert answer["reason"].endswith(
        ", so whether rows anchored from the store are on chain is not known here"), answer
    assert answer["corrupt_file"] == str(mirror), answer  # as decide() names it
    assert not absent.parent.exists()


def test_the_devchains_anvil_state_is_not_counted_against_the_cap(machine):
    """A devchain's anvil state file as ~150 pushes left it (6 MB, while anvil also kept
    every block's state there; its blocks and transactions still grow it at every push):
    the cap counts kint's state, which it is not. Anvil itself is not run here: the
    machine's devchain folder only holds the file it would have written, with no record
    naming a running chain."""
    folder = devchain_dir(machine.kint_home)
    folder.mkdir(mode=0o700, exist_ok=True)
    state = state_path(machine.kint_home)
    state.write_bytes(b"{" + b" " * 6_000_000 + b"}")
    state.chmod(0o600)
    try:
        cap = json.loads(machine.kint("status", "--json").stdout)["cap"]
    finally:
        state.unlink()
    assert cap["kint_bytes"] < 1_000_000, cap
    assert cap["volunteered_total"] < cap["cap_bytes"], cap


def test_every_file_of_the_devchain_is_in_the_folder_the_cap_leaves_out(tmp_path):
    """The modules that write the devchain's files name its folder through one name
    (kint.paths.devchain_dir), the one footprint_bytes leaves out: a module spelling it
    anew could put the anvil's blocks back into the cap."""
    from kint.chain.config import devchain_record
    from kint.chain.devchain.records import anchor_file, state_path
    from kint.paths import devchain_dir
    from kint.tenant_worker.dev_owner import owner_key_path

    for path in (state_path(tmp_path), anchor_file(tmp_path), devchain_record(tmp_path),
                 owner_key_path(tmp_path, "0xAb")):
        assert path.parent == devchain_dir(tmp_path), path
