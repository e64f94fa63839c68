"""A worker that exits EXIT_NO_SYSTEM_FILES (6) as it starts, met from the CLI: the
system's table of open files was full (ENFILE), which no `ulimit -n` mends.

`kint status` on the space is refused BUSY with the system's hint (end programs holding many
files, or raise fs.file-max), never `ulimit -n`'s, and the message names the system's table;
the space is not quarantined and nothing restarts in a loop; `kint supervisor status` keeps
the exit's reason as the space's last exit. test_worker_lock.py hands a stand-in supervisor a
real process exiting 6; test_worker_start_files_chain.py has run_worker exit 6. Here the
whole path runs: the CLI, the real supervisor, its forkserver, the worker's own exit.

The one stand-in is the error itself (tests/support/kint_test_faults.py's
KINT_TEST_FAIL_START, `<space16>:enfile`): the worker's construction raises ENFILE, the
system's table of open files being the whole box's, which a test cannot fill here.
"""

from __future__ import annotations

import json

import pytest

from conftest import make_sandbox, write_store
from kint.commands import exit_codes
from kint.open_files import SYSTEM_FILES_HINT, WORKER_ROOM_HINT
from kint.spaces import space_id

REASON = "could not start: it ran out of open files (the system's table of them is full)"


@pytest.fixture
def box(tmp_path):
    doomed = tmp_path / "fail-start"
    sb = make_sandbox(tmp_path / "machine", KINT_TEST_FAIL_START=str(doomed))
    sb.start_entitled()
    write_store(sb.sibyl_db, tenant=sb.tenant)
    doomed.write_text(space_id(sb.label(sb.sibyl_db))[:16] + ":enfile")
    yield sb
    sb.shutdown()


def test_a_worker_start_that_finds_the_systems_table_full_is_busy_from_the_cli(box):
    sb = box
    out = sb.kint("status", "--json")
    assert out.returncode == exit_codes.exit_code_for("status", "BUSY"), (out.returncode,
                                                                          out.stdout, out.stderr)
    refusal = json.loads(out.stdout or out.stderr)
    assert refusal["error"] == "BUSY", refusal
    assert REASON in refusal["message"], refusal
    assert refusal["hint"] == SYSTEM_FILES_HINT != WORKER_ROOM_HINT, refusal
    assert "ulimit" not in refusal["hint"], refusal

    plain = sb.kint("status")
    said = plain.stdout + plain.stderr
    assert plain.returncode == out.returncode and REASON in said, said
    assert "Traceback" not in said

    row = sb.row(sb.sibyl_db)
    assert row["state"] != "quarantined" and row["restarts"] == 0, row
    assert REASON in row["last_exit"], row
    text = sb.kint("supervisor", "status")
    assert REASON in text.stdout, text.stdout
