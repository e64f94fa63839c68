"""A pull stopped by a full disk is a pull resumed (issue 14, item 1, the full-disk half).

Machine A anchors epoch 1, B pulls it, A anchors epoch 2, and B's pull of epoch 2 meets a
full disk half-way: while writing Sibyl's store (one row of the epoch is in, the next write
fails), or while writing kint's own state (every row is in, the epoch is not recorded; or
the mirror is saved and the watermark is not). The refusal is DISK_FULL naming the file,
nothing anchored is lost, `status` and `doctor` say what is wrong while the disk is full,
and once space is freed the next pull (in the same worker, or in a restarted one) ends in
step with the chain, rows byte-exact with A's, nothing to discard, no fork.

The disk is real: a small tmpfs mounted for the test, holding B's Sibyl store and its
KINT_HOME (one disk, as on a laptop). The fault hooks (tests/support/kint_test_faults.py)
only choose the moment: at one step of the pull the worker writes a ballast file until the
kernel says ENOSPC, so kint's next real write meets a really full disk. Freeing the space
is deleting the ballast.

Mounting needs root (CAP_SYS_ADMIN): CI runs as root; elsewhere these tests skip and say
why.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from chain_machines import (connect_with_wallet, join_devchain, kjson, make_session_key,
                            owner_account)
from conftest import Sandbox, make_sandbox, sibyl_client
from machines_together import side_by_side

CAP_SYS_ADMIN = 21
DISK_BYTES = 32 * 1024 * 1024
ROWS = 6


def _can_mount() -> str | None:
    """None when this process may mount a tmpfs, else why not."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root (CI runs these tests as root)"
    with open("/proc/self/status", encoding="ascii") as fh:
        caps = next(line for line in fh if line.startswith("CapEff:"))
    if not int(caps.split()[1], 16) >> CAP_SYS_ADMIN & 1:
        return "root without CAP_SYS_ADMIN (a container?) cannot mount a tmpfs"
    return None


CANNOT_MOUNT = _can_mount()
pytestmark = pytest.mark.skipif(CANNOT_MOUNT is not None, reason=str(CANNOT_MOUNT))


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


class SmallDisk:
    """A tmpfs of DISK_BYTES at root/disk, its `kint` and `sibyl-memory` folders bound onto
    the machine's KINT_HOME and ~/.sibyl-memory."""

    def __init__(self, sb: Sandbox) -> None:
        self.root = sb.root / "disk"
        self.root.mkdir()
        _mount("-t", "tmpfs", "-o", f"size={DISK_BYTES},mode=0700", "tmpfs", str(self.root))
        self.mounts = [self.root]
        try:
            for name, target in (("kint", sb.kint_home), ("sibyl-memory", sb.sibyl_db.parent)):
                (self.root / name).mkdir(mode=0o700)
                target.mkdir(mode=0o700, parents=True, exist_ok=True)
                _mount("--bind", str(self.root / name), str(target))
                self.mounts.append(target)
        except BaseException:
            self.unmount()
            raise

    @property
    def ballast(self) -> Path:
        return self.root / "ballast"

    def free_bytes(self) -> int:
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def free(self) -> None:
        self.ballast.unlink()

    def unmount(self) -> None:
        for target in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _entities(db: Path) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("select category, name, status, body from entities "
                            "order by category, name").fetchall()


def _write_rules(sb: Sandbox, version: int, count: int) -> None:
    """`count` rules, each with a body of a few kilobytes (so the store has pages to grow)."""
    client = sibyl_client(sb.sibyl_db, sb.tenant)
    for i in range(count):
        client.set_entity("rules", f"rule-{i}", {"rule": f"rule number {i}, version {version}",
                                                 "why": f"reason {i}.{version} " * 300})
    client.storage.close()


class TwoEpochs:
    """A anchors epoch 1 (ROWS rules), B (on the small disk) pulls it, A anchors epoch 2
    (every rule changed, two more). What B held at epoch 1 is `before`."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.flag = tmp_path / "fault-flag"
        self.a: Sandbox | None = None
        self.b: Sandbox | None = None
        self.disk: SmallDisk | None = None

    def make(self, chain_home: Path) -> None:
        tmp_path = self.tmp_path
        self.a = make_sandbox(tmp_path / "a")
        self.b = make_sandbox(tmp_path / "b", KINT_TEST_CRASH_FLAG=str(self.flag))
        self.disk = SmallDisk(self.b)
        for machine in (self.a, self.b):  # one after another: each swaps the environment
            join_devchain(chain_home, machine)
            make_session_key(machine)
        # B's supervisor starts while A starts and anchors epoch 1: B waits on nothing of
        # A's until it connects with A's wallet.
        connected, _ = side_by_side(self._anchor_first, self.b.start_entitled)
        self.space16 = connected["space"]
        connect_with_wallet(self.b, owner_account(self.a, connected["owner"]))
        assert kjson(self.b, "pull")["applied"] == [1]
        self.before = _entities(self.b.sibyl_db)
        assert self.before == _entities(self.a.sibyl_db)
        _write_rules(self.a, 2, ROWS + 2)
        assert kjson(self.a, "push")["pushed"] == ROWS + 2

    def _anchor_first(self) -> dict:
        """A started, ROWS rules written, connected and pushed: `connect --dev`'s answer."""
        assert self.a is not None
        self.a.start_entitled()
        _write_rules(self.a, 1, ROWS)
        connected = kjson(self.a, "connect", "--dev")
        assert kjson(self.a, "push")["pushed"] == ROWS
        return connected

    def fill_at(self, step: str) -> None:
        assert self.disk is not None
        self.flag.write_text(f"{step} {self.space16} fill:{self.disk.root}")

    def close(self) -> None:
        for machine in (self.a, self.b):
            if machine is not None:
                machine.shutdown()
        if self.disk is not None:
            self.disk.unmount()


@pytest.fixture
def epochs(tmp_path, chain_home):
    two = TwoEpochs(tmp_path)
    try:
        two.make(chain_home)
        yield two
    finally:
        two.close()


def _refused_disk_full(b: Sandbox, flag: Path, names: str) -> None:
    refused = b.kint("pull")
    assert not flag.exists(), "the fault step was never reached"
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "[DISK_FULL]" in refused.stderr and names in refused.stderr, refused.stderr
    assert "INTERNAL" not in refused.stderr and "SIBYL_ERROR" not in refused.stderr


def _checks(b: Sandbox) -> dict[str, dict]:
    out = b.kint("doctor", "--json")
    return {c["name"]: c for c in json.loads(out.stdout)["checks"]}


def _restart_worker(b: Sandbox, space16: str) -> None:
    pid = kjson(b, "status")["worker"]["pid"]
    assert b.kint("supervisor", "restart", space16).returncode == 0
    b.wait_for(lambda: b.kint("status", "--json").returncode == 0
               and kjson(b, "status")["worker"]["pid"] != pid, timeout=60,
               what="a restarted worker")


def _in_step_with(b: Sandbox, a: Sandbox, *, applied: list[int]) -> None:
    """The next pull ends at the chain head, rows byte-exact with A's, nothing moved aside,
    and status and doctor say so."""
    pulled = kjson(b, "pull")
    assert pulled["applied"] == applied and pulled["store_root_matches"] is True, pulled
    assert pulled["backups"] == [] and pulled["warnings"] == [], pulled
    assert pulled["head"]["seq"] == 2
    assert _entities(b.sibyl_db) == _entities(a.sibyl_db)
    assert not list(b.kint_home.glob("applying-*.json"))
    assert not list(b.sibyl_db.parent.glob("*.kint-backup-*"))
    status = kjson(b, "status")
    assert status["in_step"] is True and status["unanchored"] == 0, status
    assert status["interrupted_pull"] is None and status["disk_problems"] == [], status
    watermark = json.loads(next(b.kint_home.glob("watermark-*.json")).read_text())
    assert watermark["seq"] == 2
    checks = _checks(b)
    assert checks["pull"]["ok"] and checks["disk space"]["ok"], checks
    assert kjson(b, "verify", "rule number")["decision"] == "proceed"


def test_a_pull_stopped_by_a_full_disk_in_the_store_is_finished_by_the_next(epochs):
    """The disk fills after the first row of epoch 2 is written to Sibyl's store; the next
    pull runs in the same worker (its Sibyl connection is the one that met SQLITE_FULL)."""
    a, b, disk = epochs.a, epochs.b, epochs.disk
    epochs.fill_at("after_set_entity")
    _refused_disk_full(b, epochs.flag, f"Sibyl's store {b.sibyl_db}")
    assert disk.free_bytes() < 4096

    # Nothing lost: every rule is still there, at epoch 1 or (the one written) epoch 2.
    partial = _entities(b.sibyl_db)
    newer = {row[:2]: row for row in _entities(a.sibyl_db)}
    older = {row[:2]: row for row in epochs.before}
    assert {row[:2] for row in partial} == set(older)
    moved = [row for row in partial if row != older[row[:2]]]
    assert len(moved) == 1 and moved[0] == newer[moved[0][:2]], moved

    # While the disk is full, status and doctor say what is wrong, and only that.
    status = kjson(b, "status")
    assert status["head"]["seq"] == 1 and status["in_step"] is False, status
    assert status["unanchored"] == 0, status  # half an epoch, not changes to push
    assert "half-way through epoch 2 (1 of its" in status["interrupted_pull"], status
    assert any(str(b.sibyl_db) in p and "is full" in p for p in status["disk_problems"])
    text = b.kint("status").stdout
    assert "pull:    a pull stopped half-way through epoch 2" in text, text
    assert f"PROBLEM: the disk holding Sibyl's store {b.sibyl_db} is full" in text, text
    checks = _checks(b)
    assert not checks["disk space"]["ok"] and "is full" in checks["disk space"]["detail"]
    assert not checks["pull"]["ok"] and "epoch 2" in checks["pull"]["detail"], checks
    assert checks["state files"]["ok"], checks
    # The half-applied epoch's rows are the pull's, not changes to push.
    assert checks["unanchored changes"]["detail"] == "none", checks

    disk.free()
    _in_step_with(b, a, applied=[2])


@pytest.mark.parametrize("step,restart", [("before_record_epoch", True),
                                          ("between_mirror_and_watermark", False)],
                         ids=["before-record-restarted-worker",
                              "between-mirror-and-watermark-same-worker"])
def test_a_pull_stopped_by_a_full_disk_in_kints_state_is_finished_later(epochs, step,
                                                                        restart):
    """The disk fills once every row of epoch 2 is in the store: before kint records the
    epoch (its cache is the first write to fail), or after the mirror is saved (the
    watermark is). The next pull runs in a restarted worker (all it knows is on disk), or
    in the same one."""
    a, b, disk = epochs.a, epochs.b, epochs.disk
    epochs.fill_at(step)
    _refused_disk_full(b, epochs.flag, str(b.kint_home))
    assert _entities(b.sibyl_db) == _entities(a.sibyl_db)  # every row is in

    status = kjson(b, "status")
    assert status["unanchored"] == 0 and status["state_problems"] == [], status
    assert any(str(b.kint_home) in p and "is full" in p for p in status["disk_problems"])
    checks = _checks(b)
    assert not checks["disk space"]["ok"], checks
    if step == "before_record_epoch":
        assert status["head"]["seq"] == 1 and status["in_step"] is False, status
        assert "half-way through epoch 2" in status["interrupted_pull"], status
        assert not checks["pull"]["ok"], checks
    else:  # the mirror is at epoch 2: in step, though the watermark lags
        assert status["head"]["seq"] == 2 and status["in_step"] is True, status
        assert status["interrupted_pull"] is None and checks["pull"]["ok"], status

    disk.free()
    if restart:
        _restart_worker(b, epochs.space16)
    _in_step_with(b, a, applied=[2] if step == "before_record_epoch" else [])


def test_a_full_disk_stopping_the_provenance_refinement_does_not_fail_the_pull(epochs):
    """B holds epochs 1 and 2 in its cache; A anchors a snapshot (epoch 3); B's discarding
    pull applies the snapshot alone, then refines each row's provenance back to the cached
    epoch that wrote its value, and the disk fills just before that refinement is saved.
    Every epoch is applied and recorded by then: the pull succeeds and says the provenance
    could not be saved (it used to fail the whole pull with DISK_FULL), and once space is
    freed the next pull, at the chain head, does the refinement (the mirror owes it) and
    pull and verify are in step."""
    from kint.render_pull import pull_lines

    a, b, disk = epochs.a, epochs.b, epochs.disk
    assert kjson(b, "pull")["applied"] == [2]
    assert kjson(a, "compact")["epochs"][-1]["seq"] == 3
    epochs.fill_at("before_refine")
    out = b.kint("pull", "--discard-local", "--json")
    assert not epochs.flag.exists(), "the fault step was never reached"
    assert out.returncode == 0, out.stdout + out.stderr
    pulled = json.loads(out.stdout)
    assert pulled["applied"] == [3] and pulled["store_root_matches"] is True, pulled
    unsaved = pulled["provenance_unsaved"]
    assert "the rows' provenance could not be saved" in unsaved["message"], unsaved
    assert "No space left on device" in unsaved["message"], unsaved
    assert unsaved["hint"].startswith("free some space: the next pull saves it"), unsaved
    notice = [line for line in pull_lines(pulled) if line.startswith("pull: NOTICE ")]
    assert notice == [f"pull: NOTICE {unsaved['message']}; {unsaved['hint']}"], notice
    assert _entities(b.sibyl_db) == _entities(a.sibyl_db)
    # The mirror on disk is the one epoch 3 recorded: the snapshot is every row's provenance,
    # and the mirror says it still owes the refinement.
    mirror_file = b.kint_home / f"mirror-{epochs.space16}.json.gz"
    mirror = json.loads(gzip.decompress(mirror_file.read_bytes()))
    assert mirror["head"]["seq"] == 3, mirror["head"]
    assert set(mirror["seqs"]) == {3} and mirror["provenance_owed"] is True, mirror

    # Once space is freed, the next pull (at the head: nothing to apply) does the refinement
    # the full disk stopped: every rule's value was written by epoch 2.
    disk.free()
    again = kjson(b, "pull")
    assert again["applied"] == [] and again["store_root_matches"] is True, again
    assert "provenance_unsaved" not in again, again
    mirror = json.loads(gzip.decompress(mirror_file.read_bytes()))
    assert set(mirror["seqs"]) == {2} and "provenance_owed" not in mirror, mirror
    status = kjson(b, "status")
    assert status["in_step"] is True and status["unanchored"] == 0, status
    assert kjson(b, "verify", "rule number")["decision"] == "proceed"
