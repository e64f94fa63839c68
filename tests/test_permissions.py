"""Nothing listens beyond a 0700 folder, and every file kint writes is 0600."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KINT, make_sandbox, serving, write_store
from machines_together import side_by_side
from kint.client import Client, SupervisorUnavailable
from kint.commands import doctor
from kint.paths import RELATIVE_HOME_HINT, RELATIVE_PROBLEM, UNSAFE_HOME_HINT
from kint.socket_paths import socket_dir
from other_user import SYSTEM_PYTHON


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _files_under(root: Path):
    for base, dirs, files in os.walk(root):
        for name in dirs:
            yield Path(base) / name
        for name in files:
            yield Path(base) / name


@pytest.fixture(scope="module")
def serving_machine(tmp_path_factory):
    """A machine serving its store's space (`kint supervisor start`, a worker running), for
    the two tests that look at what it made: one supervisor and worker, not one each."""
    with serving(tmp_path_factory.mktemp("serving") / "machine") as sb:
        yield sb


def test_run_folder_and_files_are_private(serving_machine):
    sandbox = serving_machine
    assert mode(sandbox.kint_home) == 0o700
    assert mode(sandbox.kint_home / "run") == 0o700
    for path in _files_under(sandbox.kint_home):
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            assert mode(path) == 0o700, path
        elif stat.S_ISSOCK(st.st_mode):
            assert path.parent == sandbox.kint_home / "run"
            assert mode(path) & 0o077 == 0, path
        else:
            assert mode(path) == 0o600, path
    assert (sandbox.kint_home / "run" / "kint.sock").exists()


# The venv's interpreter may sit where another user cannot read; any system one will do.


@pytest.mark.skipif(os.geteuid() != 0 or SYSTEM_PYTHON is None,
                    reason="needs root (to act as another user) and a system python3")
def test_another_user_cannot_reach_the_sockets(serving_machine):
    sandbox = serving_machine
    sock = sandbox.kint_home / "run" / "kint.sock"
    # Let the other user walk down to run/, so that run/'s own mode is what stops it.
    for parent in [sandbox.kint_home.parent, *sandbox.kint_home.parent.parents]:
        os.chmod(parent, os.stat(parent).st_mode | 0o011)
    os.chmod(sandbox.kint_home, 0o711)
    try:
        probe = ("import socket,sys\n"
                 "s=socket.socket(socket.AF_UNIX)\n"
                 "try:\n s.connect(sys.argv[1]); print('CONNECTED')\n"
                 "except PermissionError: print('DENIED')\n")
        out = subprocess.run([SYSTEM_PYTHON, "-c", probe, str(sock)], user="nobody",
                             capture_output=True, text=True, timeout=30)
        assert out.stdout.strip() == "DENIED", out.stdout + out.stderr
    finally:
        os.chmod(sandbox.kint_home, 0o700)


def test_a_long_kint_home_puts_the_sockets_in_a_short_private_folder(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    sb = make_sandbox(deep)
    assert len(str(sb.kint_home / "run" / "workers.sock")) > 107
    write_store(sb.sibyl_db)
    try:
        sb.start()
        assert sb.call("status", sb.sibyl_db)["rows"]["entity"] == 1
        short = socket_dir(sb.kint_home)
        assert short != sb.kint_home / "run" and len(str(short)) < 100
        assert mode(short) == 0o700 and short.stat().st_uid == os.getuid()
        assert (sb.kint_home / "run" / "socket-dir").read_text().strip() == str(short)
        assert mode(sb.kint_home / "run" / "socket-dir") == 0o600
    finally:
        sb.shutdown()
    assert not (short / "kint.sock").exists()


def _umask(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError(f"no Umask line for pid {pid}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status")
def test_the_supervisor_and_its_workers_run_with_a_private_umask(sandbox):
    """Whatever the umask of the shell that started it (0022 here), what the daemon and its
    workers create is theirs alone, including files a library makes without a mode."""
    write_store(sandbox.sibyl_db)
    old = os.umask(0o022)
    try:
        supervisor = sandbox.start()
    finally:
        os.umask(old)
    worker = sandbox.call("status", sandbox.sibyl_db)["worker"]["pid"]
    # The sockets take their mode from that umask (run_foreground sets it, once).
    for name in ("kint.sock", "workers.sock"):
        assert mode(sandbox.kint_home / "run" / name) & 0o077 == 0, name
    assert _umask(supervisor) == 0o077
    assert _umask(worker) == 0o077


def test_a_kint_home_that_is_a_symlink_is_refused_in_one_line(tmp_path):
    """A symlinked KINT_HOME could be swapped for a folder someone else reads: kint refuses
    it (never follows or tightens it), with what to do, and no traceback."""
    sb = make_sandbox(tmp_path / "m")
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    sb.kint_home.symlink_to(real)
    write_store(sb.sibyl_db)
    for argv in (("status",), ("supervisor", "start"), ("supervisor", "start", "--foreground")):
        out = sb.kint(*argv)
        assert out.returncode == 2, (argv, out.stderr)
        assert "Traceback" not in out.stderr, argv
        assert out.stderr.splitlines() == [
            f"kint: error: KINT_HOME {sb.kint_home} is not a plain folder [BAD_REQUEST]",
            f"hint: {UNSAFE_HOME_HINT}"], (argv, out.stderr)
    # A client that is not the command line (kint-server) gets the same refusal, coded.
    with pytest.raises(SupervisorUnavailable) as refused:
        Client(sb.kint_home).call("status", db=str(sb.sibyl_db))
    assert refused.value.hint == UNSAFE_HOME_HINT
    assert "is not a plain folder" in refused.value.message
    assert list(real.iterdir()) == [], "nothing was written through the link"


def test_a_relative_kint_home_is_refused_in_one_line(tmp_path, monkeypatch):
    """A relative KINT_HOME was made absolute from the current folder: two commands run
    from two folders used two homes (two supervisors, two sets of keys) without a word.
    Every program that refuses a symlinked home refuses it too, creates nothing, and a
    client does not talk to a supervisor serving the folder it names from here."""
    sb = make_sandbox(tmp_path / "m")
    here = tmp_path / "here"
    here.mkdir()
    env = {**sb.env, "KINT_HOME": "state/kint"}
    server = str(Path(KINT).with_name("kint-server"))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=env, cwd=here, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=90)

    # Each refusal is made before anything is created: the runs go two lanes side by side
    # (machines_together.side_by_side), each checked after.
    refused = [(KINT, "status"), (KINT, "supervisor", "start"),
               (KINT, "supervisor", "start", "--foreground"), (KINT, "supervisor", "status"),
               (server,)]
    daemon = (sys.executable, "-m", "kint.supervisor", "--home", "state/kint")
    lanes = side_by_side(lambda: [run(*argv) for argv in refused[0::2]],
                         lambda: [run(*argv) for argv in (*refused[1::2], daemon)])
    outs = dict(zip([*refused[0::2], *refused[1::2], daemon], [*lanes[0], *lanes[1]]))
    for argv in refused:
        out = outs[argv]
        assert out.returncode == 2, (argv, out.stderr)
        assert out.stderr.splitlines() == [
            f"{Path(argv[0]).name}: error: KINT_HOME state/kint {RELATIVE_PROBLEM} [BAD_REQUEST]",
            f"hint: {RELATIVE_HOME_HINT}"], (argv, out.stderr)
    # The daemon's own entry runs in /, where the path would name /state/kint.
    out = outs[daemon]
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [f"kint: error: state/kint {RELATIVE_PROBLEM} [BAD_REQUEST]",
                                       f"hint: {RELATIVE_HOME_HINT}"]
    assert run(KINT, "status", "--help").returncode == 0  # help keeps no files
    assert not (here / "state").exists() and not Path("/state").exists()

    # A supervisor serving here/state/kint (started with the absolute path) is not reached
    # through the relative one, by the command line or by a client of its own.
    absolute = make_sandbox(here / "state")
    assert absolute.kint_home == here / "state" / "kint"
    try:
        absolute.start()
        out = run(KINT, "supervisor", "status")
        assert out.returncode == 2 and out.stdout == "", out
        monkeypatch.chdir(here)
        with pytest.raises(SupervisorUnavailable) as refused:
            Client(Path("state/kint")).call("sup.status")
        assert refused.value.hint == RELATIVE_HOME_HINT
        assert RELATIVE_PROBLEM in refused.value.message
    finally:
        absolute.shutdown()


def test_a_kint_home_given_with_an_unexpanded_tilde_is_under_home(sandbox):
    """`KINT_HOME=~/kh` where no shell expands it (a harness's MCP config, a quoted value)
    is the folder a shell would have made of it: HOME's `kh`, not a `~` folder here."""
    out = sandbox.kint("supervisor", "status", env={"KINT_HOME": "~/kh"})
    assert out.returncode == 3, out.stderr
    assert out.stderr.splitlines()[0] == (f"kint: error: no supervisor is running for "
                                          f"{sandbox.home / 'kh'} [SUPERVISOR_UNAVAILABLE]")


def permissions_check(sandbox) -> dict:
    out = sandbox.kint("doctor", "--json")
    return {c["name"]: c for c in json.loads(out.stdout)["checks"]}["permissions"]


def test_the_supervisor_tightens_loose_files_kint_left_in_its_home(sandbox, tmp_path):
    """Files an older kint or a loose umask left open to others were reused as they were;
    a starting supervisor takes their group and other bits off, one log line each, without
    following a link, entering a Sibyl store's folder, touching another user's file, or
    hiding that local.secret was open to others. Doctor, by the same rule, names beforehand
    exactly what that start mends, and after it only the two files left alone."""
    home = sandbox.kint_home
    run = home / "run"
    run.mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    loose = {run / "supervisor.stderr": 0o644, run / "supervisor.lock": 0o666,
             home / "supervisor.log": 0o644, home / "enrol-00112233aabbccdd.json": 0o640,
             home / "epochs": 0o755, home / "epochs" / "00112233aabbccdd": 0o777,
             home / "epochs" / "00112233aabbccdd" / "7.json": 0o604}
    for path, bits in loose.items():
        if path.name in ("epochs", "00112233aabbccdd"):
            path.mkdir()
        elif path.name == "supervisor.stderr":
            # Empty: one that said anything is kept aside as supervisor.stderr.1 (made
            # 0600) by the start, before the supervisor looks (test_foreign_files).
            path.write_text("")
        else:
            path.write_text("{}")
        path.chmod(bits)
    sealed = home / "sealed"  # 0500: open to no one else, so not loose (doctor said it was)
    sealed.mkdir(mode=0o500)
    outside = tmp_path / "outside.txt"  # a link's target is not kint's: never changed
    outside.write_text("x")
    outside.chmod(0o644)
    (home / "link.json").symlink_to(outside)
    store = home / "sibyl"  # a store's folder under KINT_HOME (it never should be)
    store.mkdir(mode=0o755)
    (store / "notes.txt").write_text("x")
    (store / "notes.txt").chmod(0o644)
    sandbox.env["SIBYL_MEMORY_DB"] = str(store / "memory.db")
    secret = home / "local.secret"  # refused by name when loose (LocalSecretUnsafe): kept so
    secret.write_text("s")
    secret.chmod(0o644)
    recovery = home / "RECOVERY-00112233aabbccdd.txt"  # doctor fails it when loose: kept so
    recovery.write_text("code")
    recovery.chmod(0o644)
    others = home / "theirs.json"
    others.write_text("{}")
    others.chmod(0o644)
    if os.geteuid() == 0:
        os.chown(others, 65534, 65534)
    else:
        loose[others] = 0o644  # this user's own: kint's to mend like the rest
    kept = {f"{secret} 0o644", f"{recovery} 0o644"}

    # Doctor names what the start will mend (the first SHOWN, then how many more) and,
    # apart, the two files it leaves as they are, with the hint for each.
    before = permissions_check(sandbox)
    assert not before["ok"]
    mended, _, left = before["detail"].partition("; left as they are on purpose: ")
    named, _, more = mended.removeprefix("open to others: ").partition(" and ")
    named = named.split(", ")
    assert len(named) == doctor.SHOWN and more == f"{len(loose) - doctor.SHOWN} more", before
    assert set(named) <= {f"{path} {oct(bits)}" for path, bits in loose.items()}, named
    assert set(left.split(", ")) == kept, left
    assert before["hint"] == "; ".join([doctor.MENDED_HINT, doctor.LOCAL_SECRET_HINT,
                                        doctor.RECOVERY_HINT])

    sandbox.start()

    for path, bits in loose.items():
        assert mode(path) == bits & 0o700, (path, oct(mode(path)))
    assert mode(outside) == 0o644 and mode(store) == 0o755 and mode(store / "notes.txt") == 0o644
    log = (home / "supervisor.log").read_text()
    for path, bits in loose.items():
        assert log.count(f"tightened {path} from mode {bits:04o} to {bits & 0o700:04o}") == 1, path
    assert "outside.txt" not in log and "notes.txt" not in log and str(store) not in log
    assert mode(secret) == 0o644 and "local.secret" not in log
    assert mode(recovery) == 0o644 and "RECOVERY-" not in log
    assert mode(sealed) == 0o500 and str(sealed) not in log

    # After the start, doctor finds nothing more to mend: only the two files left alone.
    after = permissions_check(sandbox)
    assert not after["ok"] and after["detail"].startswith("left as they are on purpose: ")
    assert set(after["detail"].removeprefix("left as they are on purpose: ").split(", ")) == kept
    assert after["hint"] == f"{doctor.LOCAL_SECRET_HINT}; {doctor.RECOVERY_HINT}"
    secret.chmod(0o600)
    recovery.chmod(0o600)
    assert permissions_check(sandbox) == {
        "name": "permissions", "ok": True, "hint": "",
        "detail": f"nothing under {home} open to others"}
    if os.geteuid() == 0:
        assert mode(others) == 0o644 and "theirs.json" not in log


def test_tightening_stays_out_of_the_users_home_and_stops_at_its_bound(tmp_path, monkeypatch,
                                                                      caplog):
    """A KINT_HOME set to the home folder itself would make every file there private (a
    script losing its group's read, a public_html closed): nothing is changed then. And the
    walk ends after MAX_ENTRIES entries, so a start is never held by a huge tree. Doctor
    walks the same way: it says what it did not look at, and names what the start mends."""
    from kint import home_modes
    from kint.supervisor import tighten

    user_home = tmp_path / "me"
    user_home.mkdir(mode=0o700)
    page = user_home / "index.html"
    page.write_text("x")
    page.chmod(0o644)
    monkeypatch.setenv("HOME", str(user_home))
    caplog.set_level("WARNING", logger="kint.supervisor")
    assert tighten.tighten_home(user_home) == 0 and mode(page) == 0o644
    assert tighten.tighten_home(tmp_path) == 0 and mode(page) == 0o644
    assert "it holds your home folder" in caplog.text
    assert doctor._permissions(user_home) == {
        "name": "permissions", "ok": True, "warn": True,
        "detail": f"nothing under {user_home} was looked at: {home_modes.HOLDS_USER_HOME}",
        "hint": "set KINT_HOME to a folder of kint's own"}

    kint_home = tmp_path / "kint"
    kint_home.mkdir(mode=0o700)
    for n in range(5):
        (kint_home / f"f{n}").write_text("x")
        (kint_home / f"f{n}").chmod(0o644)
    monkeypatch.setattr(home_modes, "MAX_ENTRIES", 3)
    found = doctor._permissions(kint_home)
    assert not found["ok"] and found["detail"].endswith(
        f"; only the first 3 entries under {kint_home} were looked at"), found
    named = found["detail"].removeprefix("open to others: ").split(";")[0].split(", ")
    assert tighten.tighten_home(kint_home) == 3
    assert sorted(mode(p) for p in kint_home.iterdir()) == [0o600] * 3 + [0o644] * 2
    assert {f"{p} 0o644" for p in kint_home.iterdir() if mode(p) == 0o600} == set(named)
    assert f"stopped tightening the files under {kint_home} after 3 entries" in caplog.text

    # One line a path for the first LOGGED_PATHS, then one line for the rest.
    monkeypatch.setattr(home_modes, "MAX_ENTRIES", 100)
    monkeypatch.setattr(tighten, "LOGGED_PATHS", 1)
    caplog.clear()
    assert tighten.tighten_home(kint_home) == 2
    said = [r.getMessage() for r in caplog.records]
    assert len([m for m in said if m.startswith("tightened ")]) == 2, said
    assert f"tightened 1 more of kint's files and folders under {kint_home} the same way" in said
    assert doctor._permissions(kint_home)["ok"]


def test_tightening_changes_nothing_when_kint_home_is_a_stores_folder(tmp_path, monkeypatch,
                                                                     caplog):
    """A store kept in KINT_HOME itself (`--db $KINT_HOME/memory.db`, or KINT_HOME set to
    ~/.sibyl-memory): its folder is the walk's top, which is never an entry the walk can
    skip, so the store and its journal were made private like kint's own files. The
    README promises never to touch a store's folder: nothing there is changed, whether the
    store is bound or Sibyl's default, and doctor says it did not look there."""
    from kint import home_modes
    from kint.supervisor import tighten

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    store = home / "memory.db"
    for path in (store, home / "memory.db-wal"):
        path.write_bytes(b"x")
        path.chmod(0o644)
    caplog.set_level("WARNING", logger="kint.supervisor")
    assert tighten.tighten_home(home, [store]) == 0
    assert mode(store) == 0o644 and mode(home / "memory.db-wal") == 0o644
    assert "it is a Sibyl store's folder" in caplog.text
    assert doctor._permissions(home)["detail"].startswith("open to others: ")  # not bound
    monkeypatch.setenv("SIBYL_MEMORY_DB", str(store))
    assert tighten.tighten_home(home) == 0 and mode(store) == 0o644
    found = doctor._permissions(home)
    assert found["ok"] and found["warn"], found
    assert found["detail"] == f"nothing under {home} was looked at: {home_modes.IS_STORE_FOLDER}"


def test_doctor_judges_kint_home_itself_by_the_one_rule(tmp_path):
    """KINT_HOME itself is open to others when it has a group or other bit, as every folder
    under it: 0750 is named, 0500 (open to no one else) is not called open to others."""
    home = tmp_path / "kint"
    home.mkdir()
    try:
        home.chmod(0o750)
        found = doctor._permissions(home)
        assert not found["ok"] and found["detail"] == f"open to others: {home} 0o750", found
        home.chmod(0o500)
        assert doctor._permissions(home) == {
            "name": "permissions", "ok": True, "hint": "",
            "detail": f"nothing under {home} open to others"}
    finally:
        home.chmod(0o700)


def test_kint_server_makes_a_missing_store_folder_private(tmp_path):
    """10-configuration.md, "The store": kint creates the store's folder with mode 0700 when
    it is missing. Here kint-server, on the first write of an agent through Sibyl's tools,
    with SIBYL_MEMORY_DB in a folder not made yet."""
    from mcp_session import AgentProcess

    sb = make_sandbox(tmp_path / "machine")
    sb.start_entitled()
    try:
        store = tmp_path / "elsewhere" / "memory.db"
        agent = AgentProcess({**sb.env, "SIBYL_MEMORY_DB": str(store),
                              "KINT_TENANT": "store-folder", "KINT_NO_WATCHER": "1"}).start()
        try:
            written = agent.call("memory_remember", category="c", name="n", body={"a": 1})
            assert written["ok"] is True, written
        finally:
            agent.close()
        assert store.is_file() and mode(store.parent) == 0o700
    finally:
        sb.shutdown()
