"""Which space a store belongs to (README, "Files"; docs/how-it-works.md), and discovering every
store on a machine."""

from __future__ import annotations

import json

import pytest
from Crypto.Hash import keccak as pycryptodome_keccak

from conftest import TENANT, make_sandbox, write_store
from kint import spaces


def _keccak_hex(data: bytes) -> str:
    # An independent keccak (pycryptodome's own API), not the code under test.
    h = pycryptodome_keccak.new(digest_bits=256)
    h.update(data)
    return h.hexdigest()


def test_space_id_is_keccak_of_prefix_and_label():
    assert spaces.space_id("kint-demo") == _keccak_hex(b"kint-space-v1kint-demo")
    # keccak256("kint-space-v1") for the empty label, written out once by hand.
    assert _keccak_hex(b"kint-space-v1") == spaces.space_id("")


@pytest.fixture
def env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.delenv("SIBYL_MEMORY_DB", raising=False)
    monkeypatch.delenv("KINT_SPACE", raising=False)
    monkeypatch.delenv("KINT_TENANT", raising=False)
    monkeypatch.delenv("SIBYL_CREDENTIALS", raising=False)
    return home


def test_sibyl_store_is_the_tenant(env):
    ref = spaces.resolve()
    assert ref.db == str(env / ".sibyl-memory" / "memory.db")
    assert ref.label == ref.tenant == TENANT


def test_tenant_ladder(env, monkeypatch):
    creds = env / ".sibyl-memory" / "credentials.json"
    creds.parent.mkdir()
    creds.write_text(json.dumps({"account_id": "acct-1"}))
    assert spaces.resolve_tenant() == "acct-1"
    creds.write_text(json.dumps({"account_id": "acct-1", "tenant_id": "ten-1"}))
    assert spaces.resolve_tenant() == "ten-1"
    monkeypatch.setenv("KINT_TENANT", "env-tenant")
    assert spaces.resolve_tenant() == "env-tenant"
    assert spaces.resolve_tenant("flag") == "flag"
    monkeypatch.delenv("KINT_TENANT")
    creds.write_text("{not json")
    assert spaces.resolve_tenant() == TENANT


def test_credentials_are_where_sibyl_credentials_says_and_a_symlink_is_none(env, monkeypatch):
    """10-configuration.md: the file is `$SIBYL_CREDENTIALS`, else
    `~/.sibyl-memory/credentials.json`, and Sibyl's loader reads a symlink as no file (the
    tenant is then Sibyl's default, and doctor's tenant row says why)."""
    elsewhere = env / "elsewhere.json"
    elsewhere.write_text(json.dumps({"tenant_id": "ten-elsewhere"}))
    monkeypatch.setenv("SIBYL_CREDENTIALS", str(elsewhere))
    assert spaces.resolve_tenant() == "ten-elsewhere"
    monkeypatch.delenv("SIBYL_CREDENTIALS")
    creds = env / ".sibyl-memory" / "credentials.json"
    creds.parent.mkdir()
    creds.symlink_to(elsewhere)
    origin = spaces.tenant_origin()
    assert (origin.tenant, origin.source) == (TENANT, "Sibyl's default")
    assert "symlink" in origin.unused


def test_hermes_profiles_are_separate_spaces(env, monkeypatch):
    hermes = env / "hh"
    monkeypatch.setenv("HERMES_HOME", str(hermes))
    default = spaces.resolve(db=hermes / "sibyl" / "memory.db")
    work = spaces.resolve(db=hermes / "profiles" / "work" / "sibyl" / "profiles" / "work"
                          / "memory.db")
    assert default.label == f"{TENANT}@hermes:default"
    assert work.label == f"{TENANT}@hermes:work"
    assert len({default.space_id, work.space_id, spaces.resolve().space_id}) == 3


def test_a_profile_store_names_its_space_from_any_shell(env, monkeypatch, tmp_path):
    """The store's path alone decides: no HERMES_HOME, Hermes' root, the profile's own
    folder (inside `hermes -p work`), another profile's, an unrelated one; SIBYL_MEMORY_DB
    set to the store itself (an MCP entry's environment); a relative --db from its folder."""
    root = env / ".hermes"
    layouts = {  # under `hermes -p work`, and where HERMES_HOME was not passed on
        "work": root / "profiles" / "work" / "sibyl" / "profiles" / "work" / "memory.db",
        "old": root / "sibyl" / "profiles" / "old" / "memory.db",
        "default": root / "sibyl" / "memory.db",
    }
    shells = [None, root, root / "profiles" / "work", root / "profiles" / "other",
              tmp_path / "unrelated"]
    for profile, store in layouts.items():
        for hermes_home in shells:
            for own_db in (None, store):
                if hermes_home is None:
                    monkeypatch.delenv("HERMES_HOME", raising=False)
                else:
                    monkeypatch.setenv("HERMES_HOME", str(hermes_home))
                if own_db is None:
                    monkeypatch.delenv("SIBYL_MEMORY_DB", raising=False)
                else:
                    monkeypatch.setenv("SIBYL_MEMORY_DB", str(own_db))
                assert spaces.resolve(db=store).label == f"{TENANT}@hermes:{profile}", \
                    (store, hermes_home, own_db)
        store.parent.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(store.parent)
        assert spaces.resolve(db="memory.db").label == f"{TENANT}@hermes:{profile}"
    # Not a profile store: Sibyl's own, a store elsewhere, a folder name Hermes refuses.
    for other in (env / ".sibyl-memory" / "memory.db", tmp_path / "x" / "memory.db",
                  root / "sibyl" / "profiles" / "Bad Name" / "memory.db"):
        assert spaces.resolve(db=other).label == TENANT


def test_kint_db_of_a_profile_store_never_takes_the_tenants_space(sandbox, tmp_path):
    """Issue 13: from a shell inside `hermes -p work` (HERMES_HOME = the profile's folder,
    SIBYL_MEMORY_DB = its store, as an MCP entry sets them) `kint --db <store> status` bound
    the tenant's own space to the profile's store, and the user's own store then met
    SPACE_CONFLICT."""
    work = sandbox.profile_db("work")
    write_store(sandbox.sibyl_db)
    write_store(work)
    sandbox.start()
    inside = {"HERMES_HOME": str(sandbox.hermes_home / "profiles" / "work"),
              "SIBYL_MEMORY_DB": str(work)}
    out = sandbox.kint("--db", str(work), "status", "--json", env=inside)
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["store"]["path"] == str(work)
    own = sandbox.kint("status", "--json")
    assert own.returncode == 0, own.stdout + own.stderr
    assert json.loads(own.stdout)["store"]["path"] == str(sandbox.sibyl_db)
    labels = {r["label"]: r["store"] for r in sandbox.sup_status()["spaces"]}
    assert labels == {TENANT: str(sandbox.sibyl_db), f"{TENANT}@hermes:work": str(work)}


def test_kint_space_overrides_and_sibyl_db_env_is_sibyls_own(env, monkeypatch, tmp_path):
    other = tmp_path / "elsewhere" / "memory.db"
    monkeypatch.setenv("SIBYL_MEMORY_DB", str(other))
    assert spaces.resolve().db == str(other)
    assert spaces.resolve().label == TENANT
    monkeypatch.setenv("KINT_SPACE", "my-space")
    assert spaces.resolve().label == "my-space"


def test_discover_lists_every_store_with_its_space(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    old = sb.hermes_home / "sibyl" / "profiles" / "old" / "memory.db"
    for db in (sb.sibyl_db, sb.profile_db("one"), sb.profile_db("two"), old,
               sb.hermes_home / "sibyl" / "memory.db"):
        write_store(db)
    (sb.hermes_home / "profiles" / "empty").mkdir()  # a profile with no store yet
    expected = {str(sb.sibyl_db), str(sb.profile_db("one")), str(sb.profile_db("two")),
                str(old), str(sb.hermes_home / "sibyl" / "memory.db")}
    # From Hermes' root, and from inside a profile (HERMES_HOME is the profile's folder).
    for hermes_home in (sb.hermes_home, sb.hermes_home / "profiles" / "one"):
        out = sb.kint("supervisor", "discover", "--json", env={"HERMES_HOME": str(hermes_home)})
        assert out.returncode == 0, out.stderr
        stores = {row["store"]: row for row in json.loads(out.stdout)["stores"]}
        assert set(stores) == expected
    assert stores[str(sb.profile_db("two"))]["label"] == f"{TENANT}@hermes:two"
    assert stores[str(old)]["label"] == f"{TENANT}@hermes:old"
    assert stores[str(sb.sibyl_db)]["space"] == spaces.space_id(TENANT)[:16]
    text = sb.kint("supervisor", "discover").stdout
    assert "SPACE" in text and f"{TENANT}@hermes:one" in text
    assert not (sb.kint_home / "run").exists(), "discover must not start a supervisor"
