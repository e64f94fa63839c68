"""A link, or a file that is not a regular file of this user, where kint keeps one of its
own files in KINT_HOME (a lock, the supervisor's stderr, the shared log) is refused by
name and never followed: every folder there is 0700, so no such file is kint's, and
through a link kint would create, lock, empty or append to a file elsewhere."""

from __future__ import annotations

import json

import pytest

from conftest import make_sandbox, write_store
from kint.chain.config import devchain_record
from kint.chain.nonces import NonceBook
from kint.paths import devchain_dir, space_files
from kint.pid_file_lock import NotOwnFile, open_own_file
from kint.spaces import space_id


def _json_refusal(out) -> dict:
    assert out.returncode != 0, out.stdout
    return json.loads(out.stdout or out.stderr)


@pytest.mark.parametrize("name", ["supervisor.lock", "supervisor.stderr"])
def test_a_link_in_the_run_folder_stops_the_start_by_name_and_is_never_followed(tmp_path, name):
    sb = make_sandbox(tmp_path / "m")
    run = sb.kint_home / "run"
    run.mkdir(mode=0o700, parents=True)
    elsewhere = sb.home / "elsewhere"
    (run / name).symlink_to(elsewhere)
    out = sb.kint("status", "--json")
    refusal = _json_refusal(out)
    assert refusal["error"] == "SUPERVISOR_UNAVAILABLE", refusal
    assert refusal["message"].endswith(f"{run / name} is a symlink"), refusal
    assert refusal["hint"].startswith("remove it"), refusal
    assert not elsewhere.exists()  # neither created, locked nor emptied
    assert "Traceback" not in out.stderr
    (run / name).unlink()
    (run / name).mkdir()  # a folder in its place: named the same way
    refusal = _json_refusal(sb.kint("status", "--json"))
    assert refusal["message"].endswith(f"{run / name} is a folder"), refusal


def test_a_link_at_the_head_lock_refuses_the_pull_by_name(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    write_store(sb.sibyl_db, tenant=sb.tenant)
    sb.start()
    try:
        sb.call("status", sb.sibyl_db)
        space16 = space_id(sb.label(sb.sibyl_db))[:16]
        lock = space_files(sb.kint_home, space16)["head_lock"]
        elsewhere = sb.home / "elsewhere"
        lock.symlink_to(elsewhere)
        refusal = _json_refusal(sb.kint("--db", str(sb.sibyl_db), "pull", "--json"))
        assert refusal["error"] == "CORRUPT_STATE", refusal
        assert refusal["message"] == f"{lock} is a symlink", refusal
        assert refusal["hint"].startswith("remove it"), refusal
        assert not elsewhere.exists()
    finally:
        sb.shutdown()


def test_a_lock_that_is_a_folder_or_a_link_is_refused_and_nothing_is_made_elsewhere(tmp_path):
    folder = tmp_path / "k"
    folder.mkdir(mode=0o700)
    (folder / "a-folder.lock").mkdir()
    with pytest.raises(NotOwnFile, match="a-folder.lock is a folder$"):
        open_own_file(folder / "a-folder.lock")
    nonces = folder / "nonces"
    nonces.mkdir(mode=0o700)
    (nonces / "lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NotOwnFile, match="lock is a symlink$"):
        with NonceBook(folder)._locked():
            pytest.fail("locked through a link")
    assert not (tmp_path / "elsewhere").exists()


def test_a_link_at_the_shared_log_is_never_written_through(tmp_path):
    """The supervisor runs; its lines go to its stderr (run/supervisor.stderr), after one
    saying why the log cannot take them."""
    sb = make_sandbox(tmp_path / "m")
    sb.kint_home.mkdir(mode=0o700, parents=True)
    log = sb.kint_home / "supervisor.log"
    elsewhere = sb.home / "elsewhere"
    log.symlink_to(elsewhere)
    write_store(sb.sibyl_db, tenant=sb.tenant)
    try:
        out = sb.kint("status", "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        stderr = (sb.kint_home / "run" / "supervisor.stderr").read_text()
        assert f"kint: cannot write the log {log} (Too many levels of symbolic links)" in stderr
        assert "worker for space" in stderr  # the lines it would have logged
        assert not elsewhere.exists() and log.is_symlink()
    finally:
        sb.shutdown()


def test_a_link_at_setups_lock_is_named_with_what_to_do(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    sb.kint_home.mkdir(mode=0o700, parents=True)
    lock = sb.kint_home / "setup.lock"
    elsewhere = sb.home / "elsewhere"
    lock.symlink_to(elsewhere)
    out = sb.kint("setup", "claude")
    assert out.returncode != 0
    assert f"{lock} is a symlink [CORRUPT_STATE]" in out.stderr, out.stderr
    assert "hint: remove it" in out.stderr, out.stderr
    assert not elsewhere.exists()


def test_a_link_at_anvils_log_refuses_the_devchain_start_before_anvil_runs(tmp_path):
    sb = make_sandbox(tmp_path / "m")
    folder = devchain_dir(sb.kint_home)
    folder.mkdir(mode=0o700, parents=True)
    sb.kint_home.chmod(0o700)
    elsewhere = sb.home / "elsewhere"
    (folder / "anvil.log").symlink_to(elsewhere)
    out = sb.kint("devchain", "start")
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{folder / 'anvil.log'} is a symlink [CORRUPT_STATE]" in out.stderr, out.stderr
    assert not elsewhere.exists() and not devchain_record(sb.kint_home).exists()  # no anvil ran


def test_a_supervisors_last_words_are_kept_through_the_next_start(tmp_path):
    """A supervisor that died without a line in the log (libzmq's abort, a crash before
    logging) said why on its raw stderr, run/supervisor.stderr, which the next start
    emptied: the command that started its successor erased the evidence (CI's run at
    e9194e0 lost a supervisor's that way). The previous one is kept as
    supervisor.stderr.1, one start, 0600; an empty one is not kept."""
    sb = make_sandbox(tmp_path / "m")
    write_store(sb.sibyl_db, tenant=sb.tenant)
    run = sb.kint_home / "run"
    try:
        assert sb.kint("supervisor", "start").returncode == 0
        # Its worker forkserver warmed up first: one stopped mid-warm-up says so on stderr.
        sb.wait_for(lambda: sb.call("sup.status")["supervisor"]["forkserver"]["ready"],
                    timeout=60, what="the supervisor's worker forkserver started")
        assert sb.kint("supervisor", "stop").returncode == 0
        assert (run / "supervisor.stderr").read_text() == ""
        assert not (run / "supervisor.stderr.1").exists()  # nothing said: nothing kept
        last = "Too many open files (src/ipc_listener.cpp:297)\n"
        (run / "supervisor.stderr").write_text(last)
        (run / "supervisor.stderr").chmod(0o644)  # as an older kint or a loose umask left it
        assert sb.kint("supervisor", "start").returncode == 0
        kept = run / "supervisor.stderr.1"
        assert kept.read_text() == last
        assert kept.stat().st_mode & 0o777 == 0o600
        assert "Too many open files" not in (run / "supervisor.stderr").read_text()
        assert (run / "supervisor.stderr").stat().st_mode & 0o777 == 0o600
    finally:
        sb.shutdown()
