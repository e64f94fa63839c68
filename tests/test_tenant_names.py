"""Tenant names a shared box meets, through the real supervisor and workers: one in
Japanese (wide characters, two columns each on a terminal), one with a terminal escape,
one with a bidirectional override (U+202E, which shows the rest of a line reversed), one
with path characters, one plain.

The table of `kint supervisor status` keeps its columns in line whatever the names (a
wide name used to take twice its width and push every column after it out of line); the
log never carries a name's escape or override raw; `--json` gives each name exactly; and
no name reaches a file name under KINT_HOME (files are named by space id).
"""

from __future__ import annotations

import json
import re
import shutil
import unicodedata

import pytest

from conftest import make_sandbox, write_store

TENANTS = ["テナント名前が長い長い長い長い", "esc\x1b[31mred", "\u202eevil", "../../etc/passwd",
           "plain"]


def display_width(text: str) -> int:
    """Terminal columns, counted here on their own: two for a wide character."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    sb = make_sandbox(tmp_path_factory.mktemp("tenant-names"))
    dbs = []
    for n, _ in enumerate(TENANTS):
        db = sb.profile_db(f"p{n}")
        db.parent.mkdir(parents=True)
        dbs.append(shutil.copyfile(dbs[0], db) and db if dbs else write_store(db))
    sb.start()
    for tenant, db in zip(TENANTS, dbs):
        with sb.client() as client:
            client.call("status", tenant=tenant, db=str(db), timeout_s=20)
    yield sb, dbs
    sb.shutdown()


def test_status_keeps_its_columns_in_line_and_json_gives_each_name_exactly(box):
    sb, dbs = box
    out = sb.kint("supervisor", "status")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = lines[1]
    pid_column = header.index("PID")
    status = json.loads(sb.kint("supervisor", "status", "--json").stdout)
    rows = status["spaces"]
    assert sorted(r["tenant"] for r in rows) == sorted(TENANTS)
    for row in rows:
        line = next(x for x in lines[2:] if x.startswith(row["space"]))
        # The PID starts in the PID column, counted in terminal columns.
        at = line.index(f"  {row['pid']}  ", line.index("memory.db")) + 2
        assert display_width(line[:at]) == pid_column, (row["tenant"], line, header)
        assert "\x1b" not in line and "\u202e" not in line, line
    wide = next(x for x in lines if x.startswith(next(r["space"] for r in rows
                                                      if r["tenant"] == TENANTS[0])))
    assert "テナント名..." in wide, wide  # cut to its 14 columns, not 14 characters


def test_no_name_reaches_a_file_name_and_the_log_escapes_each(box):
    sb, _ = box
    for path in sb.kint_home.rglob("*"):
        assert re.fullmatch(r"[A-Za-z0-9._-]+", path.name), path
    log = (sb.kint_home / "supervisor.log").read_text()
    assert "\x1b" not in log and "\u202e" not in log, log[-2000:]
    assert "esc\\x1b[31mred" in log and "\\u202eevil" in log, log[-2000:]


def test_kint_status_shows_a_tenant_with_an_escape_or_an_override_escaped(box):
    sb, dbs = box
    for tenant, db in zip(TENANTS[1:3], dbs[1:3]):
        out = sb.kint("--db", str(db), "status", env={"KINT_TENANT": tenant})
        assert out.returncode in (0, 2), out.stderr  # not connected: said, not a traceback
        assert "\x1b" not in out.stdout + out.stderr, repr(out.stdout)
        assert "\u202e" not in out.stdout + out.stderr, repr(out.stdout)
        escaped = tenant.encode("unicode_escape").decode("ascii")
        assert f"tenant {escaped}" in out.stdout, out.stdout
        shown = sb.kint("--db", str(db), "config", "show", env={"KINT_TENANT": tenant})
        assert shown.returncode == 0, shown.stderr
        assert f"space: {escaped}@hermes:p" in shown.stdout, shown.stdout


def test_a_last_exit_quoting_a_name_is_escaped_under_the_table():
    """A worker that could not start sends its reason (`fatal`), which may quote the
    store's path and so a tenant's name: the line under the table escapes it as the
    table's cells are, never letting an escape or an override reach the terminal."""
    from kint import render

    row = {"space": "0123456789abcdef", "tenant": "plain", "store": "/s/memory.db",
           "pid": None, "state": "quarantined", "restarts": 4,
           "last_exit": "the worker could not start: OSError: /s/esc\x1b[2J\u202eevil"}
    status = {"supervisor": {"pid": 1, "uptime_s": 1.0, "kint_home": "/k"},
              "spaces": [row]}
    text = render.supervisor_status_text(status)
    assert "last exit of 0123456789abcdef:" in text, text
    assert "\x1b" not in text and "\u202e" not in text, text


def test_a_name_with_a_superscript_digit_sorts_without_failing_status():
    """Status orders spaces by label with numbers compared as numbers: a label with a
    digit `int` does not read (a superscript, a circled one), a tenant name like any
    other, sorts as text beside the rest, where it failed every status call of the box."""
    from kint.supervisor.status import label_order

    labels = ["p10", "x1²", "²", "p2", "①", "p١"]
    ordered = sorted(labels, key=label_order)
    assert ordered.index("p١") < ordered.index("p2") < ordered.index("p10"), ordered
    assert set(ordered) == set(labels)
