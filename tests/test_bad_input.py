"""Bad input gets a clear one-line error and the exit code the CLI reference gives, never a
traceback, never a silent default (issue 14, item 10). One table: the input, the exit
status, a phrase the error must carry. Every refusal of the command line, kint's own and
click's (an unknown flag, a missing argument), has the shape of every other error: one
line ending in its code, then a hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from table_runs import collected_ids, running_ahead

OWNER = "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
BAD_OWNER = "--owner '0xzz' is not an address (0x and 40 hex characters)"
MISTYPED = "0x19e7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
CHECKSUM_REFUSAL = (f"--owner '{MISTYPED}' does not match its EIP-55 checksum (the case of "
                    "its letters): a character may be mistyped [BAD_REQUEST]\nhint: copy the "
                    "address again from the wallet or an explorer")

CASES = [
    # (what, argv, stdin, exit status, phrase on stderr)
    ("a block past 63 bits", ["history", "entity", "x", "--category", "c", "--block",
                              str(2**64)], None, 2, "is not in the range"),
    ("an empty tenant", ["--tenant", "", "status"], None, 2, "--tenant is empty"),
    ("an empty store path", ["--db", " ", "status"], None, 2, "--db is empty"),
    # A global option after a command that does not take it: the hint says where it goes.
    ("a global option after the command", ["status", "--tenant", "t"], None, 2,
     "hint: --tenant is a global option: give it before the command, `kint --tenant ... "
     "status`"),
    ("--debug after a subcommand", ["supervisor", "status", "--debug"], None, 2,
     "hint: --debug is a global option: give it before the command, `kint --debug "
     "supervisor status`"),
    # Before the command, so before its --json is read: plain text (docs/commands.md).
    ("an empty tenant before a --json command", ["--tenant", "", "status", "--json"], None,
     2, "--tenant is empty"),
    # join's own --tenant and --db stand for the global ones, and are refused the same way
    # (an empty one was read as not given: the join went on under the default tenant).
    ("join with an empty tenant", ["join", "--owner", OWNER, "--recovery-code-stdin",
                                   "--tenant", ""], "a code\n", 2, "--tenant is empty"),
    ("join with an empty store path", ["join", "--owner", OWNER, "--recovery-code-stdin",
                                       "--db", "  "], "a code\n", 2, "--db is empty"),
    ("a store path that is a folder", ["--db", "/", "status"], None, 2,
     "store / is a folder, not a regular file"),
    ("a state's history with a category", ["history", "state", "x", "--category", "c"], None,
     2, "--category is for entities only"),
    ("a verify limit of 0", ["verify", "q", "--limit", "0"], None, 2, "is not in the range"),
    ("a history of no tier", ["history"], None, 2, "Missing argument"),
    ("a history of a tier with no history", ["history", "note", "x"], None, 2,
     "'note' is not one of 'entity', 'state', 'reference'"),
    ("a mistyped flag", ["history", "entity", "x", "--categry", "c"], None, 2,
     "No such option '--categry'. Did you mean '--category'?"),
    ("a command that does not exist", ["histroy"], None, 2, "No such command 'histroy'"),
    ("a subcommand's unknown flag", ["session-key", "show", "--bogus"], None, 2,
     "No such option '--bogus'"),
    ("an owner that is not an address", ["canonical-payload", "--owner", "0x123"], None, 2,
     "is not an address"),
    # OWNER with one letter's case changed: the same bytes, but not its EIP-55 checksum,
    # the mark of a mistyped character (eth_utils 6's `is_address` takes it).
    ("an owner whose case is not its checksum", ["canonical-payload", "--owner",
                                                  MISTYPED], None, 2, CHECKSUM_REFUSAL),
    ("a chain command's owner whose case is not its checksum", ["push", "--owner", MISTYPED],
     None, 2, CHECKSUM_REFUSAL),
    ("connect without any key", ["connect", "--owner", OWNER], None, 2,
     "give the derive signature with --signature - (stdin) or --signature-file PATH"),
    ("connect without an owner", ["connect", "--signature", "-"], "0xab\n", 2,
     "--owner 0x... is required"),
    ("two secrets on one stdin", ["connect", "--owner", OWNER, "--signature", "-",
                                  "--passphrase-stdin"], "x\n", 2, "cannot share stdin"),
    ("a malformed signature", ["connect", "--owner", OWNER, "--signature", "-"],
     "0xnothex\n", 2, "derive signature must be 65 bytes"),
    ("an empty stdin", ["connect", "--owner", OWNER, "--recovery-code-stdin"], "", 2,
     "stdin was empty"),
    ("a recovery code that is not one", ["connect", "--owner", OWNER,
                                         "--recovery-code-stdin"], "hello\n", 2,
     "recovery code"),
    # A malformed --owner is refused before a secret is read from stdin: with nothing
    # piped, the refusal is about the owner, not about an empty stdin.
    ("connect's bad owner, signature on stdin",
     ["connect", "--owner", "0xzz", "--signature", "-"], "", 2, BAD_OWNER),
    ("connect's bad owner, recovery code on stdin",
     ["connect", "--owner", "0xzz", "--recovery-code-stdin"], "", 2, BAD_OWNER),
    ("connect's bad owner, passphrase on stdin",
     ["connect", "--owner", "0xzz", "--smart-account", "--passphrase-stdin"], "", 2,
     BAD_OWNER),
    ("join's bad owner, signature on stdin",
     ["join", "--owner", "0xzz", "--signature", "-", "--no-setup"], "", 2, BAD_OWNER),
    ("rekey's bad owner, signature on stdin",
     ["rekey", "--owner", "0xzz", "--signature", "-"], "", 2, BAD_OWNER),
    ("authorize submit's bad owner, signature on stdin",
     ["authorize", "submit", "--owner", "0xzz", "--deadline", "1", "--expiry", "1",
      "--signature", "-"], "", 2, BAD_OWNER),
    ("an RPC URL with a key on the command line",
     ["connect", "--owner", OWNER, "--signature", "-", "--rpc-urls",
      "http://127.0.0.1:9,https://base.example/v2/K3Y-ON-ARGV"], "0xab\n", 2,
     "--rpc-urls: https://base.example/<redacted> has a user, path or query part"),
    ("an RPC URL whose port is no number", ["connect", "--owner", OWNER, "--signature", "-",
                                            "--rpc-urls", "https://base.example:K3Y-ON-ARGV/v2"],
     "0xab\n", 2, "--rpc-urls: https://base.example:<bad port>/<redacted> has a user, path"),
    # An endpoint given without its scheme, or no URL at all, was refused as one with a
    # user, path or query part (`:///<redacted>`); it is said for what it is, not echoed.
    ("an RPC endpoint without its scheme", ["connect", "--owner", OWNER, "--signature", "-",
                                            "--rpc-urls", "127.0.0.1:8545"], "0xab\n", 2,
     "--rpc-urls: endpoint 1 of 1 is not an http:// or https:// URL with a host"),
    ("an RPC endpoint that is no URL", ["connect", "--owner", OWNER, "--signature", "-",
                                        "--rpc-urls", "http://127.0.0.1:9,notaurl"],
     "0xab\n", 2, "--rpc-urls: endpoint 2 of 2 is not an http:// or https:// URL"),
    ("no RPC endpoint", ["connect", "--owner", OWNER, "--signature", "-", "--rpc-urls", ","],
     "0xab\n", 2, "--rpc-urls names no endpoint"),
]
# The table's cases whose command reaches the space's worker (a connect op, one at a time
# per space): run in their own tests, never two at once. Every other case is refused by the
# command itself and runs ahead of its test (`table`).
REACH_THE_WORKER = {"a malformed signature", "a recovery code that is not one"}


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    from conftest import make_sandbox, write_store

    sb = make_sandbox(tmp_path_factory.mktemp("bad-input"))
    write_store(sb.sibyl_db)
    sb.start()
    yield sb
    sb.shutdown()


@pytest.fixture(scope="module")
def table(request, machine, tmp_path_factory):
    """The cases of this module's three tables (CASES, KINT_HOME_ARGV, JSON_CASES) that the
    command itself refuses, run ahead of their tests two at a time (tests/table_runs.py):
    by CASES' id, ("home", argv, the KINT_HOME given) and ("json", JSON_CASES' id). A
    KINT_HOME case names a file of its own (`home_file`)."""
    runs = {}
    collected = collected_ids(request, test_bad_input_table)
    for what, argv, stdin, _, _ in CASES:
        if what in collected and what not in REACH_THE_WORKER:
            runs[what] = lambda argv=argv, stdin=stdin: machine.kint(*argv, input=stdin)
    collected = collected_ids(request, test_a_kint_home_that_is_not_a_folder_is_one_line)
    for argv in KINT_HOME_ARGV:
        if " ".join(argv) in collected:
            afile = home_file(tmp_path_factory.mktemp("afile"))
            for home in (afile, afile / "sub"):
                runs[("home", *argv, str(home))] = (
                    lambda argv=argv, home=home: machine.kint(*argv,
                                                              env={"KINT_HOME": str(home)}))
    collected = collected_ids(request, test_a_refusal_under_json_is_one_json_object_on_stdout)
    for what, argv, _, _ in JSON_CASES:
        if what in collected and what not in JSON_REACH_THE_WORKER:
            runs[("json", what)] = lambda argv=argv: machine.kint(*argv)
    with running_ahead(runs) as ahead:
        yield ahead


def home_file(folder: Path) -> Path:
    """An empty file where a KINT_HOME case's folder would be."""
    afile = folder / "afile"
    afile.write_text("")
    return afile


@pytest.mark.parametrize("what,argv,stdin,status,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_table(machine, table, what, argv, stdin, status, phrase):
    out = (machine.kint(*argv, input=stdin) if what in REACH_THE_WORKER
           else table.outcome(what))
    assert out.returncode == status, (what, out.returncode, out.stdout, out.stderr)
    assert phrase in out.stderr, (what, out.stderr)
    assert "Traceback" not in out.stderr and "check the client version" not in out.stderr
    assert "K3Y-ON-ARGV" not in out.stdout + out.stderr
    message, hint = out.stderr.splitlines()
    assert message.startswith("kint: error: ") and message.endswith(" [BAD_REQUEST]"), (
        what, out.stderr)
    assert hint.startswith("hint: "), (what, out.stderr)
    # A worker's refusal too (a recovery code that is not one): the command's own --help,
    # never the protocol's placeholder `kint COMMAND --help`.
    assert "COMMAND" not in hint, (what, hint)


@pytest.mark.parametrize("argv", [
    ["connect", "--owner", OWNER, "--smart-account"],
    ["join", "--owner", OWNER, "--base-account", "--no-setup"],
], ids=["connect", "join"])
def test_a_prompt_whose_stdin_ends_is_refused_with_a_code(machine, argv):
    """A passphrase prompt with no terminal and nothing piped (stdin closed, as in a
    script) meets the end of stdin: bad input, exit 2, with what to do; it was click's bare
    `Aborted!` and exit 1, the status of verify's refusal and a failed doctor. (rekey
    prompts through the same helper, once its space is connected.)"""
    out = machine.kint(*argv)
    assert out.returncode == 2, (argv, out.stdout, out.stderr)
    assert "Aborted" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    # join names the step the passphrase is for, as its other refusals do.
    said = "join stopped at connect" if argv[0] == "join" else "kint: error"
    assert out.stderr.splitlines()[-2:] == [
        f"{said}: the passphrase for `vault passphrase` never came: stdin ended at the "
        "prompt (no terminal?) [BAD_REQUEST]",
        "hint: run the command in a terminal, or pipe the passphrase with --passphrase-stdin"
    ], out.stderr


def test_a_prompt_for_a_passphrase_stdin_cannot_carry_does_not_point_there(machine, tmp_path):
    """The extra passphrase wrap (`--add-passphrase`) is only ever typed at its prompt:
    `--passphrase-stdin` beside a signature is the salt of the wallet key, so its refusal
    at the end of stdin must not say to pipe it there (a user who did would salt the key
    with the passphrase meant for the extra wrap)."""
    signature = tmp_path / "sig.txt"
    signature.write_text("0x" + "11" * 65 + "\n")
    out = machine.kint("connect", "--owner", OWNER, "--signature-file", str(signature),
                       "--add-passphrase")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.splitlines()[-2:] == [
        "kint: error: the passphrase for `extra passphrase wrap (empty to skip)` never came: "
        "stdin ended at the prompt (no terminal?) [BAD_REQUEST]",
        "hint: run the command in a terminal: this passphrase is only ever typed at its "
        "prompt"], out.stderr


def test_a_history_with_nothing_anchored_is_an_answer_not_a_refusal(machine):
    """v0.3.0 prints nothing and exits 0 for a row with no anchored version; a person is
    told why on stderr."""
    out = machine.kint("history", "entity", "nothing", "--category", "c")
    assert out.returncode == 0 and out.stdout == "", (out.stdout, out.stderr)
    assert out.stderr.startswith("kint: no anchored version of entity c/nothing"), out.stderr


def test_an_entitys_history_without_its_category_finds_nothing(machine):
    """v0.3.0's `--category` is optional (09-cli.md, "kint history") and an entity lookup
    without it finds nothing (08-tools.md, memory_history): exit 0, nothing on stdout, and
    `--json` / `--block` the found-nothing answers of a lookup with one. It used to exit 2.
    A person is told, in one line on stderr, that entities are looked up by category."""
    out = machine.kint("history", "entity", "release gate")
    assert out.returncode == 0 and out.stdout == "", (out.stdout, out.stderr)
    assert out.stderr.splitlines() == [
        "kint: entity rows are looked up by category and name, so nothing is found without "
        "one: kint history entity 'release gate' --category CATEGORY"], out.stderr
    as_json = machine.kint("history", "entity", "x", "--json")
    with_one = machine.kint("history", "entity", "x", "--category", "c", "--json")
    assert as_json.returncode == with_one.returncode == 0, (as_json.stderr, with_one.stderr)
    assert json.loads(as_json.stdout) == json.loads(with_one.stdout) == {"versions": [],
                                                                          "count": 0}
    assert "--category CATEGORY" in as_json.stderr and not with_one.stderr
    at = machine.kint("history", "entity", "x", "--block", "7")
    assert at.returncode == 0 and at.stdout.strip() == "null", (at.stdout, at.stderr)
    assert len(at.stderr.splitlines()) == 1 and "--category" in at.stderr


def test_a_keyed_rpc_url_is_refused_before_the_signature_file_is_read(machine, tmp_path):
    """A signature file is unlinked once read: `--rpc-urls` with a key is refused first, so
    the refusal does not cost the user the file. Its hint names the space's own table in
    config.toml by the space's label."""
    signature = tmp_path / "sig.txt"
    signature.write_text("0x" + "ab" * 65 + "\n")
    out = machine.kint("connect", "--owner", OWNER, "--signature-file", str(signature),
                       "--rpc-urls", "https://base.example/v2/K3Y-ON-ARGV")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--rpc-urls: https://base.example/<redacted>" in out.stderr
    assert signature.exists()
    # The hint names the space's table by the store's label (it said `<label>`).
    label = machine.label(machine.sibyl_db)
    assert f'([spaces."{label}"], docs/settings.md)' in out.stderr, out.stderr
    assert "<label>" not in out.stderr, out.stderr


def test_a_bad_owner_is_refused_before_the_signature_file_is_read(machine, tmp_path):
    """The owner is checked before any secret is read: a malformed one does not cost the
    user the signature file, which is unlinked once read."""
    signature = tmp_path / "sig.txt"
    signature.write_text("0x" + "ab" * 65 + "\n")
    out = machine.kint("connect", "--owner", "0xzz", "--signature-file", str(signature))
    assert out.returncode == 2, out.stdout + out.stderr
    assert BAD_OWNER in out.stderr, out.stderr
    assert signature.exists()


@pytest.mark.parametrize("argv,stdin", [
    (["connect", "--owner", OWNER, "--passphrase-stdin"], ""),
    (["connect", "--owner", OWNER, "--passphrase-prompt"], "\n"),
    (["join", "--owner", OWNER, "--no-setup", "--passphrase-prompt"], None),
], ids=["connect-stdin-empty", "connect-prompt-empty", "join-prompt-never-typed"])
def test_a_refused_passphrase_leaves_the_signature_file(machine, tmp_path, argv, stdin):
    """The passphrase that salts the wallet key is asked for before the signature file is
    read (and unlinked): one refused, empty or never typed, cost the user the file, and the
    owner a second signature with the wallet."""
    signature = tmp_path / "sig.txt"
    signature.write_text("0x" + "ab" * 65 + "\n")
    out = machine.kint(*argv, "--signature-file", str(signature), input=stdin)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "[BAD_REQUEST]" in out.stderr and "passphrase" in out.stderr, out.stderr
    assert signature.exists()


def test_a_newline_in_a_store_path_does_not_break_the_status_lines(machine, tmp_path):
    odd = tmp_path / "a\nb" / "memory.db"
    out = machine.kint("--db", str(odd), "status", env={"KINT_SPACE": "odd-path"})
    assert out.returncode == 0, out.stderr
    store_lines = [line for line in out.stdout.splitlines() if line.startswith("store:")]
    assert len(store_lines) == 1 and "a\\nb" in store_lines[0]


KINT_HOME_ARGV = [["status"], ["config", "show"], ["session-key", "create"],
                  ["devchain", "status"], ["doctor"], ["supervisor", "status"],
                  ["supervisor", "status", "--json"]]


@pytest.mark.parametrize("argv", KINT_HOME_ARGV, ids=" ".join)
def test_a_kint_home_that_is_not_a_folder_is_one_line(table, argv):
    """KINT_HOME naming a file (or a path under one) gave a Python traceback from whichever
    module first touched it; every command now refuses it once, up front (`supervisor
    status`, which runs without the command line, once it finds no supervisor)."""
    homes = sorted(case[-1] for case in table.cases() if case[:-1] == ("home", *argv))
    afile = Path(homes[0])  # the file, then the path under it
    for home, why in ((afile, "is not a plain folder"),
                      (afile / "sub", "cannot be used (Not a directory)")):
        out = table.outcome(("home", *argv, str(home)))
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert out.stderr.splitlines() == [
            f"kint: error: KINT_HOME {home} {why} [BAD_REQUEST]",
            "hint: point KINT_HOME at a folder of your own (kint creates it, mode 0700), or "
            "unset it for ~/.kint"], out.stderr


def test_the_demo_runs_whatever_kint_home_is(machine, tmp_path):
    """`kint demo` makes a sandbox with a KINT_HOME of its own: the up-front check of the
    caller's KINT_HOME does not refuse it."""
    afile = tmp_path / "afile"
    afile.write_text("")
    # Past the check, click reads demo's own options (a whole demo run takes a minute).
    out = machine.kint("demo", "--no-such-flag", env={"KINT_HOME": str(afile)})
    assert out.returncode == 2, out.stderr
    assert "No such option '--no-such-flag'" in out.stderr and "KINT_HOME" not in out.stderr


@pytest.mark.parametrize("argv", [["status", "--help"], ["supervisor", "status", "--help"],
                                  ["--help"]], ids=" ".join)
def test_help_is_shown_whatever_kint_home_is(machine, tmp_path, argv):
    """Help touches no file: a bad KINT_HOME does not stand between a user and --help."""
    afile = tmp_path / "afile"
    afile.write_text("")
    out = machine.kint(*argv, env={"KINT_HOME": str(afile)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Usage: kint"), out.stdout


def test_a_blank_variable_counts_as_unset(machine):
    """KINT_TENANT of spaces only named a tenant "  " (a space of its own, bound to the
    user's store); like an empty value, it now counts as unset."""
    import json

    plain = json.loads(machine.kint("status", "--json").stdout)
    blank = machine.kint("status", "--json", env={"KINT_TENANT": "  "})
    assert blank.returncode == 0, blank.stderr
    assert json.loads(blank.stdout)["tenant"] == plain["tenant"] != "  "


def test_kint_server_takes_no_arguments(machine):
    """`kint-server --help` in a terminal served MCP on it, silently; it now says what it is
    (exit 0 for --help, 2 for anything else) and serves nothing."""
    import subprocess

    from conftest import KINT

    server = str(Path(KINT).with_name("kint-server"))
    for args, status in ((["--help"], 0), (["--tenant", "x"], 2)):
        out = subprocess.run([server, *args], env=machine.env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=60)
        assert out.returncode == status and out.stdout == "", (args, out)
        assert out.stderr.startswith("kint-server takes no arguments"), out.stderr


def test_kint_server_refuses_a_kint_home_that_is_not_a_folder(machine, tmp_path):
    """kint-server named in a harness with KINT_HOME on a file stopped with a traceback
    (its log is opened there first); it now says so in the command line's two lines."""
    import subprocess

    from conftest import KINT

    afile = tmp_path / "afile"
    afile.write_text("")
    out = subprocess.run([str(Path(KINT).with_name("kint-server"))],
                         env={**machine.env, "KINT_HOME": str(afile)}, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.splitlines() == [
        f"kint-server: error: KINT_HOME {afile} is not a plain folder [BAD_REQUEST]",
        "hint: point KINT_HOME at a folder of your own (kint creates it, mode 0700), or "
        "unset it for ~/.kint"], out.stderr


JSON_CASES = [
    # (what, argv, exit status, code): with --json, a refusal is one object on stdout
    ("a push on a machine never connected", ["push", "--json"], 5, "NOT_CONNECTED"),
    ("a pull on a machine never connected", ["pull", "--json"], 5, "NOT_CONNECTED"),
    ("a compact on a machine never connected", ["compact", "--json"], 5, "NOT_CONNECTED"),
    ("a status of a store that is a folder", ["--db", "/", "status", "--json"], 2,
     "BAD_REQUEST"),
    ("a verify limit of 0, --json after it", ["verify", "q", "--limit", "0", "--json"], 2,
     "BAD_REQUEST"),
    ("a push's confirmations out of range", ["push", "--confirmations", "0", "--json"], 2,
     "BAD_REQUEST"),
    ("a history with no tier that has one", ["history", "note", "x", "--json"], 2,
     "BAD_REQUEST"),
    # Its answer is JSON with or without --json (v0.3.0's); --json is for its refusals.
    ("a session-key show owner that is not an address",
     ["session-key", "show", "--owner", "0xzz", "--json"], 2, "BAD_REQUEST"),
]


# JSON_CASES' refusals by the space's worker (one op at a time per space): run in their
# own tests; the others run ahead of theirs (`table`).
JSON_REACH_THE_WORKER = {"a push on a machine never connected",
                         "a pull on a machine never connected"}


@pytest.mark.parametrize("what,argv,status,code", JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_a_refusal_under_json_is_one_json_object_on_stdout(machine, table, what, argv, status,
                                                           code):
    """Every command with --json refuses with `{"error", "message", "hint"}` on stdout and
    the plain form's exit status, whichever option the refusal is about and wherever
    --json stands on the line: a script reads one object whichever way the command ends."""
    import json

    out = (machine.kint(*argv) if what in JSON_REACH_THE_WORKER
           else table.outcome(("json", what)))
    assert out.returncode == status, (what, out.returncode, out.stdout, out.stderr)
    assert out.stderr == "", (what, out.stderr)
    refusal = json.loads(out.stdout)
    assert refusal["error"] == code and refusal["message"] and refusal["hint"], (what, refusal)


def test_a_refusals_notices_are_lines_of_their_own_not_part_of_its_hint(machine):
    """A setting of this call the worker does not use (KINT_OFFLINE=true: a switch takes 1)
    is said with the refusal: under --json as the object's `notices`, with `hint` the one
    line of what to do (the notice rode inside `hint`, after a newline); in plain text as a
    line after the hint's."""
    import json

    notice = ("kint: KINT_OFFLINE='true' in this environment is not 1 (on) or 0 (off), so it "
              "is not used: this call runs with unset (the default)")
    env = {"KINT_OFFLINE": "true"}
    asked = machine.kint("push", "--json", env=env)
    assert asked.returncode == 5 and asked.stderr == "", (asked.stdout, asked.stderr)
    refusal = json.loads(asked.stdout)
    assert refusal["notices"] == [notice], refusal
    assert refusal["hint"] == "run `kint connect --owner ADDRESS` first", refusal
    plain = machine.kint("push", env=env)
    assert plain.returncode == 5, plain.stderr
    assert plain.stderr.splitlines() == [
        f"kint: error: {refusal['message']} [NOT_CONNECTED]", f"hint: {refusal['hint']}",
        notice], plain.stderr
    # A worker's bad-input refusal with a notice under its hint: its own hint (where the
    # code is copied from), the notice apart from it. (The protocol's placeholder hint
    # becoming the command's own --help, notices kept, is the join test's below.)
    # (A signature of the right shape whose bytes are no signature: the command line checks
    # only its shape, the worker the rest.)
    bad = machine.kint("connect", "--owner", OWNER, "--signature", "-", "--json",
                       input="0x" + "ab" * 65 + "\n", env=env)
    assert bad.returncode == 2, (bad.stdout, bad.stderr)
    refusal = json.loads(bad.stdout)
    assert refusal["error"] == "BAD_REQUEST" and refusal["notices"] == [notice], refusal
    assert refusal["hint"].startswith("give the whole signature the wallet printed"), refusal


def test_session_key_show_answers_in_json_either_way_and_refuses_plain_without_json(
        machine, tmp_path):
    """`session-key show` prints v0.3.0's JSON whether --json is given or not; --json only
    turns its refusals (here a keystore that does not parse) into the JSON object on stdout,
    and without it the refusal stays v0.3.0's plain line on stderr, exit 2 both ways."""
    import json

    home = tmp_path / "k"
    home.mkdir(mode=0o700)
    plain, asked = (machine.kint("session-key", "show", *flag, env={"KINT_HOME": str(home)})
                    for flag in ((), ("--json",)))
    assert plain.returncode == asked.returncode == 0, (plain.stderr, asked.stderr)
    assert json.loads(plain.stdout) == json.loads(asked.stdout) == {
        "address": None, "path": str(home / "session.key"), "exists": False}

    (home / "session.key").write_text("not a keystore\n")
    (home / "session.key").chmod(0o600)
    plain, asked = (machine.kint("session-key", "show", *flag, env={"KINT_HOME": str(home)})
                    for flag in ((), ("--json",)))
    assert plain.returncode == asked.returncode == 2, (plain, asked)
    assert plain.stdout == "" and plain.stderr.startswith("kint: error: "), plain
    assert plain.stderr.splitlines()[0].endswith("[CORRUPT_STATE]"), plain.stderr
    assert asked.stderr == "", asked.stderr
    refusal = json.loads(asked.stdout)
    assert refusal["error"] == "CORRUPT_STATE" and "session.key" in refusal["message"], refusal
    assert refusal["hint"], refusal


def test_a_worker_bad_input_refusal_in_join_names_joins_help(capsys):
    """`join` prints a worker's refusal through its own stop line: a bad-input one with the
    protocol's generic hint names `kint join --help` there too, never the placeholder
    `kint COMMAND --help`, and the notices under the hint stay (unit level: the worker's
    bad-input refusals in join come after its chain reads, which this sandbox has none of)."""
    import click

    from kint.cli import main as cli
    from kint.client import KintError
    from kint.commands.common import Ctx
    from kint.commands.join_stops import stopper
    from kint.protocol.errors import DEFAULT_HINTS, ErrorCode

    notice = "kint: KINT_OFFLINE='true' in this environment is not 1 (on) or 0 (off)"
    err = KintError("BAD_REQUEST", "a recovery code is 55 characters",
                    f"{DEFAULT_HINTS[ErrorCode.BAD_REQUEST]}\n{notice}")
    join = cli.get_command(click.Context(cli), "join")
    with click.Context(join, info_name="join", parent=click.Context(cli, info_name="kint")):
        with pytest.raises(SystemExit) as stopped:
            stopper("vault", Ctx(None, None, False))(err)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "join stopped at vault: a recovery code is 55 characters [BAD_REQUEST]",
        "hint: `kint join --help` lists what it takes", notice]
