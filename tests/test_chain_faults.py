"""Chain faults, made for real (issue 4's acceptance list, docs/faults.md): a lying RPC, a hung
RPC for one tenant while another works, and kill -9 of a worker at each step of a push.
Exit statuses are v0.3.0's (kint/commands/exit_codes.py): a pull's freshness refusal exits
6, any other push or pull refusal 5.

One real anvil for the module (`kint devchain start`), real supervisors and workers (the
test supervisor: tests/support/run_supervisor.py), real Sibyl stores. Each space gets its
own endpoint with `kint connect --rpc-urls`: a loopback JSON-RPC proxy (tests/rpc_proxy.py)
in front of the anvil, switched by the test. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import gzip
import http.client
import json
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from web3 import Web3

from anchoring import resealed
from chain_machines import (RULE_1, connect_with_wallet, jdb, kdb, kjson, new_machine, ok,
                            owner_account, recovery_code)
from conftest import KINT
from conftest import write_rules as write
from machines_together import new_machines
from rpc_proxy import CIPHERTEXT_OFFSET, RpcProxy, live_proxy_threads, push_ciphertext
from kint.chain.artifact import load_artifact
from kint.chain.config import devchain_record
from kint.commands.exit_codes import FRESHNESS, PUSH_PULL_REFUSED
from kint.custody.recovery_code import decode_recovery_code
from kint.epochs.envelope import parse_header
from kint.rows.export import connect_ro, export_rows
from kint.rows.merkle import merkle_root
from kint.spaces import space_id as space_id_of

# KINT_RPC_TIMEOUT and KINT_VERIFY_HEAD_SECONDS of the calls the hung endpoint holds, X's
# push (each hung try: 1 s) and verify (v0.3.0's default), each sent by its own command: the
# machine keeps the suite's values, so that Y's calls and X's through the forwarding proxy,
# meant to be answered, are not given 1 s and 2 s on a loaded box.
RPC_TIMEOUT_S = 1.0
VERIFY_HEAD_S = 2.0
# How long a proxy in "hang" mode holds a call before it closes the connection: the end of
# a hung call when nothing in kint ends it first.
PROXY_HANG_S = 30.0
# A CLI's start and its round trips on a loaded 2-core box, on top of a wait kint promises.
MARGIN_S = 10.0
# KINT_RPC_TIMEOUT of a verify under test: longer than the proxy holds a call, so that only
# verify's own head budget (VERIFY_HEAD_S) can end its wait before the proxy does.
VERIFY_RPC_TIMEOUT_S = 60.0
assert VERIFY_HEAD_S + MARGIN_S < PROXY_HANG_S and 3 * RPC_TIMEOUT_S + MARGIN_S < PROXY_HANG_S


# -- the chain and the proxies --------------------------------------------------------------


@pytest.fixture(scope="module")
def chain(chain_home):
    record = json.loads(devchain_record(chain_home).read_text())
    w3 = Web3(Web3.HTTPProvider(record["rpc_url"], request_kwargs={"timeout": 10},
                                exception_retry_configuration=None))
    contract = w3.eth.contract(address=Web3.to_checksum_address(record["anchor"]),
                               abi=load_artifact()["abi"])
    yield {"home": chain_home, "url": record["rpc_url"], "w3": w3, "contract": contract}


@pytest.fixture(scope="module")
def proxies(chain):
    made: list[RpcProxy] = []

    def make() -> RpcProxy:
        proxy = RpcProxy(chain["url"], max_hang_s=PROXY_HANG_S).start()
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.stop()
    assert live_proxy_threads() == [], "a proxy thread outlived the module"


# -- what a machine holds -------------------------------------------------------------------


def store_rows(db: Path) -> dict[str, list]:
    """Every row of every table of the store, as stored (updated_at and all)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute(
            "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' "
            "and sql not like 'CREATE VIRTUAL%'")]
        return {t: sorted(map(repr, conn.execute(f'select * from "{t}"'))) for t in tables}
    finally:
        conn.close()


def picture(sb, space16: str, db: Path) -> dict:
    """Everything a pull could change: the mirror and watermark bytes, the epoch cache, the
    store's rows."""
    cache = sb.kint_home / "epochs" / space16
    return {"mirror": gzip.decompress((sb.kint_home / f"mirror-{space16}.json.gz").read_bytes()),
            "watermark": (sb.kint_home / f"watermark-{space16}.json").read_bytes(),
            "epochs": {p.name: p.read_bytes() for p in sorted(cache.iterdir())},
            "store": store_rows(db)}


def mirror(sb, space16: str) -> dict:
    return json.loads(gzip.decompress((sb.kint_home / f"mirror-{space16}.json.gz").read_bytes()))


def meta(sb, space16: str, seq: int) -> dict:
    return json.loads((sb.kint_home / "epochs" / space16 / f"{seq:08d}.meta.json").read_text())


def entities(db: Path) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(
            "select category, name, status, body from entities order by name").fetchall()
    finally:
        conn.close()


def chain_head(chain, owner: str, sid: str) -> tuple[int, str, int]:
    """(seq, digest, block) of the space's head, read straight from the anvil (the contract
    returns it as (digest, seq, blockNumber))."""
    digest, seq, block = chain["contract"].functions.head(
        Web3.to_checksum_address(owner), bytes.fromhex(sid)).call()
    return int(seq), bytes(digest).hex(), int(block)


def refused_stale(out: subprocess.CompletedProcess[str], reason: str) -> None:
    assert out.returncode == FRESHNESS, out.stdout + out.stderr
    assert "[STALE_RPC]" in out.stderr, out.stderr
    assert reason in out.stderr, out.stderr
    assert "nothing was applied" in out.stderr, out.stderr


# -- the proxy itself --------------------------------------------------------------------------


def test_the_proxy_answers_batches_element_by_element(chain, proxies):
    """kint's web3 sends single requests (it never batches), but a batch through the proxy
    is answered element by element, lies included."""
    proxy = proxies()
    anchor = chain["contract"].address
    head_call = {"to": anchor, "data": chain["contract"].encode_abi(
        "head", args=[anchor, bytes(32)])}
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
             {"jsonrpc": "2.0", "id": 2, "method": "eth_call", "params": [head_call, "latest"]}]
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        conn.request("POST", "/", body=json.dumps(batch),
                     headers={"Content-Type": "application/json"})
        honest = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert [r["id"] for r in honest] == [1, 2] and int(honest[0]["result"], 16) == 31337
    proxy.set_mode("same_seq_other_digest")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("POST", "/", body=json.dumps(batch),
                     headers={"Content-Type": "application/json"})
        lied = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        proxy.forward()
    assert lied[0] == honest[0] and lied[1]["result"] != honest[1]["result"]
    # head() is (digest, seq, blockNumber): another digest, the same seq and block
    assert lied[1]["result"][:66] != honest[1]["result"][:66]
    assert lied[1]["result"][66:] == honest[1]["result"][66:]
    assert proxy.calls[-2:] == ["eth_chainId", "eth_call"]


# -- 1. a lying RPC -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def liars(tmp_path_factory, chain, proxies):
    """Machine A pushes straight to the anvil; machine B reads through a proxy that lies
    when told to. A anchors two epochs and B pulls both, so B's watermark is at seq 2. B
    connects the way a second machine of an EOA owner does: the owner's wallet signs the
    canonical payload and the data key comes from the head epoch's header, read through the
    proxy."""
    a, b = new_machines([tmp_path_factory.mktemp("liar-a"), tmp_path_factory.mktemp("liar-b")],
                        chain["home"])
    proxy = proxies()
    try:
        write(a.sibyl_db, a.tenant, **{"release-gate": RULE_1})
        connected = kjson(a, "connect", "--dev")
        kjson(a, "push")
        write(a.sibyl_db, a.tenant, **{"deploy-window": "deploys only before 3pm"})
        kjson(a, "push")
        space16 = connected["space"]
        joined = connect_with_wallet(b, owner_account(a, connected["owner"]), "--rpc-urls",
                                     proxy.url)
        assert (joined["space"], joined["source"]) == (space16, "chain head header"), joined
        assert kjson(b, "pull")["applied"] == [1, 2]
        yield {"a": a, "b": b, "proxy": proxy, "space16": space16,
               "owner": connected["owner"]}
    finally:
        a.shutdown()
        b.shutdown()


def _at_head(liars) -> int:
    """B pulls honestly up to the chain head; returns the head seq."""
    liars["proxy"].forward()
    pulled = kjson(liars["b"], "pull")
    assert pulled["store_root_matches"] is True, pulled
    return pulled["head"]["seq"]


def test_a_head_older_than_the_watermark_is_refused(liars):
    a, b, proxy, space16 = liars["a"], liars["b"], liars["proxy"], liars["space16"]
    seq = _at_head(liars)
    assert seq >= 2
    write(a.sibyl_db, a.tenant, **{"after-the-stale-head": "an epoch B has not pulled yet"})
    assert kjson(a, "push")["epochs"][-1]["seq"] == seq + 1
    block = meta(b, space16, seq)["block"]
    before = picture(b, space16, b.sibyl_db)
    proxy.set_mode("stale_head", block=block - 1)  # the chain as it was before epoch `seq`
    out = b.kint("pull")
    refused_stale(out, f"the endpoint's head (seq {seq - 1}) is older than the newest this "
                       f"machine saw (seq {seq}): a stale or lying RPC")
    assert any(lie.startswith("head read at block") for lie in proxy.lies)
    assert picture(b, space16, b.sibyl_db) == before
    assert _at_head(liars) == seq + 1
    assert "after-the-stale-head" in [e[1] for e in entities(b.sibyl_db)]


def test_the_same_seq_with_another_digest_is_refused(liars):
    b, proxy, space16 = liars["b"], liars["proxy"], liars["space16"]
    seq = _at_head(liars)
    mark = json.loads((b.kint_home / f"watermark-{space16}.json").read_text())
    before = picture(b, space16, b.sibyl_db)
    proxy.set_mode("same_seq_other_digest")
    out = b.kint("pull")
    refused_stale(out, f"the endpoint's head at seq {seq} has digest ")
    assert f"not the {mark['digest'][:12]} this machine saw: a stale or lying RPC" in out.stderr
    assert picture(b, space16, b.sibyl_db) == before
    assert _at_head(liars) == seq


def _two_new_epochs(liars) -> tuple[int, dict, dict]:
    """A anchors two epochs B has not pulled; returns B's head seq and the two epochs."""
    a = liars["a"]
    seq = _at_head(liars)
    write(a.sibyl_db, a.tenant, **{"read-first": f"the epoch after {seq}, read"})
    first = kjson(a, "push")["epochs"][-1]
    write(a.sibyl_db, a.tenant, **{"read-later": f"the epoch after {seq + 1}, read later"})
    second = kjson(a, "push")["epochs"][-1]
    assert (first["seq"], second["seq"]) == (seq + 1, seq + 2)
    return seq, first, second


# Drops the devchain's last block (anvil_reorg): alone on the run's devchain.
@pytest.mark.chain_exclusive
def test_an_epoch_put_back_under_another_machines_newer_one_is_recorded_where_it_is(liars,
                                                                                   chain):
    """B pulled A's epoch; the chain dropped its block and mined its transaction again a
    block later; A pushed the next epoch on it. B's pull walks that newer epoch alone, and
    the block it names as its prevBlock is where the older one is: B records it there (it
    corrected the head's block only, so B kept the dropped block for an epoch the head no
    longer is, and `kint history --block` was bounded by a block that never held it)."""
    a, b, space16, w3 = liars["a"], liars["b"], liars["space16"], chain["w3"]
    seq = _at_head(liars)
    write(a.sibyl_db, a.tenant, **{"put-back": f"the epoch after {seq}, put back"})
    put_back = kjson(a, "push")["epochs"][-1]
    assert kjson(b, "pull")["applied"] == [seq + 1]
    assert meta(b, space16, seq + 1)["block"] == put_back["block"]
    raw = w3.eth.get_raw_transaction(put_back["tx"])  # the CLI's `0x` form
    assert w3.eth.block_number == put_back["block"], "the block to drop is not the last"
    assert "error" not in w3.provider.make_request("anvil_reorg", [1, []])
    w3.eth.send_raw_transaction(raw)  # mined by automine, a block later
    landed = w3.eth.wait_for_transaction_receipt(put_back["tx"], timeout=30,
                                                 poll_latency=0.05)["blockNumber"]
    assert landed > put_back["block"]
    write(a.sibyl_db, a.tenant, **{"on-top": f"the epoch after {seq + 1}, on top"})
    assert kjson(a, "push")["epochs"][-1]["seq"] == seq + 2

    assert kjson(b, "pull")["applied"] == [seq + 2]
    assert meta(b, space16, seq + 1)["block"] == landed


def _stopped_at(out: subprocess.CompletedProcess[str], seq: int, epoch: dict,
                reason: str) -> dict:
    """v0.3.0's gap (03-new-machine.md, "Gaps"): not an error, exit 0, the epochs before
    it applied, the epoch named with its block and reason, the mirror recording it."""
    assert out.returncode == 0, out.stdout + out.stderr
    stopped = json.loads(out.stdout)
    assert stopped["applied"] == list(range(seq + 1, epoch["seq"])), stopped
    assert stopped["gap"] == [epoch["seq"]], stopped
    assert [(e["seq"], e["block"], e["tx"]) for e in stopped["skipped"]] == [
        (epoch["seq"], epoch["block"], epoch["tx"])], stopped
    assert reason in stopped["skipped"][0]["reason"], stopped
    assert stopped["message"].startswith(f"stopped at epoch {epoch['seq']}: "), stopped
    assert stopped["head"]["seq"] == epoch["seq"] - 1, stopped
    return stopped


def test_calldata_that_does_not_hash_to_the_event_digest_is_a_gap(liars):
    """Served calldata the event does not vouch for fails an epoch's ciphertext check: under
    v0.3.0 that epoch is a gap (03-new-machine.md, "What every epoch must pass", 2, and
    "Gaps"), the epochs before it are applied and the pull exits 0 naming it; push and
    verify refuse until a later pull reads it. It used to refuse the whole pull (exit 6)."""
    b, proxy, space16 = liars["b"], liars["proxy"], liars["space16"]
    seq, first, second = _two_new_epochs(liars)
    proxy.set_mode("bad_calldata", tx=second["tx"])
    try:
        out = b.kint("pull", "--json")
        refused_push = b.kint("push")
        refused_verify = b.kint("verify", "read first")
    finally:
        proxy.forward()
    _stopped_at(out, seq, second, "ciphertext digest does not match the Epoch event")
    assert any(lie.startswith("calldata of") for lie in proxy.lies)
    bodies = {e[1]: e[3] for e in entities(b.sibyl_db)}
    assert f"after {seq}, read" in bodies["read-first"], bodies
    assert "read-later" not in bodies, bodies
    assert mirror(b, space16)["skipped"] == [second["seq"]]
    assert refused_push.returncode == PUSH_PULL_REFUSED, refused_push.stderr
    assert "could not apply epoch(s)" in refused_push.stderr, refused_push.stderr
    assert refused_verify.returncode != 0, refused_verify.stdout
    assert _at_head(liars) == second["seq"]  # the honest endpoint brings the rest in
    assert mirror(b, space16)["skipped"] == []
    assert "read-later" in [e[1] for e in entities(b.sibyl_db)]


def test_calldata_the_rpc_will_not_serve_is_a_gap_after_the_epochs_before_it(liars):
    """An RPC that refuses one epoch's transaction mid-walk: the epoch before it is applied
    and the pull stops at it, exit 0, `SKIPPED epoch N block B: ...` on the CLI (v0.3.0,
    03-new-machine.md: the next pull tries the epoch again). It used to apply nothing."""
    b, proxy = liars["b"], liars["proxy"]
    seq, first, second = _two_new_epochs(liars)
    proxy.set_mode("error_methods", methods=["eth_getTransactionByHash"],
                   message="this transaction is pruned", tx=second["tx"])
    try:
        out = b.kint("pull", "--json")
        proxy.set_mode("error_methods", methods=["eth_getTransactionByHash"],
                       message="this transaction is pruned", tx=second["tx"])
        shown = b.kint("pull")
    finally:
        proxy.forward()
    _stopped_at(out, seq, second, f"cannot fetch the calldata of epoch {second['seq']}: ")
    assert "this transaction is pruned" in json.loads(out.stdout)["skipped"][0]["reason"]
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"SKIPPED epoch {second['seq']} block {second['block']}: cannot fetch the " \
        f"calldata of epoch {second['seq']}" in shown.stdout, shown.stdout
    bodies = {e[1]: e[3] for e in entities(b.sibyl_db)}
    assert f"after {seq}, read" in bodies["read-first"], bodies
    assert f"after {seq + 1}, read later" not in bodies.get("read-later", ""), bodies
    assert not list(b.kint_home.glob("applying-*"))  # the applied epoch's journal ended
    assert _at_head(liars) == second["seq"]
    assert f"after {seq + 1}, read later" in {e[1]: e[3] for e in entities(b.sibyl_db)}[
        "read-later"]


def _gap_then_discard_refused(liars, seq: int, second: dict, reason: str, mode: str,
                              **params: object) -> None:
    """B pulls while the proxy lies in `mode` about epoch `second`: a gap there after the
    epoch before it (v0.3.0, 03-new-machine.md), with the `SKIPPED` line and exit 0 on the
    CLI; push refuses while it stands; `pull --discard-local` under the same lie refuses
    whole (STALE_RPC, exit 6) and moves nothing; the honest endpoint brings the rest in."""
    b, proxy, space16 = liars["b"], liars["proxy"], liars["space16"]
    proxy.set_mode(mode, **params)
    try:
        out = b.kint("pull", "--json")
        shown = b.kint("pull")
        refused_push = b.kint("push")
        before, inode = picture(b, space16, b.sibyl_db), b.sibyl_db.stat().st_ino
        backups = sorted(b.sibyl_db.parent.glob("*.kint-backup-*"))
        discarded = b.kint("pull", "--discard-local")
    finally:
        proxy.forward()
    _stopped_at(out, seq, second, reason)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"SKIPPED epoch {second['seq']} block {second['block']}: {reason}" in shown.stdout, \
        shown.stdout
    bodies = {e[1]: e[3] for e in entities(b.sibyl_db)}
    assert f"after {seq}, read" in bodies["read-first"], bodies
    assert f"after {seq + 1}, read later" not in bodies.get("read-later", ""), bodies
    assert mirror(b, space16)["skipped"] == [second["seq"]]
    assert refused_push.returncode == PUSH_PULL_REFUSED, refused_push.stderr
    assert "could not apply epoch(s)" in refused_push.stderr, refused_push.stderr
    assert "[STALE_RPC]" in discarded.stderr and reason in discarded.stderr, discarded.stderr
    _untouched_by(discarded, b, space16, before, inode, backups, code=FRESHNESS)
    assert _at_head(liars) == second["seq"]
    assert mirror(b, space16)["skipped"] == []
    assert f"after {seq + 1}, read later" in {e[1]: e[3] for e in entities(b.sibyl_db)}[
        "read-later"]


def test_an_epoch_whose_prev_does_not_chain_is_a_gap_after_the_epochs_before_it(liars):
    """The RPC's Epoch log gives the newest epoch a prev that is not the digest of the one
    before it: v0.3.0's first check of every epoch fails (03-new-machine.md, "What every
    epoch must pass", 1), a gap after the epoch before it. It used to refuse the whole pull
    (exit 6) with nothing applied."""
    b, proxy, space16 = liars["b"], liars["proxy"], liars["space16"]
    seq, first, second = _two_new_epochs(liars)
    lies = len(proxy.lies)
    _gap_then_discard_refused(
        liars, seq, second, f"epoch {second['seq']} does not follow the last applied epoch "
        f"({first['digest'][:12]})", "broken_prev", tx=second["tx"])
    assert any(lie.startswith("eth_getLogs: prev of") for lie in proxy.lies[lies:])
    assert meta(b, space16, second["seq"])["prev"] == first["digest"]  # the honest link


def test_an_epoch_that_opens_and_contradicts_the_chain_is_a_gap(liars):
    """The RPC serves, for the newest epoch, one sealed under the vault's data key whose
    plaintext says another seq than the chain (and rewrites the digest in the head and the
    log to match): it opens, and contradicts the chain. v0.3.0 (03-new-machine.md, "What
    every epoch must pass", 6, and "Gaps") stops there after the epoch before it, exit 0.
    It used to refuse the whole pull (exit 6) with nothing applied."""
    a, proxy, space16 = liars["a"], liars["proxy"], liars["space16"]
    seq, first, second = _two_new_epochs(liars)
    data = bytes.fromhex(proxy.upstream_call("eth_getTransactionByHash",
                                             ["0x" + second["tx"].removeprefix("0x")])
                         ["input"][2:])
    start, length = push_ciphertext(data)
    n = second["seq"]
    lying = resealed(data[start:start + length],
                     lambda raw: raw.replace(f'"seq":{n},'.encode(), f'"seq":{n + 7},'.encode(),
                                             1),
                     dek=decode_recovery_code(recovery_code(a, space16)), owner=liars["owner"],
                     space=space_id_of(a.tenant), seq=n,
                     prev=data[CIPHERTEXT_OFFSET - 96:CIPHERTEXT_OFFSET - 64].hex())
    assert data[CIPHERTEXT_OFFSET - 96:CIPHERTEXT_OFFSET - 64].hex() == first["digest"]
    _gap_then_discard_refused(
        liars, seq, second, f"epoch plaintext seq {n + 7} disagrees with the chain ({n})",
        "tampered_ciphertext", tx=second["tx"], envelope=lying)


def test_a_full_pull_that_stops_at_a_gap_is_still_a_gap_and_backfills_nothing(liars):
    """`pull --full` whose walk stops at an epoch the RPC will not serve: the gap stands as
    for a plain pull (exit 0, the epoch before it applied), and no backfill runs, as in
    v0.3.0 (03-new-machine.md, "Snapshots and --full": no backfill after a pull that stopped
    at a gap). The backfill walked the gap's epoch again and turned the
    gap into a refusal of the whole pull (RPC_UNAVAILABLE, exit 5)."""
    b, proxy = liars["b"], liars["proxy"]
    seq, first, second = _two_new_epochs(liars)
    proxy.set_mode("error_methods", methods=["eth_getTransactionByHash"],
                   message="this transaction is pruned", tx=second["tx"])
    try:
        out = b.kint("pull", "--full", "--json")
    finally:
        proxy.forward()
    stopped = _stopped_at(out, seq, second,
                          f"cannot fetch the calldata of epoch {second['seq']}: ")
    assert (stopped["backfilled"], stopped["closed"]) == ([], []), stopped
    assert _at_head(liars) == second["seq"]


def test_a_backfill_that_cannot_read_an_epoch_leaves_the_pull_standing(liars):
    """`pull --full` after a pull with no gap walks back for history; an older epoch whose
    calldata the RPC will not serve stops that walk. v0.3.0 lists only the epochs it cannot
    open, and carries on (03-new-machine.md, "Snapshots and --full"): the pull's result
    stands (exit 0, its epochs applied) and the walk's stop is named, in --json and as a
    NOTICE line; the next `pull --full` caches it. It used to raise the refusal of the
    whole pull (RPC_UNAVAILABLE, exit 5) after the pull had applied its epochs."""
    b, proxy, space16 = liars["b"], liars["proxy"], liars["space16"]
    seq, first, second = _two_new_epochs(liars)
    assert _at_head(liars) == second["seq"]
    for name in (f"{first['seq']:08d}.meta.json", f"{first['seq']:08d}.json.gz"):
        (b.kint_home / "epochs" / space16 / name).unlink()  # not cached: --full fetches it
    write(liars["a"].sibyl_db, liars["a"].tenant, **{"read-last": "the epoch a full pull applies"})
    third = kjson(liars["a"], "push")["epochs"][-1]
    proxy.set_mode("error_methods", methods=["eth_getTransactionByHash"],
                   message="this transaction is pruned", tx=first["tx"])
    try:
        out = b.kint("pull", "--full", "--json")
        shown = b.kint("pull", "--full")
    finally:
        proxy.forward()
    assert out.returncode == 0, out.stdout + out.stderr
    pulled = json.loads(out.stdout)
    assert pulled["applied"] == [third["seq"]] and pulled["gap"] == [], pulled
    stopped = pulled["backfill_stopped"]
    assert (stopped["seq"], stopped["block"]) == (first["seq"], first["block"]), stopped
    assert f"cannot fetch the calldata of epoch {first['seq']}: " in stopped["reason"], stopped
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert (f"pull: NOTICE --full stopped at epoch {first['seq']} block {first['block']}: "
            f"cannot fetch the calldata") in shown.stdout, shown.stdout
    again = kjson(b, "pull", "--full")
    assert again["backfill_stopped"] is None and first["seq"] in again["backfilled"], again


def test_a_tampered_ciphertext_whose_hashes_all_agree_is_refused(liars):
    """The proxy alters a byte of the encrypted body and rewrites the digest in the head and
    the Epoch log to the altered ciphertext's keccak: every hash the client checks agrees,
    and only the AES-GCM tag (bound to chain, owner, space and header) refuses it.

    Under v0.3.0 (06-epochs.md, "An epoch nobody can open") an epoch AES-GCM refuses is not
    a freshness refusal: the pull stops before it, names it in `skipped`, applies nothing,
    and the mirror records the gap (push and verify refuse until it applies)."""
    a, b, proxy, space16 = liars["a"], liars["b"], liars["proxy"], liars["space16"]
    seq = _at_head(liars)
    write(a.sibyl_db, a.tenant, **{"tampered": "the proxy will alter this epoch"})
    pushed = kjson(a, "push")["epochs"][-1]
    tx = pushed["tx"]
    before = picture(b, space16, b.sibyl_db)
    proxy.set_mode("tampered_ciphertext", tx=tx)
    lies = len(proxy.lies)
    out = b.kint("pull", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    stopped = json.loads(out.stdout)
    assert stopped["applied"] == [] and stopped["gap"] == [seq + 1], stopped
    assert [(e["seq"], e["block"], e["tx"]) for e in stopped["skipped"]] == [
        (seq + 1, pushed["block"], tx)], stopped
    assert stopped["skipped"][0]["reason"].startswith("AES-GCM refused the epoch: it was "
                                                      "altered"), stopped
    assert stopped["message"].startswith(f"stopped at epoch {seq + 1}: AES-GCM refused"), stopped
    told = proxy.lies[lies:]
    assert any(x.startswith("eth_call: digest") for x in told), told  # the head
    assert any(x.startswith("eth_getLogs: digest") for x in told), told  # the event
    assert any(x.startswith("ciphertext of") for x in told), told  # the calldata
    after = picture(b, space16, b.sibyl_db)
    held = json.loads(after.pop("mirror"))
    assert held.pop("skipped") == [seq + 1]  # the gap, recorded
    expected = json.loads(before.pop("mirror"))
    assert expected.pop("skipped") == []
    assert held == expected and after == before  # nothing else moved
    assert _at_head(liars) == seq + 1
    assert mirror(b, space16)["skipped"] == []
    assert "tampered" in [e[1] for e in entities(b.sibyl_db)]


def test_a_corrupt_cached_epoch_is_refetched_from_calldata(liars):
    a, b, proxy, space16 = liars["a"], liars["b"], liars["proxy"], liars["space16"]
    head = _at_head(liars)
    # The cache keeps no ciphertext: pull rebuilds it from the cached gzip and header with
    # the data key, and uses it only when it hashes to the event's digest.
    cached = b.kint_home / "epochs" / space16 / f"{1:08d}.json.gz"
    assert not list(cached.parent.glob("*.bin"))
    original = cached.read_bytes()
    garbled = bytearray(original)
    garbled[len(garbled) // 2] ^= 0xFF  # one byte of the cached epoch, changed on disk
    cached.write_bytes(bytes(garbled))
    calls = len(proxy.calls)
    restored = kjson(b, "pull", "--discard-local")  # replays every epoch from the cache
    assert restored["applied"] == list(range(1, head + 1)), restored
    assert restored["store_root_matches"] is True and restored["warnings"] == []
    assert proxy.calls[calls:].count("eth_getTransactionByHash") == 1  # epoch 1 alone
    assert cached.read_bytes() == original  # the cache holds what the calldata sealed again
    assert entities(b.sibyl_db) == entities(a.sibyl_db)
    lines = ok(b.kint("history", "entity", "release-gate", "--category", "rules")).stdout
    assert lines.splitlines() and lines.split()[1] == "1", lines
    assert kjson(b, "verify", "release rule")["decision"] == "proceed"


def _discard_refused_while(liars, method: str, message: str, **params: str) -> None:
    """`pull --discard-local` while the proxy refuses `method` (with `message`; `params`
    narrow it, as `tx=`): refused RPC_UNAVAILABLE in those words, and the store untouched."""
    b, proxy, space16 = liars["b"], liars["proxy"], liars["space16"]
    before, inode = picture(b, space16, b.sibyl_db), b.sibyl_db.stat().st_ino
    backups = sorted(b.sibyl_db.parent.glob("*.kint-backup-*"))
    proxy.set_mode("error_methods", methods=[method], message=message, **params)
    try:
        out = b.kint("pull", "--discard-local")
    finally:
        proxy.forward()
    assert "[RPC_UNAVAILABLE]" in out.stderr and message in out.stderr, out.stderr
    _untouched_by(out, b, space16, before, inode, backups)


def _untouched_by(out: subprocess.CompletedProcess[str], b, space16: str, before: dict,
                  inode: int, backups: list[Path], code: int = PUSH_PULL_REFUSED) -> None:
    """A refused `pull --discard-local` left the store where it was: the same file (inode),
    the same rows, mirror, watermark and cache, and no new `.kint-backup-` file."""
    assert out.returncode == code, out.stdout + out.stderr
    assert "moved aside" not in out.stdout + out.stderr
    assert b.sibyl_db.stat().st_ino == inode
    assert picture(b, space16, b.sibyl_db) == before
    assert sorted(b.sibyl_db.parent.glob("*.kint-backup-*")) == backups


def test_rekey_whose_head_header_cannot_be_read_is_its_own_refusal_exit_2(liars):
    """rekey reads the newest readable header before anything else (05-keys.md, "Rotate the
    data key", step 3), and v0.3.0 gives every refusal before its push exit 2 (5 is "when
    the push failed"; 09-cli.md: 2 for a refusal from rekey). An RPC that will not serve the
    head epoch's calldata, or serves it altered, is such a refusal: CHAIN_UNREADABLE, exit
    2, the read's own words; nothing sent, nothing on this machine changed. It exited 5."""
    from chain_machines import owner_account, wallet_signature
    from kint.commands.exit_codes import ERROR

    a, b, proxy, space16 = liars["a"], liars["b"], liars["proxy"], liars["space16"]
    seq = _at_head(liars)
    owner = owner_account(a, liars["owner"])
    payload = ok(b.kint("canonical-payload", "--owner", owner.address)).stdout
    signature = wallet_signature(owner, payload) + "\n"
    wraps = (b.kint_home / f"wraps-{space16}.json").read_bytes()
    for mode, params, said in (
            ("error_methods", {"methods": ["eth_getTransactionByHash"],
                               "message": "this transaction is pruned"},
             f"cannot fetch the calldata of epoch {seq}: "),
            ("bad_calldata", {}, "ciphertext digest does not match the Epoch event")):
        proxy.set_mode(mode, **params)
        try:
            out = b.kint("rekey", "--signature", "-", input=signature)
        finally:
            proxy.forward()
        assert out.returncode == ERROR, (mode, out.stdout, out.stderr)
        assert "[CHAIN_UNREADABLE]" in out.stderr and said in out.stderr, (mode, out.stderr)
        assert (b.kint_home / f"wraps-{space16}.json").read_bytes() == wraps
        if mode == "error_methods":
            # A transport failure: its hint names where B's endpoints are set, those its
            # connect kept (and the space's own table, by its label), where it said
            # "change the RPC (KINT_RPC_URL)", which B's space does not use.
            assert ("try again, or change the RPC (`kint connect --rpc-urls URL` again, "
                    "which replaces the endpoints the last one kept for this space, or "
                    f"rpc_url in the space's [spaces.\"{b.label(b.sibyl_db)}\"] table in "
                    f"config.toml)") in out.stderr, out.stderr
            assert "KINT_RPC_URL" not in out.stderr, out.stderr
    assert _at_head(liars) == seq  # nothing was anchored


def test_discard_local_moves_nothing_while_an_epochs_calldata_cannot_be_read(liars):
    """A discarding pull would stop at the unread epoch with part of the memory: it refuses
    whole instead, the store where it was, as for a walk the RPC refuses (below)."""
    b, space16 = liars["b"], liars["space16"]
    _two_new_epochs(liars)
    _at_head(liars)
    tx = meta(b, space16, 1)["tx"]  # a restore from seq 0 reads epoch 1 again, from calldata
    cached = b.kint_home / "epochs" / space16 / f"{1:08d}.json.gz"
    kept = cached.read_bytes()
    cached.unlink()
    _discard_refused_while(liars, "eth_getTransactionByHash", "this transaction is pruned",
                           tx=tx)
    cached.write_bytes(kept)  # for the tests after this one


def test_discard_local_moves_nothing_while_the_rpc_refuses_the_walk(liars):
    """The endpoint answers the head but refuses every log query, so the walk from seq 0
    that a discarding pull needs cannot fetch one epoch: the store stays in place (it used
    to be moved aside first, leaving the agent with no memory until a later pull)."""
    proxy = liars["proxy"]
    seq = _at_head(liars)
    _discard_refused_while(liars, "eth_getLogs", "logs are switched off")
    assert any(lie.startswith("eth_getLogs: error") for lie in proxy.lies)
    assert _at_head(liars) == seq


def test_discard_local_moves_nothing_while_sibyl_needs_an_account(liars):
    """Sibyl's account gate refuses writes (the credentials lost their session: signed
    out), so the restore could not write one row: the pull asks the gate first and the
    store stays in place. The tenant still resolves from the same credentials file."""
    b, space16 = liars["b"], liars["space16"]
    seq = _at_head(liars)
    creds = b.home / ".sibyl-memory" / "credentials.json"
    signed_in = creds.read_bytes()
    before, inode = picture(b, space16, b.sibyl_db), b.sibyl_db.stat().st_ino
    backups = sorted(b.sibyl_db.parent.glob("*.kint-backup-*"))
    held = json.loads(signed_in)
    del held["session_token"]
    creds.write_text(json.dumps(held))
    try:
        out = b.kint("pull", "--discard-local")
    finally:
        creds.write_bytes(signed_in)
    assert "[SIBYL_ERROR]" in out.stderr and "needs an account" in out.stderr, out.stderr
    _untouched_by(out, b, space16, before, inode, backups)
    assert _at_head(liars) == seq


def test_a_plain_pull_without_a_sibyl_account_writes_nothing(liars):
    """A signed-out Sibyl refuses every write, so a plain pull with an epoch to apply asks
    Sibyl's account gate before its first write: SIBYL_ERROR with nothing written, no apply
    journal begun. It used to begin the epoch's journal and meet the refusal at the first
    row, and then `status` and `doctor` named a pull stopped half-way for `kint pull` to
    finish (doctor's hint: free space on a full disk), which no pull could do."""
    a, b, space16 = liars["a"], liars["b"], liars["space16"]
    seq = _at_head(liars)
    write(a.sibyl_db, a.tenant, **{"while-signed-out": "an epoch B cannot write yet"})
    assert kjson(a, "push")["epochs"][-1]["seq"] == seq + 1
    creds = b.home / ".sibyl-memory" / "credentials.json"
    signed_in = creds.read_bytes()
    before = picture(b, space16, b.sibyl_db)
    held = json.loads(signed_in)
    del held["session_token"]
    creds.write_text(json.dumps(held))
    try:
        out = b.kint("pull")
        status = kjson(b, "status")
    finally:
        creds.write_bytes(signed_in)
    assert out.returncode == PUSH_PULL_REFUSED, out.stdout + out.stderr
    assert "[SIBYL_ERROR]" in out.stderr and "needs an account" in out.stderr, out.stderr
    assert not list(b.kint_home.glob("applying-*")), "no epoch was begun"
    assert status["interrupted_pull"] is None, status
    assert picture(b, space16, b.sibyl_db) == before
    assert _at_head(liars) == seq + 1  # signed in again, the same pull goes through


def test_a_plain_pull_that_writes_nothing_before_its_gap_needs_no_sibyl_account(liars):
    """The account gate is asked only when the pull will write: a pull whose first epoch to
    apply is a gap (its calldata not served) applies nothing, so without a Sibyl account it
    is still the gap, exit 0, v0.3.0's answer (03-new-machine.md, "Gaps"). It was refused
    SIBYL_ERROR, exit 5, because an epoch after the gap opened, one it would never write."""
    b, proxy = liars["b"], liars["proxy"]
    seq, first, _second = _two_new_epochs(liars)
    creds = b.home / ".sibyl-memory" / "credentials.json"
    signed_in = creds.read_bytes()
    held = json.loads(signed_in)
    del held["session_token"]
    creds.write_text(json.dumps(held))
    proxy.set_mode("error_methods", methods=["eth_getTransactionByHash"],
                   message="this transaction is pruned", tx=first["tx"])
    try:
        out = b.kint("pull", "--json")
    finally:
        proxy.forward()
        creds.write_bytes(signed_in)
    assert out.returncode == 0, out.stdout + out.stderr
    stopped = json.loads(out.stdout)
    assert stopped["applied"] == [] and stopped["gap"][0] == first["seq"], stopped
    assert [e["seq"] for e in stopped["skipped"]] == [first["seq"]], stopped
    assert "this transaction is pruned" in stopped["skipped"][0]["reason"], stopped
    assert not list(b.kint_home.glob("applying-*"))
    assert _at_head(liars) == seq + 2  # signed in, with the calldata served, it all applies


def test_discard_local_refuses_a_store_that_holds_another_tenants_rows(liars):
    """One Sibyl store holds many tenants (Sibyl keys rows by tenant). Another tenant on B's
    store, connected and anchored: B's `pull --discard-local` would move the whole file
    aside and restore only B's rows, and the other tenant's next push would anchor the
    deletion of every one of its rows. It is refused BUSY naming the other tenant and its
    rows, nothing moved, and the other tenant has nothing to push. The supervisor is
    restarted first so that no worker of the other space holds the store open: the refusal
    must not rest on the held-store check."""
    b, space16 = liars["b"], liars["space16"]
    other = "kint-faults-other"
    seq = _at_head(liars)
    write(b.sibyl_db, other, **{"other-gate": "the other tenant's rule", "other-two": "two"})
    kjson(b, "--tenant", other, "connect", "--dev")
    assert kjson(b, "--tenant", other, "push")["pushed"] == 2
    b.shutdown()
    b.start_entitled()
    before, inode = picture(b, space16, b.sibyl_db), b.sibyl_db.stat().st_ino
    backups = sorted(b.sibyl_db.parent.glob("*.kint-backup-*"))
    out = b.kint("pull", "--discard-local")
    assert "[BUSY]" in out.stderr, out.stdout + out.stderr
    assert f"also holds the rows of 1 other tenant(s): {other} (2 rows)" in out.stderr
    assert "nothing was moved" in out.stderr and "a store one tenant holds alone" in out.stderr
    _untouched_by(out, b, space16, before, inode, backups)
    dry = kjson(b, "--tenant", other, "push", "--dry-run")
    assert dry["epochs"] == [], dry  # no deletion of the other tenant's rows to anchor
    assert _at_head(liars) == seq


# -- 2. a hung RPC for one tenant -------------------------------------------------------------


@pytest.fixture(scope="module")
def hung(tmp_path_factory, chain, proxies):
    """One machine, two spaces: X (a Hermes profile's store) and Y (Sibyl's own store),
    each connected with its own endpoint, each a proxy that forwards for now."""
    m = new_machine(tmp_path_factory.mktemp("hung"), chain["home"])
    px, py = proxies(), proxies()
    x, y = m.profile_db("x"), m.sibyl_db
    try:
        for db, proxy in ((x, px), (y, py)):
            write(db, m.tenant, **{"release-gate": RULE_1})
            jdb(m, db, "connect", "--dev", "--rpc-urls", proxy.url)
            assert jdb(m, db, "push")["pushed"] >= 1
        yield {"m": m, "x": x, "y": y, "px": px, "py": py}
    finally:
        px.forward()
        m.shutdown()


def _timed(fn):
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def _verify_x(m, x: Path, px) -> tuple[subprocess.CompletedProcess[str], float, list[str]]:
    """X's verify with a call's RPC timeout past the proxy's hold, and VERIFY_HEAD_S: (its
    output, how long it took, the calls the endpoint saw meanwhile)."""
    before = len(px.calls)
    out, took = _timed(lambda: m.kint("--db", str(x), "verify", "release rule", "--json",
                                      env={"KINT_RPC_TIMEOUT": str(VERIFY_RPC_TIMEOUT_S),
                                           "KINT_VERIFY_HEAD_SECONDS": str(VERIFY_HEAD_S)}))
    return out, took, px.calls[before:]


def _tried_once_each(calls: list[str]) -> bool:
    """No call sent again: verify's head read is bounded by its budget, tried once."""
    return bool(calls) and len(calls) == len(set(calls))


def _tried_thrice_at_most(calls: list[str]) -> bool:
    """A call that timed out is tried twice more, as v0.3.0's are (10-configuration.md),
    and no more: web3's own retries are off."""
    return bool(calls) and max(Counter(calls).values()) <= 3


def _status_row(m, db: Path) -> dict:
    out = m.kint("supervisor", "status", "--json")
    assert out.returncode in (0, 1), out.stderr
    rows = [r for r in json.loads(out.stdout)["spaces"] if r["store"] == str(db)]
    assert len(rows) == 1, rows
    return rows[0]


def test_a_hung_rpc_stalls_only_its_own_tenant(hung):
    m, x, y, px = hung["m"], hung["x"], hung["y"], hung["px"]
    px.set_mode("hang")

    # X's verify answers from the mirror, within its head budget, and says so: its head
    # read was sent once and given up on by the budget, well before the proxy's hold or the
    # call's own RPC timeout would have ended it.
    out, took, sent = _verify_x(m, x, px)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["decision"] == "proceed", result["reason"]
    assert result["head_unavailable"] == "rpc unresponsive"
    assert "chain head unavailable (rpc unresponsive)" in out.stderr
    assert _tried_once_each(sent), sent
    assert took < VERIFY_HEAD_S + MARGIN_S, took
    assert px.hanging >= 1  # the endpoint really took the call and never answered

    # X's push is stuck on its first call; status shows the call in flight and its age.
    write(x, m.tenant, **{"x-after-hang": "written while X's endpoint hangs"})
    started, calls = time.monotonic(), len(px.calls)
    push = subprocess.Popen([KINT, "--db", str(x), "push"], text=True,
                            env={**m.env, "KINT_RPC_TIMEOUT": str(int(RPC_TIMEOUT_S))},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ended: dict = {}

    def reap() -> None:
        ended["out"], ended["err"] = push.communicate()
        ended["at"] = time.monotonic()
        ended["calls"] = px.calls[calls:]
        # X's verify as soon as the push's failure is recorded, while Y still works: the
        # endpoint counts as unresponsive for 30 s after a failure (UNRESPONSIVE_WINDOW_S),
        # and on a loaded box Y's three commands outlasted that (1 failure in 10 runs).
        ended["verify"] = _verify_x(m, x, px)

    waiter = threading.Thread(target=reap, name="kint-test-push-waiter")
    waiter.start()
    try:
        stuck = None
        while "at" not in ended and stuck is None:
            # The supervisor's status op through the client in this process: a `kint
            # supervisor status` CLI per poll can take longer than the second each try hangs.
            row = m.row(x)
            if (row["op"] or {}).get("name") == "push" and (row["rpc"] or {}).get("call"):
                stuck = row  # a beat sent while the push waits on the endpoint
        assert stuck is not None, "status never showed X's call in flight"
        # the call is the one the endpoint took and holds (web3 may open with eth_chainId)
        assert stuck["rpc"]["call"] in px.calls[calls:], (stuck["rpc"], px.calls[calls:])
        assert stuck["rpc"]["call"].startswith("eth_") and stuck["rpc"]["age_s"] > 0, stuck
        assert stuck["op"]["age_s"] > 0 and stuck["state"] in ("busy", "ready"), stuck

        # Meanwhile Y pushes, pulls and verifies against the chain as if nothing happened.
        write(y, m.tenant, **{"y-meanwhile": "Y keeps working"})
        pushed = kjson(m, "push")
        assert pushed["pushed"] == 1, pushed
        assert "already at the chain head" in kjson(m, "pull")["message"]
        verified = kjson(m, "verify", "release rule")
        assert verified["decision"] == "proceed", verified["reason"]
        assert verified["head_unavailable"] is None
        assert verified["chain_head"]["seq"] == pushed["epochs"][-1]["seq"]
        assert _status_row(m, y)["state"] in ("ready", "busy")
        waiter.join(timeout=PROXY_HANG_S + MARGIN_S)
    finally:
        if push.poll() is None:
            push.kill()
        waiter.join()
    # Refused by its RPC timeout: the call was sent three times at most, and the refusal
    # came before the proxy let go of it (the push's own deadline is 900 s).
    err, took = ended["err"], ended["at"] - started
    assert push.returncode == PUSH_PULL_REFUSED, err
    assert "[RPC_UNAVAILABLE]" in err and "Timeout" in err, err
    assert _tried_thrice_at_most(ended["calls"]), ended["calls"]
    assert took < 3 * RPC_TIMEOUT_S + MARGIN_S, took

    # With a failure just recorded, X's verify does not even try the endpoint.
    out, _, sent = ended["verify"]
    assert json.loads(out.stdout)["head_unavailable"] == "rpc unresponsive"
    assert "chain head unavailable (rpc unresponsive)" in out.stderr
    assert sent == [], sent

    # The endpoint answers again: X anchors what waited, and verifies against the chain.
    px.forward()
    assert px.hanging == 0 or _wait(lambda: px.hanging == 0, 5)
    assert jdb(m, x, "push")["pushed"] == 1
    verified = jdb(m, x, "verify", "release rule")
    assert verified["decision"] == "proceed" and verified["head_unavailable"] is None


def _wait(predicate, timeout: float, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# -- 3. kill -9 at each push step ----------------------------------------------------------------


@pytest.fixture(scope="module")
def killbox(tmp_path_factory, chain):
    root = tmp_path_factory.mktemp("kill")
    flag = root / "crash.flag"
    k = new_machine(root / "machine", chain["home"], KINT_TEST_CRASH_FLAG=str(flag))
    yield k, flag
    k.shutdown()


def _rows_root_on_chain(chain, tx: str) -> str:
    data = bytes(chain["w3"].eth.get_transaction("0x" + tx)["input"])
    start, length = push_ciphertext(data)
    return parse_header(data[start:start + length]).rows_root.hex()


def _store_root(db: Path, tenant: str) -> str:
    rows = export_rows(connect_ro(str(db)), tenant)
    return merkle_root([r.leaf for r in sorted(
        rows, key=lambda r: r.canonical_id.encode("utf-8"))]).hex()


@pytest.mark.parametrize("step", ["before_send", "after_send", "after_receipt",
                                  "after_mirror_save"])
def test_kill_9_at_each_push_step_loses_nothing(killbox, chain, step):
    k, flag = killbox
    db = k.profile_db("kill-" + step.replace("_", "-"))
    write(db, k.tenant, **{"first": "anchored before the kill"})
    connected = jdb(k, db, "connect", "--dev")
    space16, owner = connected["space"], connected["owner"]
    sid = space_id_of(k.label(db))
    assert jdb(k, db, "push")["epochs"][-1]["seq"] == 1
    pid = k.row(db)["pid"]

    write(db, k.tenant, **{"second": f"in the push killed {step}"})
    flag.write_text(f"{step} {space16}")
    out = kdb(k, db, "push")
    assert out.returncode == PUSH_PULL_REFUSED and "[WORKER_DOWN]" in out.stderr, \
        out.stdout + out.stderr
    assert not flag.exists(), "the worker did not reach the step"
    pending = k.kint_home / f"pending-{space16}.json"

    # The supervisor restarts the worker on its own (one_for_one, transient), and the new
    # worker resolves the pending epoch against the head at once (docs/how-it-works.md, "Push, step
    # by step"): landed, it is recorded; not sent, the same signed transaction is sent. Either way:
    # seq 2, agreed.
    row = k.wait_for(lambda: (r := k.row(db))["pid"] not in (None, pid)
                     and r["state"] in ("ready", "idle") and r, timeout=30,
                     what="the restarted worker")
    assert row["restarts"] == 1, row
    k.wait_for(lambda: not pending.exists() and mirror(k, space16)["head"]["seq"] == 2
               and chain_head(chain, owner, sid)[:2] == (2, mirror(k, space16)["head"]["digest"]),
               timeout=30, what="the interrupted push resolved by the restarted worker")

    # The next push finishes the killed one and anchors what came after.
    write(db, k.tenant, **{"third": "written after the restart"})
    pushed = jdb(k, db, "push")
    assert [e["seq"] for e in pushed["epochs"]] == [3], pushed
    assert not pending.exists()

    # The chain and the mirror agree; no epoch forked; every row written is anchored.
    seq, digest, _block = chain_head(chain, owner, sid)
    held = mirror(k, space16)
    assert (held["head"]["seq"], held["head"]["digest"]) == (seq, digest) == (3, digest)
    prev = "00" * 32
    for n in range(1, seq + 1):
        m = meta(k, space16, n)
        assert m["prev"] == prev, (n, m)
        prev = m["digest"]
    assert prev == digest
    store_root = _store_root(db, k.tenant)
    assert held["anchored_root"] == store_root
    assert _rows_root_on_chain(chain, held["head"]["tx"]) == store_root
    assert {cid.split("\x00")[2] for cid in held["ids"] if cid.startswith("entity\x00")} == {
        "first", "second", "third"}
    assert jdb(k, db, "push")["pushed"] == 0  # nothing left behind


def test_a_restarted_worker_finishes_a_landed_push_on_its_own(killbox, chain):
    """After a kill once the epoch landed, the restarted worker records it without waiting
    for another push: the chain and the mirror agree as soon as the worker is back."""
    k, flag = killbox
    db = k.profile_db("kill-on-start")
    write(db, k.tenant, **{"first": "anchored before the kill"})
    connected = jdb(k, db, "connect", "--dev")
    space16, sid = connected["space"], space_id_of(k.label(db))
    jdb(k, db, "push")
    pid = k.row(db)["pid"]
    write(db, k.tenant, **{"second": "in the push killed after send"})
    flag.write_text(f"after_send {space16}")
    out = kdb(k, db, "push")
    assert out.returncode == PUSH_PULL_REFUSED and "[WORKER_DOWN]" in out.stderr, \
        out.stdout + out.stderr
    assert not flag.exists()
    k.wait_for(lambda: (r := k.row(db))["pid"] not in (None, pid)
               and r["state"] in ("ready", "idle"), timeout=30, what="the restarted worker")
    seq, digest, _ = chain_head(chain, connected["owner"], sid)
    assert seq == 2
    agreed = _wait(lambda: mirror(k, space16)["head"]["seq"] == seq, timeout=30, interval=0.2)
    assert agreed, (f"after the restart the mirror is at seq {mirror(k, space16)['head']['seq']}"
                    f", the chain at seq {seq}")
    assert mirror(k, space16)["head"]["digest"] == digest
    # The pending record goes last, after the mirror and watermark (a loaded box can show
    # the mirror a moment before it).
    pending = k.kint_home / f"pending-{space16}.json"
    assert _wait(lambda: not pending.exists(), timeout=10, interval=0.2), f"{pending} remains"


# -- gas money ------------------------------------------------------------------------------


def _set_balance(chain, address: str, wei: int) -> None:
    chain["w3"].provider.make_request("anvil_setBalance", [address, hex(wei)])


def _balance(chain, address: str) -> int:
    return int(chain["w3"].eth.get_balance(Web3.to_checksum_address(address)))


@pytest.fixture(scope="module")
def wallet(tmp_path_factory, chain):
    sb = new_machine(tmp_path_factory.mktemp("funds") / "machine", chain["home"])
    yield sb
    sb.shutdown()


def test_the_session_key_pays_and_a_push_names_it_to_fund_when_it_cannot(wallet, chain):
    """The machine's one session key sends and pays for every epoch (v0.3.0: there are no
    per-space writers to top up). When it cannot pay for the next transaction, the push
    refuses with the address to fund (on the devchain, `kint devchain fund` it), sends
    nothing and drops nothing; funded again, it goes on."""
    sb = wallet
    db = sb.profile_db("funds")
    write(db, sb.tenant, first="anchored with the session key's first funds")
    connected = jdb(sb, db, "connect", "--dev")
    session, space16 = connected["session"], connected["space"]
    assert jdb(sb, db, "push")["epochs"][-1]["seq"] == 1
    assert jdb(sb, db, "status")["session"] == session

    session_before = _balance(chain, session)
    write(db, sb.tenant, second="pushed and paid for by the session key")
    assert [e["seq"] for e in jdb(sb, db, "push")["epochs"]] == [2]
    assert _balance(chain, session) < session_before
    assert meta(sb, space16, 1)["writer"] == meta(sb, space16, 2)["writer"] == session

    _set_balance(chain, session, 0)
    write(db, sb.tenant, third="waits in the store for gas money")
    out = kdb(sb, db, "push")
    assert out.returncode == PUSH_PULL_REFUSED, out.stdout + out.stderr
    assert "[NOT_CONNECTED]" in out.stderr, out.stderr
    assert f"session key {session} holds 0 ETH, too little" in out.stderr, out.stderr
    assert "nothing was dropped" in out.stderr, out.stderr
    # On the devchain, the command that funds it (tests/test_dogfood36.py; Base's words:
    # tests/test_worker_hints_for_agents.py).
    assert f"hint: `kint devchain fund {session}` gives it devchain ETH" in out.stderr, \
        out.stderr
    assert "Traceback" not in out.stderr
    assert not (sb.kint_home / f"pending-{space16}.json").exists()
    assert mirror(sb, space16)["head"]["seq"] == 2

    _set_balance(chain, session, 10**18)
    assert [e["seq"] for e in jdb(sb, db, "push")["epochs"]] == [3]
    assert {cid.split("\x00")[2] for cid in mirror(sb, space16)["ids"]} == {"first", "second",
                                                                             "third"}
