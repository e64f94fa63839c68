"""The shared log is bounded: the supervisor alone renames it to `supervisor.log.1` when it
is over KINT_LOG_MAX_BYTES, and every process's next line reopens a fresh file, 0600. Each
record is one line, whatever the values a client sent."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_sandbox, write_store
from kint.logs import DEFAULT_LOG_MAX_BYTES, MIN_LOG_MAX_BYTES, log_max_bytes, rotate_if_large
from kint.logs import setup_file_logging
from kint.paths import log_path

MAX = 2000


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _log_files(home: Path) -> list[str]:
    return sorted(p.name for p in home.iterdir() if p.name.startswith("supervisor.log"))


def _restarts_past(text: str, bound: int) -> int:
    """How many restarts of the two workers a log file took after it was over `bound`
    bytes: its "stop requested" lines after the line that crossed it, two per restart."""
    data = text.encode()
    end_of_crossing = data.find(b"\n", bound)
    past = data[end_of_crossing + 1:] if end_of_crossing >= 0 else b""
    return (past.count(b"stop requested") + 1) // 2


def _flush() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


@pytest.fixture
def file_logging(tmp_path):
    """setup_file_logging in this process on a temporary KINT_HOME; pytest's own handlers
    are put back afterwards."""
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    home = tmp_path / "kint"
    setup_file_logging(home)
    yield home
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


def test_a_log_over_the_bound_moves_to_its_backup_and_the_next_line_opens_a_fresh_0600_file(
        file_logging):
    home, log = file_logging, logging.getLogger("kint.test")
    path, backup = log_path(home), log_path(home).with_name("supervisor.log.1")
    assert _mode(path) == 0o600
    assert rotate_if_large(log_path(home), MAX) is False  # empty: nothing to do
    for i in range(40):
        log.info("old line %d %s", i, "x" * 60)
    _flush()
    assert path.stat().st_size > MAX
    old = path.read_text()

    old_umask = os.umask(0)  # the reopened file is 0600 whatever the umask
    try:
        assert rotate_if_large(log_path(home), MAX) is True
        assert not path.exists() and backup.read_text() == old
        log.info("new line")
        _flush()
    finally:
        os.umask(old_umask)
    assert path.exists() and "new line" in path.read_text() and "old line" not in path.read_text()
    assert "new line" not in backup.read_text()
    assert _mode(path) == 0o600 and _mode(backup) == 0o600
    assert rotate_if_large(log_path(home), MAX) is False  # under the bound: left alone


def test_many_rotations_keep_one_backup_and_a_bounded_total(file_logging):
    home, log = file_logging, logging.getLogger("kint.test")
    batch = 0
    for round_ in range(50):
        before = log_path(home).stat().st_size if log_path(home).exists() else 0
        for i in range(10):
            log.info("round %d line %d %s", round_, i, "y" * 80)
        _flush()
        batch = max(batch, log_path(home).stat().st_size - before)
        rotate_if_large(log_path(home), MAX)
        assert set(_log_files(home)) <= {"supervisor.log", "supervisor.log.1"}
        total = sum((home / name).stat().st_size for name in _log_files(home))
        assert total <= 2 * (MAX + batch)
    assert _log_files(home) == ["supervisor.log.1"]  # the last round was over the bound
    log.info("after")
    _flush()
    assert _log_files(home) == ["supervisor.log", "supervisor.log.1"]
    assert all(_mode(home / name) == 0o600 for name in _log_files(home))
    assert "round 49" in (home / "supervisor.log.1").read_text()


def test_another_process_reopens_the_log_after_the_rotation(file_logging, tmp_path):
    """Workers are other processes: their handler notices the rename by itself."""
    home = file_logging
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import logging, sys\n"
         "from pathlib import Path\n"
         "from kint.logs import setup_file_logging\n"
         "setup_file_logging(Path(sys.argv[1]))\n"
         "log = logging.getLogger('kint.child')\n"
         "log.info('child before %s', 'z' * 3000)\n"
         "print('ready', flush=True)\n"
         "sys.stdin.readline()\n"
         "log.info('child after')\n",
         str(home)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        assert rotate_if_large(log_path(home), MAX) is True
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
    current = log_path(home).read_text()
    assert "child after" in current and "child before" not in current
    assert "child before" in (home / "supervisor.log.1").read_text()
    assert _mode(log_path(home)) == 0o600


def test_a_line_whose_log_folder_is_gone_goes_to_stderr_and_never_raises(file_logging,
                                                                          capsys):
    """KINT_HOME removed under a running process: the reopen fails, and the standard handler
    let that FileNotFoundError out of `log.info` (a supervisor's stop raised half-way and
    then waited forever at exit on its workers). The line goes to stderr, after one line
    saying why; once the folder is back, the next line is in the file again."""
    home, log = file_logging, logging.getLogger("kint.test")
    log.info("before")
    _flush()
    shutil.rmtree(home)
    log.info("first while gone")
    log.info("second while gone")
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"kint: cannot write the log {log_path(home)} (No such file or "
                      f"directory); its lines go here until it can"), err
    assert [line.split(" INFO ")[-1] for line in err[1:]] == ["first while gone",
                                                             "second while gone"]
    home.mkdir(mode=0o700)
    log.info("back")
    _flush()
    assert log_path(home).read_text().endswith(" kint.test INFO back\n")
    assert _mode(log_path(home)) == 0o600 and capsys.readouterr().err == ""


def test_the_bound_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("KINT_LOG_MAX_BYTES", raising=False)
    assert log_max_bytes() == DEFAULT_LOG_MAX_BYTES == 256 * 1024
    monkeypatch.setenv("KINT_LOG_MAX_BYTES", "2000")
    assert log_max_bytes() == 2000
    monkeypatch.setenv("KINT_LOG_MAX_BYTES", "lots")
    assert log_max_bytes() == DEFAULT_LOG_MAX_BYTES
    monkeypatch.setenv("KINT_LOG_MAX_BYTES", "10")
    assert log_max_bytes() == MIN_LOG_MAX_BYTES


def test_the_supervisor_rotates_the_shared_log_and_its_workers_follow(tmp_path):
    # The test supervisor, which checks its logs' size every second (KINT_TEST_HOUSEKEEPING_S,
    # tests/support/kint_test_timings.py: no setting reaches it; 5 s by default).
    sb = make_sandbox(tmp_path / "rotate", KINT_LOG_MAX_BYTES=str(MAX),
                      KINT_TEST_HOUSEKEEPING_S="1")
    home = sb.kint_home
    path, backup = log_path(home), home / "supervisor.log.1"
    dbs = (sb.sibyl_db, sb.profile_db("a"))

    def burst_until_over() -> None:
        # Each restart logs a stop and a start for both workers, 1-2 kB.
        while not path.exists() or path.stat().st_size <= MAX:
            for db in dbs:
                sb.call("status", db)
            sb.call("sup.restart", args={"target": sb.tenant})

    # kint-server's log, as a server that logged a lot would leave it: rotated the same way.
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    server_log = home / "kint.log"
    server_log.write_text("x" * (MAX + 1))
    server_log.chmod(0o600)
    try:
        sb.start_entitled()
        for db in dbs:
            write_store(db, tenant=sb.tenant)
        sb.wait_for(lambda: (home / "kint.log.1").exists() and not server_log.exists(),
                    timeout=20, what="kint.log rotated by the supervisor")
        burst_until_over()
        sb.wait_for(backup.exists, timeout=20, what="the first rotation")
        # These workers started before the rotation; their next lines go to the new file.
        older = [sb.call("status", db)["worker"]["pid"] for db in dbs]
        sb.wait_for(lambda: "log was over" in path.read_text(), timeout=10,
                    what="the supervisor's line in the fresh log")
        sb.call("sup.restart", args={"target": sb.tenant})
        sb.wait_for(lambda: all(f"{pid} kint.worker INFO stop requested" in path.read_text()
                                for pid in older), timeout=20,
                    what="the older workers' lines in the fresh log")

        # The first backup already holds "kint.log was over ...": the second rotation is
        # told by the backup being another file, the one the supervisor's line opened.
        first_backup = backup.stat().st_ino
        burst_until_over()
        sb.wait_for(lambda: backup.stat().st_ino != first_backup, timeout=20,
                    what="the second rotation replacing the backup")
        assert "supervisor.log was over" in backup.read_text()  # the first rotation's line
        assert _log_files(home) == ["supervisor.log", "supervisor.log.1"]
        assert _mode(path) == 0o600 and _mode(backup) == 0o600
        # Bounded: past the bound, each file holds only the restarts the test made before
        # the supervisor's next look (a burst's last one, and the older workers' above), and
        # one more for lines that came after a burst looked: counted in restarts, not bytes
        # (a restart's lines name the stores, as long as the run's folder makes them).
        for log_file in (backup, path):
            text = log_file.read_text()
            assert _restarts_past(text, MAX) <= 3, text
    finally:
        sb.shutdown()


FORGED = "kint.supervisor ERROR forged by a client"


def test_a_value_with_control_characters_stays_on_its_record_line(file_logging):
    log = logging.getLogger("kint.test")
    log.info("worker spawned for %s (%s)", f"/tmp/a\n{FORGED}", "label\r\x1b[2K\u2028x")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.error("op failed in space %s", "s\n1", exc_info=True)
    _flush()
    lines = log_path(file_logging).read_text().splitlines()
    assert lines[0].endswith(f"worker spawned for /tmp/a\\n{FORGED} "
                             f"(label\\r\\x1b[2K\\u2028x)"), lines[0]
    assert lines[1].endswith("op failed in space s\\n1")
    assert lines[2] == "  Traceback (most recent call last):"  # its lines, indented
    assert lines[-1] == "  RuntimeError: boom"


def test_an_exception_message_with_a_newline_starts_no_record_line(file_logging):
    """An exception's text may come from a client (a path in an OSError, a message quoted
    back): its lines stay inside the traceback, indented; only records start at the left."""
    log = logging.getLogger("kint.test")
    try:
        try:
            raise ValueError(f"bad\n2026-01-01 00:00:00,000 1 {FORGED}")
        except ValueError as err:
            raise RuntimeError(f"wrapped\n{FORGED}") from err
    except RuntimeError:
        log.error("op failed", exc_info=True)
    _flush()
    lines = log_path(file_logging).read_text().splitlines()
    assert lines[0].endswith("op failed")
    assert all(line.startswith("  ") for line in lines[1:] if line), lines
    assert any(FORGED in line for line in lines[1:])


def test_a_store_path_sent_with_a_newline_forges_no_line_in_the_supervisor_log(sandbox):
    sandbox.start()
    db = Path(f"/nonexistent/a\n{FORGED}/memory.db")
    sandbox.call("status", db)
    text = log_path(sandbox.kint_home).read_text()
    assert f"\\n{FORGED}" in text
    assert not any(line.startswith(FORGED) for line in text.splitlines())
