"""The `kint` command as a person uses it: text output, JSON, errors with a hint and no
traceback, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import KINT, TENANT, serving, write_store

from kint.spaces import space_id


def test_status_text_for_a_store_not_created_yet_and_one_with_rows(sandbox):
    out = sandbox.kint("status")
    assert out.returncode == 0, out.stderr
    assert "(not created yet)" in out.stdout
    # kint v0.3.0's first line (02-quickstart.md, "Check it"), then this kint's own.
    assert out.stdout.splitlines()[0] == (f"tenant {TENANT}  space {space_id(TENANT)[:16]}  "
                                          f"store {sandbox.sibyl_db}")
    write_store(sandbox.sibyl_db)
    out = sandbox.kint("status")
    assert "rows:    entity 1, state 0, reference 0, journal 1" in out.stdout
    assert "files:   none yet" in out.stdout


def test_doctor_names_the_tenant_and_warns_of_credentials_that_give_none(sandbox):
    """The tenant comes from --tenant, KINT_TENANT, Sibyl's credentials.json, else Sibyl's
    default (v0.3.0's order). Credentials the user has that give none (not JSON, or a file
    SIBYL_CREDENTIALS names that is not there) left every command on Sibyl's default
    tenant, another space, without a word: doctor's `tenant` row says so."""
    def row(*argv: str, **env: str) -> str:
        out = sandbox.kint(*argv, "doctor", env=env)
        return "\n".join(line for line in out.stdout.splitlines()
                         if line.startswith(("[ok  ] tenant:", "[WARN] tenant:"))
                         or "SIBYL_CREDENTIALS or Sibyl's credentials" in line)

    assert row() == f"[ok  ] tenant: {TENANT} (from Sibyl's default)"
    credentials = sandbox.home / ".sibyl-memory" / "credentials.json"
    credentials.parent.mkdir(parents=True, exist_ok=True)
    credentials.write_text('{"account_id": "acct-7"}')
    assert row() == "[ok  ] tenant: acct-7 (from credentials.json)"
    assert row("--tenant", "flag-t") == "[ok  ] tenant: flag-t (from --tenant)"
    assert row(KINT_TENANT="env-t") == "[ok  ] tenant: env-t (from KINT_TENANT)"
    credentials.write_text('{"account_id": ')
    assert row().splitlines()[0] == (
        f"[WARN] tenant: {TENANT} (from Sibyl's default): {credentials} is not JSON: Sibyl "
        f"reads it as no credentials")
    missing = sandbox.root / "elsewhere" / "credentials.json"
    assert row(SIBYL_CREDENTIALS=str(missing)).splitlines()[0] == (
        f"[WARN] tenant: {TENANT} (from Sibyl's default): SIBYL_CREDENTIALS names {missing}, "
        f"which does not exist")
    assert "hint: correct SIBYL_CREDENTIALS" in row()


def test_tenant_flag_names_another_space(sandbox):
    write_store(sandbox.sibyl_db, tenant="team-a")
    a = json.loads(sandbox.kint("--tenant", "team-a", "status", "--json").stdout)
    assert a["tenant"] == "team-a" and a["label"] == "team-a" and a["rows"]["entity"] == 1
    # Another tenant's rows in the same store are another space, with a worker of its own.
    b = sandbox.kint("--tenant", "team-b", "status", "--json")
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["rows"]["entity"] == 0


@pytest.fixture(scope="module")
def serving_machine(tmp_path_factory):
    """One machine for the tests that only read a running supervisor: a store, the
    supervisor started with `kint supervisor start`, and the store's space asked once (its
    worker running, its row in the status table). None of them changes it: each of the
    three started a supervisor and a worker of its own (~1 s of CPU)."""
    with serving(tmp_path_factory.mktemp("serving") / "machine") as sb:
        yield sb


def test_doctor_on_a_machine_never_connected_warns_that_it_has_no_session_key(serving_machine):
    """No session key on a machine never connected (only read here): the warning a
    connected machine gets (it stops writes only; `kint join` makes one), not a failure of
    its own. The enrolment row is what fails there, and says what to run."""
    out = serving_machine.kint("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    key = checks["session key"]
    assert (key["ok"], key.get("warn"), key["detail"]) == (
        True, True, "no session key on this machine"), key
    assert [name for name, c in checks.items() if not c["ok"]] == ["enrolment"], checks
    assert out.returncode == 1, out.stdout


def test_errors_are_two_lines_without_a_traceback(serving_machine):
    sandbox = serving_machine
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


# What `kint supervisor status` may not load: the chain and key libraries and the engine.
ENGINE_MODULES = ("web3", "eth_account", "eth_keys", "eth_hash", "Crypto",
                  "sibyl_memory_client", "kint.tenant_worker", "kint.chain", "kint.custody")
# Every module of kint's that `kint supervisor status` may load: the CLI, the client, the
# envelopes, the paths and the table's renderer. Resolving a space (kint.spaces), the
# settings' schema and config file (kint.settings.loader: logging, tomllib), starting a
# supervisor (kint.supervisor.autostart: kint.logs, subprocess) and the ops' table
# (kint.protocol.ops) are not on its way. A module added here is time every fresh status
# pays: issue 15 asks for the whole command under 100 ms, and click and ZeroMQ take most.
STATUS_KINT_MODULES = frozenset({
    "kint", "kint.cli", "kint.client", "kint.client_closed_door", "kint.client_errors",
    "kint.commands", "kint.commands.common",
    "kint.commands.exit_codes", "kint.commands.supervisor", "kint.commands.supervisor_status",
    "kint.outcomes", "kint.paths", "kint.protocol", "kint.protocol.client_codec",
    "kint.protocol.envelope", "kint.protocol.errors", "kint.protocol.limits", "kint.render",
    "kint.settings", "kint.settings.environ", "kint.supervisor", "kint.supervisor.pidlock",
    # The supervisor's pid file is read through the lock module it shares with `kint setup`
    # (os, fcntl and time only).
    "kint.pid_file_lock",
    # How a refusal words its bound ("within 0.5s"): one function, importing nothing.
    "kint.seconds_text",
    # Why a supervisor short of open files takes no new clients: its note, read by every
    # client (json, kint.paths and kint.socket_paths only).
    "kint.front_closed",
    # The client's own parts, split out of kint.client (the same code, in modules of a few
    # hundred lines): the call's deadline, the request's frame, the looks at the
    # supervisor while it waits, the end of a context of its own (signal and threading),
    # the socket and the supervisor it reaches.
    "kint.client_bound", "kint.client_request", "kint.client_liveness",
    "kint.client_context", "kint.client_connection",
    # Where the sockets are, split out of kint.paths (the same code).
    "kint.socket_paths",
})
_LOADED_AFTER_STATUS = """
import json, sys
from kint.cli import main
try:
    main(["supervisor", "status"], prog_name="kint")
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_supervisor_status_loads_only_the_client(serving_machine):
    """The command a person runs to look at a busy or stuck box imports the CLI, the client
    and the protocol, and no command module it does not run: web3 and eth_account alone
    took ~2 s to import on a loaded two-core box, the settings, kint.spaces and the
    supervisor's start-up code ~35 ms of ~150 (issue 15: status under 100 ms)."""
    sandbox = serving_machine
    out = subprocess.run([sys.executable, "-c", _LOADED_AFTER_STATUS], env=sandbox.env,
                         text=True, capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.splitlines()[-1])
    assert loaded["code"] == 0, out.stdout
    assert sandbox.row(sandbox.sibyl_db)["space"] in out.stdout  # the space's row printed
    heavy = [m for m in loaded["modules"]
             if any(m == name or m.startswith(name + ".") for name in ENGINE_MODULES)]
    assert heavy == []
    ours = {m for m in loaded["modules"] if m == "kint" or m.startswith("kint.")}
    assert sorted(ours - STATUS_KINT_MODULES) == []
    assert "kint.supervisor.pidlock" in ours  # the list names what really loads


_LOADED_BY_HELP = """
import json, sys
from kint.cli import main
try:
    main([*sys.argv[1:], "--help"], prog_name="kint")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""
# What only reading or writing a key or the chain needs (~0.6 s of imports together).
_CHAIN_LIBRARIES = ("web3", "eth_account", "eth_utils", "eth_keyfile", "requests")


@pytest.mark.parametrize("group", ["", "supervisor", "devchain", "session-key", "authorize",
                                   "config"])
def test_help_loads_no_chain_library(sandbox, group):
    """`kint --help` reads each command's short help from its module's source (importing
    the modules to ask them loaded web3, eth_account and requests: ~0.6 s of ~0.75 s), and
    a group's help loads its own module, which leaves the chain to the actions."""
    from kint.cli import COMMANDS

    out = subprocess.run([sys.executable, "-c", _LOADED_BY_HELP, *group.split()],
                         env=sandbox.env, text=True, capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    *printed, modules = out.stdout.splitlines()
    loaded = set(json.loads(modules))
    assert "Commands:" in printed
    assert sorted(m for m in loaded if m.split(".")[0] in _CHAIN_LIBRARIES) == []
    if not group:
        assert sorted({module for module, _ in COMMANDS.values()} & loaded) == []


def test_help_lists_what_click_derives_from_each_command():
    """The listing read from source is, at any width, what click's own Group prints once
    it has imported every command: the docstrings stay the one place the text lives."""
    import click

    from kint.cli import COMMANDS, main
    from kint.commands.listing import listed_commands

    assert sorted(listed_commands(COMMANDS)) == sorted(COMMANDS)  # none fell back to import
    for width in (50, 80, 120):
        ctx = click.Context(main, info_name="kint", terminal_width=width, max_content_width=width)
        ours, clicks = ctx.make_formatter(), ctx.make_formatter()
        main.format_commands(ctx, ours)
        click.Group.format_commands(main, ctx, clicks)
        assert ours.getvalue() == clicks.getvalue() != ""


def test_a_command_whose_decorator_sets_its_help_is_imported_for_the_listing(tmp_path,
                                                                               monkeypatch):
    """A literal `short_help=` on the decorator outranks the docstring, as in click; a
    computed one, or a module that cannot be found, leaves the command to be imported."""
    from kint.commands.listing import listed_commands

    (tmp_path / "kint_listing_probe.py").write_text(
        "import click\n\n"
        "@click.command('a', short_help='Short.')\n"
        "def a_cmd():\n    \"\"\"The docstring.\"\"\"\n\n"
        "@click.command('d', short_help='Sh' + 'ort.')\n"
        "def d_cmd():\n    \"\"\"The docstring of d.\"\"\"\n\n"
        "@click.command('b')\n"
        "def b_cmd():\n    \"\"\"The docstring of b.\"\"\"\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    listed = listed_commands({"a": ("kint_listing_probe", "a_cmd"),
                              "b": ("kint_listing_probe", "b_cmd"),
                              "c": ("kint_no_such_module", "c_cmd"),
                              "d": ("kint_listing_probe", "d_cmd")})
    assert sorted(listed) == ["a", "b"]
    assert listed["a"].get_short_help_str() == "Short."
    assert listed["b"].get_short_help_str() == "The docstring of b."


# What the console script's plain `kint supervisor status` loads, printed at exit.
_LOADED_BY_THE_SCRIPT = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules))))
sys.argv = ["kint", *sys.argv[1:]]
from kint.entry import main
main()
"""


def test_the_plain_status_runs_without_click_and_prints_what_the_command_line_prints(
        sandbox, serving_machine):
    """`kint supervisor status` and `... --json`, exactly, run from the console script
    without click, orjson or dataclasses (~25 ms of a fresh status: issue 15); any other
    form goes through click to the same function, so the two print and exit alike. First
    on a machine with no supervisor, then on one serving a space."""
    def script(sb, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", _LOADED_BY_THE_SCRIPT, *args],
                              env=sb.env, text=True, capture_output=True, timeout=90)

    plain, through_click = (script(sandbox, "supervisor", "status"),
                            sandbox.kint("--debug", "supervisor", "status"))
    assert plain.returncode == through_click.returncode == 3
    assert plain.stderr == through_click.stderr == (
        f"kint: error: no supervisor is running for {sandbox.kint_home} "
        f"[SUPERVISOR_UNAVAILABLE]\nhint: `kint supervisor start` starts one (so does any "
        f"command that needs it)\n")
    sandbox = serving_machine
    space = sandbox.row(sandbox.sibyl_db)["space"]
    for args in (("supervisor", "status"), ("supervisor", "status", "--json")):
        plain = script(sandbox, *args)
        assert plain.returncode == 0, plain.stderr
        *printed, modules = plain.stdout.splitlines()
        loaded = json.loads(modules)
        assert not {"click", "orjson", "dataclasses", "inspect"} & set(loaded), loaded
        ours = {m for m in loaded if m.startswith("kint")}
        # The entry's start-up step, and the claim it makes (kint.crypto_backend: a flag,
        # pycryptodome itself loads only for a command that hashes).
        assert ours <= STATUS_KINT_MODULES | {"kint.entry", "kint.startup",
                                              "kint.crypto_backend"}
        through_click = sandbox.kint("--debug", *args)
        assert through_click.returncode == 0, through_click.stderr
        if "--json" in args:
            mine, theirs = json.loads("\n".join(printed)), json.loads(through_click.stdout)
            assert [r["space"] for r in mine["spaces"]] == [space]
            assert mine.keys() == theirs.keys() and mine["spaces"][0].keys() == theirs[
                "spaces"][0].keys()
        else:
            assert printed[0].split(", up ")[0] == through_click.stdout.split(", up ")[0]
            assert [line.split()[0] for line in printed[1:]] == [
                line.split()[0] for line in through_click.stdout.splitlines()[1:]]
            assert any(line.startswith(space) for line in printed[2:]), printed


def test_status_with_a_closed_stream_still_exits_with_its_own_status(sandbox):
    """`kint supervisor status 2>&-` (or `>&-`): Python gives the closed stream as None;
    the command says nothing there, as click.echo does, and exits with its own status (3:
    no supervisor), not 1 from an AttributeError, on the plain path and through click."""
    for args in (("supervisor", "status"), ("--debug", "supervisor", "status"),
                 ("supervisor", "status", "--json")):
        for closed in ("2>&-", ">&- 2>&-"):
            done = subprocess.run(["sh", "-c", f'exec "$0" "$@" {closed}', KINT, *args],
                                  env=sandbox.env, timeout=90)
            assert done.returncode == 3, (args, closed)


_GC_AFTER_VERSION = """
import atexit, gc, json, sys
atexit.register(lambda: print(json.dumps({"enabled": gc.isenabled(),
                                          "frozen": gc.get_freeze_count()})))
sys.argv = ["kint", "--version"]
from kint.entry import main
main()
"""


def test_the_console_script_freezes_what_its_imports_made(sandbox):
    """The `kint` script runs kint.entry.main, which loads the CLI with the collector paused
    and then freezes the objects the imports made (~20% of a fresh `kint supervisor
    status`): the collector is on again for the command, and a program that imports
    kint.cli itself keeps its collector untouched."""
    assert "from kint.entry import main" in Path(KINT).read_text()
    out = subprocess.run([sys.executable, "-c", _GC_AFTER_VERSION], env=sandbox.env,
                         text=True, capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("kint, version ")
    after = json.loads(out.stdout.splitlines()[-1])
    assert after["enabled"] and after["frozen"] > 1000, after
    plain = subprocess.run([sys.executable, "-c", "import gc, kint.cli; "
                            "print(gc.isenabled(), gc.get_freeze_count())"],
                           env=sandbox.env, text=True, capture_output=True, timeout=90)
    assert plain.stdout.split() == ["True", "0"], plain.stderr


def test_the_status_tables_head_and_op_columns_say_what_a_space_is_doing():
    """HEAD is `seq@block`, the seq alone before anything is anchored (a null block, never
    `0@None`); OP is the op in flight, else a watcher push's progress, else `-`."""
    from kint import render

    base = {"space": "s" * 16, "tenant": "t", "store": "/x/memory.db", "pid": 7,
            "state": "ready", "rpc": None, "unanchored": None, "held": None, "restarts": 0,
            "last_beat_age_s": 0.5, "uptime_s": 3.0, "memory_mib": None}
    column = render.STATUS_COLUMNS.index
    rows = render.status_rows({"spaces": [
        {**base, "head": {"seq": 0, "block": None}, "op": None, "progress": None},
        {**base, "head": {"seq": 2, "block": 41}, "op": {"name": "verify", "age_s": 0.25},
         "progress": None},
        {**base, "head": None, "op": None, "progress": "push: epoch 1 of 2 (10 rows)"},
    ]})
    assert [r[column("HEAD")] for r in rows] == ["0", "2@41", "-"]
    assert [r[column("OP")] for r in rows] == ["-", "verify 0.2s", "push: epoch 1 of 2 (1..."]


def test_a_session_key_authorized_past_year_9999_is_shown_not_a_traceback():
    """The contract keeps an expiry as a uint64, and an owner may authorize a key with
    `type(uint64).max` for "never": `kint status`'s keys line and `kint join`'s and `kint
    authorize`'s times (render.utc_time) show that number; no datetime holds it (it raised
    OverflowError)."""
    from kint import render, render_space

    when = render.utc_time

    never = 2**64 - 1
    facts = {"exists": True, "balance_eth": "0.01", "authorized": True, "expiry": never}
    assert render_space.session_key_text(facts) == (
        f"balance 0.01 ETH authorized True until unix time {never} (past year 9999)")
    assert when(never) == f"unix time {never} (past year 9999)"
    assert when(253402300799) == "9999-12-31T23:59:59Z"
    assert render_space.session_key_text({**facts, "expiry": 86400}) == (
        "balance 0.01 ETH authorized True until 1970-01-02 00:00 UTC")


def test_join_refuses_a_tenant_or_store_given_before_and_after_it_with_two_values(sandbox):
    """`kint join` takes `--tenant` and `--db` after the command too (09-cli.md, "kint
    join"). Given on both sides with two values, it took the later one silently: the tenant
    and the store pick the space, so a join could restore another memory than the one the
    global option named. Refused before any step (exit 2, nothing started); the same value
    twice, or one store path written two ways, is taken."""
    owner = "0x" + "ab" * 20
    for argv, said in (
            (("--tenant", "team-a", "join", "--tenant", "team-b"),
             "--tenant given twice, 'team-a' before the command and 'team-b' after it"),
            (("--db", str(sandbox.sibyl_db), "join", "--db", str(sandbox.root / "other.db")),
             f"--db given twice, {str(sandbox.sibyl_db)!r} before the command and "
             f"{str(sandbox.root / 'other.db')!r} after it")):
        out = sandbox.kint(*argv, "--owner", owner, "--recovery-code-stdin", "--no-setup",
                           input="")
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert out.stderr.splitlines()[0] == f"kint: error: {said} [BAD_REQUEST]", out.stderr
    same = sandbox.kint("--tenant", "team-a", "join", "--tenant", "team-a", "--owner", owner,
                        "--recovery-code-stdin", "--no-setup", input="")
    assert same.returncode == 2 and "given twice" not in same.stderr, same.stderr
    assert "the recovery code was to come on stdin" in same.stderr, same.stderr
    assert not (sandbox.kint_home / "run").exists()  # no step ran: no supervisor started


def test_join_tells_two_store_paths_apart_by_the_file_they_lead_to(sandbox):
    """`--db` given before `join` and after it is compared as the file each path leads to
    (links followed), not as text: the store named through a link to it is the one store,
    taken, and `link/../other.db` is not `other.db` when the link leads elsewhere (the text
    compare folded `link/..` away and took the second store silently). The refusal shows
    each path as typed."""
    owner = "0x" + "ab" * 20
    root = sandbox.root
    (root / "deep" / "er").mkdir(parents=True)
    (root / "to-deep").symlink_to(root / "deep" / "er")
    (root / "via").symlink_to(sandbox.sibyl_db.parent, target_is_directory=True)
    far, near = f"{root}/to-deep/../other.db", f"{root}/other.db"  # deep/other.db, other.db
    out = sandbox.kint("--db", far, "join", "--db", near, "--owner", owner,
                       "--recovery-code-stdin", "--no-setup", input="")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.splitlines()[0] == (f"kint: error: --db given twice, {far!r} before the "
                                          f"command and {near!r} after it [BAD_REQUEST]"), \
        out.stderr
    alias = root / "via" / sandbox.sibyl_db.name  # the store, through a linked folder
    one = sandbox.kint("--db", str(sandbox.sibyl_db), "join", "--db", str(alias),
                       "--owner", owner, "--recovery-code-stdin", "--no-setup", input="")
    assert one.returncode == 2 and "given twice" not in one.stderr, one.stderr
    assert "the recovery code was to come on stdin" in one.stderr, one.stderr
