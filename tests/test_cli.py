"""The `kint` command as a person uses it: text output, JSON, errors with a hint and no
traceback, exit codes."""

from __future__ import annotations

import json

from conftest import TENANT, write_store


def test_status_text_for_a_store_not_created_yet_and_one_with_rows(sandbox):
    out = sandbox.kint("status")
    assert out.returncode == 0, out.stderr
    assert "(not created yet)" in out.stdout
    assert f"tenant:  {TENANT}" in out.stdout
    write_store(sandbox.sibyl_db)
    out = sandbox.kint("status")
    assert "rows:    entity 1, state 0, reference 0, journal 1" in out.stdout
    assert "files:   none yet" in out.stdout


def test_tenant_flag_names_another_space(sandbox):
    write_store(sandbox.sibyl_db, tenant="team-a")
    a = json.loads(sandbox.kint("--tenant", "team-a", "status", "--json").stdout)
    assert a["tenant"] == "team-a" and a["label"] == "team-a" and a["rows"]["entity"] == 1
    # Another tenant's rows in the same store are another space, with a worker of its own.
    b = sandbox.kint("--tenant", "team-b", "status", "--json")
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["rows"]["entity"] == 0


def test_errors_are_two_lines_without_a_traceback(sandbox):
    sandbox.start()
    out = sandbox.kint("supervisor", "restart", "no-such-space")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines[0] == "kint: error: no space matches 'no-such-space' [BAD_REQUEST]"
    assert lines[1].startswith("hint: ")
    debug = sandbox.kint("--debug", "supervisor", "restart", "no-such-space")
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_help_names_every_command(sandbox):
    out = sandbox.kint("--help")
    for word in ("status", "supervisor", "demo", "--tenant", "--db"):
        assert word in out.stdout
    sup = sandbox.kint("supervisor", "--help").stdout
    for word in ("start", "stop", "status", "restart", "discover"):
        assert word in sup
    assert "Exit code 0" in sandbox.kint("supervisor", "status", "--help").stdout
    assert sandbox.kint("--version").stdout.startswith("kint, version ")
