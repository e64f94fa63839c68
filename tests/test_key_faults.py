"""kill -9 of a worker at each step of the key commands (05-keys.md, "Rotate the data key",
"The recovery code"): a rekey, or a connect starting a vault, killed anywhere loses no key.
After the supervisor restarts the worker (or at the next command) the rekey either
completed (the chain head under the new key, and the wraps, key cache, recovery file and
enrolment on it) or did not happen (nothing anchored, the old key in force); a connect
killed between its writes is finished by the next connect, recovery file included.

One anvil for the session (`kint devchain start`), one machine for the module with the
crash points preloaded into its workers (tests/support/kint_test_faults.py), a profile
store (a space) per test. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from web3 import Web3

from chain_machines import (authorize_machine, jdb, kdb, new_machine, ok, owner_account,
                            wallet_signature)
from conftest import write_rules as write
from kint.chain.artifact import load_artifact
from kint.chain.config import devchain_record
from kint.commands.exit_codes import PUSH_PULL_REFUSED
from kint.custody.data_key import dek_id
from kint.custody.recovery_code import decode_recovery_code
from kint.custody.vault_cache import read_cached_key
from kint.custody.vault_message import canonical_payload
from kint.epochs.envelope import parse_header
from kint.spaces import space_id as space_id_of

RULE = "release rule: tag before shipping"


@pytest.fixture(scope="module")
def chain(chain_home):
    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10}))
    contract = w3.eth.contract(address=Web3.to_checksum_address(record["anchor"]),
                               abi=load_artifact()["abi"])
    return {"home": chain_home, "contract": contract}


@pytest.fixture(scope="module")
def killbox(tmp_path_factory, chain):
    root = tmp_path_factory.mktemp("keykill")
    flag = root / "crash.flag"
    k = new_machine(root / "machine", chain["home"], KINT_TEST_CRASH_FLAG=str(flag))
    yield k, flag
    k.shutdown()


def chain_head(chain, owner: str, sid: str) -> tuple[int, str]:
    digest, seq, _block = chain["contract"].functions.head(
        Web3.to_checksum_address(owner), bytes.fromhex(sid)).call()
    return int(seq), bytes(digest).hex()


def mirror_head(sb, space16: str) -> tuple[int, str]:
    held = json.loads(gzip.decompress((sb.kint_home / f"mirror-{space16}.json.gz").read_bytes()))
    return held["head"]["seq"], held["head"]["digest"]


def epoch_dek_id(sb, space16: str, seq: int) -> str:
    meta = json.loads((sb.kint_home / "epochs" / space16 / f"{seq:08d}.meta.json").read_text())
    return parse_header(bytes.fromhex(meta["header"])).dek_id.hex()


def code_dek_id(sb, space16: str) -> str:
    lines = (sb.kint_home / f"RECOVERY-{space16}.txt").read_text().splitlines()
    return dek_id(decode_recovery_code([ln for ln in lines if ln.strip()][-1])).hex()


def key_files(sb, space16: str, sid: str) -> dict[str, object]:
    """What this machine holds of the space's key: each file's dek_id, the enrolled tags."""
    wraps = json.loads((sb.kint_home / f"wraps-{space16}.json").read_text())
    enrol = json.loads((sb.kint_home / f"enrol-{space16}.json").read_text())
    cached = read_cached_key(sb.kint_home, sid)
    return {"wraps": wraps["dek_id"], "cache": dek_id(cached.dek).hex(),
            "recovery": code_dek_id(sb, space16), "tags": sorted(enrol["key_tags"]),
            "wrap_tags": sorted(w[2:34] for w in wraps["wraps"])}


def restarted(sb, db: Path, pid: int) -> None:
    sb.wait_for(lambda: (r := sb.row(db))["pid"] not in (None, pid)
                and r["state"] in ("ready", "idle") and r, timeout=30,
                what="the restarted worker")


def wallet_space(sb, profile: str) -> tuple[Path, Any, str, str]:
    """A store of its own holding one rule, a new owner wallet, and what that wallet signs
    for connect: the store, the wallet, its derive signature (a line for stdin), the space."""
    db = sb.profile_db(profile)
    write(db, sb.tenant, release=RULE)
    account = Account.create()
    payload = canonical_payload(account.address).decode()
    return db, account, wallet_signature(account, payload) + "\n", space_id_of(sb.label(db))


def rekey_signature(sb, db: Path, owner: str) -> str:
    payload = canonical_payload(owner).decode()
    return wallet_signature(owner_account(sb, owner), payload) + "\n"


def connected_space(sb, db: Path) -> tuple[str, str, str]:
    """A space connected with `--dev`, one epoch anchored: (space16, owner, space id)."""
    write(db, sb.tenant, release=RULE)
    connected = jdb(sb, db, "connect", "--dev")
    assert jdb(sb, db, "push")["epochs"][-1]["seq"] == 1
    return connected["space"], connected["owner"], space_id_of(sb.label(db))


@pytest.mark.parametrize("step", ["before_send", "after_send", "after_receipt",
                                  "after_mirror_save", "after_rekey_push",
                                  "before_rekey_recovery_file"])
def test_a_rekey_killed_once_its_snapshot_is_signed_completes(killbox, chain, step):
    """Once the snapshot's transaction is signed, the push journal lands it (sent again if
    need be), so the rekey must complete: the restarted worker moves every key file to the
    new key from the rekey journal. Before, the head was sealed under a key this machine
    had lost, and the new recovery code was never written."""
    k, flag = killbox
    db = k.profile_db("rekey-" + step.replace("_", "-"))
    space16, owner, sid = connected_space(k, db)
    old = key_files(k, space16, sid)
    assert len({old["wraps"], old["cache"], old["recovery"]}) == 1
    pid = k.row(db)["pid"]

    flag.write_text(f"{step} {space16}")
    out = kdb(k, db, "rekey", "--signature", "-", input=rekey_signature(k, db, owner))
    assert out.returncode == PUSH_PULL_REFUSED and "[WORKER_DOWN]" in out.stderr, \
        out.stdout + out.stderr
    assert not flag.exists(), "the worker did not reach the step"
    restarted(k, db, pid)
    pending = k.kint_home / f"pending-{space16}.json"
    journal = k.kint_home / f"rekey-{space16}.json"
    k.wait_for(lambda: not pending.exists() and not journal.exists()
               and mirror_head(k, space16) == chain_head(chain, owner, sid)
               and chain_head(chain, owner, sid)[0] == 2, timeout=30,
               what="the interrupted rekey settled by the restarted worker")

    new_id = epoch_dek_id(k, space16, 2)
    assert new_id != old["wraps"]
    now = key_files(k, space16, sid)
    assert (now["wraps"], now["cache"], now["recovery"]) == (new_id, new_id, new_id), now
    assert now["tags"] == now["wrap_tags"] == old["tags"]
    assert jdb(k, db, "verify", "release rule")["decision"] == "proceed"
    pulled = jdb(k, db, "pull")
    assert pulled["applied"] == [] and pulled["gap"] == []
    write(db, k.tenant, after=f"written after the rekey killed {step}")
    assert [e["seq"] for e in jdb(k, db, "push")["epochs"]] == [3]
    assert epoch_dek_id(k, space16, 3) == new_id
    # A second rotation starts from the completed one.
    again = jdb(k, db, "rekey", "--signature", "-", input=rekey_signature(k, db, owner))
    assert again["old_dek_id"] == new_id and code_dek_id(k, space16) == again["new_dek_id"]


def test_a_rekey_killed_before_its_snapshot_is_signed_did_not_happen(killbox, chain):
    """Killed with the new key journalled and nothing signed: the restarted worker drops
    the journal, the old key stays in force everywhere, and a second rekey works."""
    k, flag = killbox
    db = k.profile_db("rekey-after-journal")
    space16, owner, sid = connected_space(k, db)
    old = key_files(k, space16, sid)
    pid = k.row(db)["pid"]
    flag.write_text(f"after_rekey_journal {space16}")
    out = kdb(k, db, "rekey", "--signature", "-", input=rekey_signature(k, db, owner))
    assert "[WORKER_DOWN]" in out.stderr, out.stdout + out.stderr
    assert not flag.exists()
    restarted(k, db, pid)
    journal = k.kint_home / f"rekey-{space16}.json"
    k.wait_for(lambda: not journal.exists(), timeout=30, what="the journal dropped")
    assert chain_head(chain, owner, sid)[0] == 1
    assert key_files(k, space16, sid) == old
    assert not (k.kint_home / f"pending-{space16}.json").exists()
    rekeyed = jdb(k, db, "rekey", "--signature", "-", input=rekey_signature(k, db, owner))
    assert rekeyed["old_dek_id"] == old["wraps"]
    assert key_files(k, space16, sid)["recovery"] == rekeyed["new_dek_id"]
    assert not journal.exists()


@pytest.mark.parametrize("ttl", ["session", "30d"])
def test_a_rekey_killed_mid_way_keeps_its_new_key_as_the_rekey_would_have(killbox, chain,
                                                                          ttl):
    """The key's life is the rekey's, whichever process finishes it (05-keys.md, "The
    vault key cache": `session` is memory only, never written to disk). A worker killed
    once the snapshot landed left the key files to its successor, which held no key in
    memory and had not the rekey's environment: it cached the new key with the space's
    own value, on disk for 24 h, after `KINT_KEY_TTL=session kint connect`, and for 24 h
    where `KINT_KEY_TTL=30d kint rekey` asked for 30 days. The rekey's journal now keeps
    how long the new key is to be kept."""
    k, flag = killbox
    db = k.profile_db(f"rekey-killed-ttl-{ttl}")
    write(db, k.tenant, release=RULE)
    connect_env, rekey_env = ({"KINT_KEY_TTL": "session"}, {}) if ttl == "session" else (
        {}, {"KINT_KEY_TTL": ttl})
    connected = json.loads(ok(k.kint("--db", str(db), "connect", "--dev", "--json",
                                     env=connect_env)).stdout)
    space16, owner, sid = connected["space"], connected["owner"], space_id_of(k.label(db))
    assert [e["seq"] for e in jdb(k, db, "push")["epochs"]] == [1]
    cache = k.kint_home / f"vault-{space16}.aes"
    assert cache.exists() == (ttl != "session")
    pid = k.row(db)["pid"]

    flag.write_text(f"after_rekey_push {space16}")
    out = k.kint("--db", str(db), "rekey", "--signature", "-", env=rekey_env,
                 input=rekey_signature(k, db, owner))
    assert "[WORKER_DOWN]" in out.stderr, out.stdout + out.stderr
    assert not flag.exists(), "the worker did not reach the step"
    restarted(k, db, pid)
    journal = k.kint_home / f"rekey-{space16}.json"
    k.wait_for(lambda: not journal.exists(), timeout=30,
               what="the interrupted rekey settled by the restarted worker")
    new_id = epoch_dek_id(k, space16, 2)
    assert code_dek_id(k, space16) == new_id  # it completed
    if ttl == "session":
        assert not cache.exists(), "the restarted worker wrote the session-only key to disk"
    else:
        cached = read_cached_key(k.kint_home, sid)
        assert dek_id(cached.dek).hex() == new_id
        assert cached.expires_at > time.time() + 29 * 86400, "not the rekey's 30 days"
    # The restarted worker holds the new key: a write after is pushed under it.
    write(db, k.tenant, after=f"written after the rekey killed, {ttl}")
    assert [e["seq"] for e in jdb(k, db, "push")["epochs"]] == [3]
    assert epoch_dek_id(k, space16, 3) == new_id
    assert cache.exists() == (ttl != "session")


def test_a_connect_killed_between_its_writes_is_finished_by_the_next(killbox, chain):
    """A fresh vault's connect killed after its wraps and key cache, before its recovery
    file and enrolment: the next connect with the same key finds the wraps, and writes the
    recovery file (of that same key) and the enrolment as the creator's. Before, it
    connected from the local wraps and the recovery code was never written anywhere."""
    k, flag = killbox
    db, account, signature, sid = wallet_space(k, "connect-killed")
    space16 = sid[:16]
    kdb(k, db, "verify", "release rule")  # the space's worker, up before the connect
    pid = k.row(db)["pid"]
    flag.write_text(f"before_connect_recovery_file {space16}")
    out = kdb(k, db, "connect", "--owner", account.address, "--signature", "-",
              input=signature)
    assert "[WORKER_DOWN]" in out.stderr, out.stdout + out.stderr
    assert not flag.exists()
    wraps = json.loads((k.kint_home / f"wraps-{space16}.json").read_text())
    assert not (k.kint_home / f"RECOVERY-{space16}.txt").exists()
    restarted(k, db, pid)

    again = jdb(k, db, "connect", "--owner", account.address, "--signature", "-",
                input=signature)
    assert again["recovery_file"] == str(k.kint_home / f"RECOVERY-{space16}.txt"), again
    assert code_dek_id(k, space16) == wraps["dek_id"]
    enrol = json.loads((k.kint_home / f"enrol-{space16}.json").read_text())
    assert enrol["vault_created"] is True
    authorize_machine(chain["home"], account, again["session"])
    assert jdb(k, db, "push")["epochs"][-1]["seq"] == 1
    assert epoch_dek_id(k, space16, 1) == wraps["dek_id"]


def test_a_dev_connect_killed_between_its_writes_keeps_its_owner(killbox, chain):
    """`connect --dev` killed the same way, before its enrolment named the owner it made:
    the next `connect --dev` takes the devchain owner whose signature opens the wraps left
    here, not a new one those wraps refuse (WRONG_KEY, before)."""
    k, flag = killbox
    db = k.profile_db("dev-connect-killed")
    write(db, k.tenant, release=RULE)
    sid = space_id_of(k.label(db))
    space16 = sid[:16]
    kdb(k, db, "verify", "release rule")  # the space's worker, up before the connect
    pid = k.row(db)["pid"]
    flag.write_text(f"before_connect_recovery_file {space16}")
    out = kdb(k, db, "connect", "--dev")
    assert "[WORKER_DOWN]" in out.stderr, out.stdout + out.stderr
    assert not flag.exists()
    wraps = json.loads((k.kint_home / f"wraps-{space16}.json").read_text())
    restarted(k, db, pid)

    again = jdb(k, db, "connect", "--dev")
    assert again["source"] == "local wraps" and again["recovery_file"], again
    assert code_dek_id(k, space16) == wraps["dek_id"]
    assert jdb(k, db, "push")["epochs"][-1]["seq"] == 1
    assert chain_head(chain, again["owner"], sid)[0] == 1


def test_an_offline_connect_on_a_machine_that_joined_the_vault_writes_no_recovery_file(
        killbox, chain):
    """A machine that joined a vault from the head header (no recovery file, not the vault's
    maker) connects again under KINT_OFFLINE=1: its local wraps answer, and no header is
    no proof the chain is empty. Before, the connect took the wraps for a vault it had
    started, wrote the data key into RECOVERY-<space16>.txt and marked the enrolment as the
    vault's maker, so a push then refused once that file was moved off the machine."""
    k, _flag = killbox
    db, account, signature, sid = wallet_space(k, "offline-joined")
    space16 = sid[:16]
    made = jdb(k, db, "connect", "--owner", account.address, "--signature", "-",
               input=signature)
    authorize_machine(chain["home"], account, made["session"])
    assert jdb(k, db, "push")["epochs"][-1]["seq"] == 1
    # This machine as one that joined: its key files gone, so the head header answers.
    for name in (f"wraps-{space16}.json", f"enrol-{space16}.json", f"vault-{space16}.aes",
                 f"RECOVERY-{space16}.txt"):
        (k.kint_home / name).unlink()
    joined = jdb(k, db, "connect", "--owner", account.address, "--signature", "-",
                 input=signature)
    assert joined["source"] == "chain head header" and joined["recovery_file"] is None

    offline = json.loads(ok(k.kint("--db", str(db), "connect", "--owner", account.address,
                                   "--signature", "-", "--json", input=signature,
                                   env={"KINT_OFFLINE": "1"})).stdout)
    assert offline["source"] == "local wraps" and offline["recovery_file"] is None, offline
    assert not (k.kint_home / f"RECOVERY-{space16}.txt").exists()
    enrol = json.loads((k.kint_home / f"enrol-{space16}.json").read_text())
    assert enrol["vault_created"] is False
