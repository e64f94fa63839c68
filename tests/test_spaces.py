"""Which space a store belongs to (DESIGN §5), and discovering every store on a machine."""

from __future__ import annotations

import json
import os

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


def test_hermes_profiles_are_separate_spaces(env, monkeypatch):
    hermes = env / "hh"
    monkeypatch.setenv("HERMES_HOME", str(hermes))
    default = spaces.resolve(db=hermes / "sibyl" / "memory.db")
    work = spaces.resolve(db=hermes / "sibyl" / "profiles" / "work" / "memory.db")
    assert default.label == f"{TENANT}@hermes:default"
    assert work.label == f"{TENANT}@hermes:work"
    assert len({default.space_id, work.space_id, spaces.resolve().space_id}) == 3


def test_kint_space_overrides_and_sibyl_db_env_is_sibyls_own(env, monkeypatch, tmp_path):
    other = tmp_path / "elsewhere" / "memory.db"
    monkeypatch.setenv("SIBYL_MEMORY_DB", str(other))
    assert spaces.resolve().db == str(other)
    assert spaces.resolve().label == TENANT
    monkeypatch.setenv("KINT_SPACE", "my-space")
    assert spaces.resolve().label == "my-space"


def test_discover_lists_every_store_with_its_space(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    write_store(sb.sibyl_db)
    write_store(sb.profile_db("one"))
    write_store(sb.profile_db("two"))
    write_store(sb.hermes_home / "sibyl" / "memory.db")
    (sb.hermes_home / "sibyl" / "profiles" / "empty").mkdir()  # a profile with no store yet
    out = sb.kint("supervisor", "discover", "--json")
    assert out.returncode == 0, out.stderr
    stores = {row["store"]: row for row in json.loads(out.stdout)["stores"]}
    assert set(stores) == {str(sb.sibyl_db), str(sb.profile_db("one")),
                           str(sb.profile_db("two")),
                           str(sb.hermes_home / "sibyl" / "memory.db")}
    assert stores[str(sb.profile_db("two"))]["label"] == f"{TENANT}@hermes:two"
    assert stores[str(sb.sibyl_db)]["space"] == spaces.space_id(TENANT)[:16]
    text = sb.kint("supervisor", "discover").stdout
    assert "SPACE" in text and f"{TENANT}@hermes:one" in text
    assert not (sb.kint_home / "run").exists(), "discover must not start a supervisor"
