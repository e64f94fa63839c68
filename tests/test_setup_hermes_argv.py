"""`kint setup hermes` with the real Hermes (hermes-agent in .venv-hermes) gives `hermes mcp
add` its arguments on stdin, never on a command line: they carry the entry's environment
(an `--env` of the user's, the variables of theirs kept from kint's entry), and a
process's argv is readable by every user of the machine (/proc/<pid>/cmdline).

Every command line is recorded by a PATH shim: a copy of Hermes' `hermes` script whose `#!`
names a `python3` shim that writes its arguments to a file and execs Hermes' own Python, so
the `hermes` commands and the Python setup starts for `mcp add` (hermes_run.py) all pass
through it, and what runs and saves is Hermes' own. A `hermes` that is no Python script is
a shell wrapper around a stand-in (harness_stand_ins.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness_stand_ins import calls, recorded, recording_shim, stand_in
from real_clients import ROOT, SERVER, client_or_skip, harness_env, kint_setup, run
from test_setup_failures import HERMES_SCRIPT

from kint.harnesses.hermes import ARGV_ONLY

TOKEN = "tok-of-the-user-5d1e"
THEIRS = "/srv/of-the-user-7f3a"


def test_hermes_mcp_add_gets_its_arguments_on_stdin_and_keeps_the_users_variables(
        sandbox, tmp_path):
    """The real Hermes: no value of the user's (nor kint's settings) on any command line;
    the entry saved holds the `--env` of the user's, keeps the variable of theirs already
    in kint's entry's `env` (which `mcp add` replaced with setup's alone), and takes kint's
    pins in place of an older kint's."""
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    log = tmp_path / "argv.log"
    shim_dir = tmp_path / "shim"
    python = recording_shim(shim_dir, "python3", ROOT / ".venv-hermes" / "bin" / "python3", log)
    script = hermes.read_text().split("\n", 1)[1]
    (shim_dir / "hermes").write_text(f"#!{python}\n{script}")
    (shim_dir / "hermes").chmod(0o755)
    env = harness_env(sandbox, tmp_path)
    env["PATH"] = f"{shim_dir}:{env['PATH']}"
    root = sandbox.hermes_home
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(json.dumps({"mcp_servers": {"kint": {
        "command": "/old/venv/bin/kint-server", "enabled": True,
        "env": {"MY_TOOL_HOME": THEIRS, "KINT_HOME": "/old/kint-home"}}}}))

    out = kint_setup(sandbox, env, "hermes", "--env", f"MY_TOOL_TOKEN={TOKEN}")
    store = root / "sibyl" / "memory.db"
    assert out.stdout.splitlines()[0] == f"hermes[default]: registered kint (store {store})"
    assert out.stdout.splitlines()[2] == (  # the older kint's pin: named, never its value
        "  hermes[default]: replaced your KINT_HOME=... in kint's entry with kint's (give yours "
        "with --env KINT_HOME=... to keep it)"), out.stdout
    runs = recorded(log)
    assert any(argv[:1] == ["-c"] for argv in runs), runs  # mcp add, through Hermes' Python
    for argv in runs:
        assert "add" not in argv, f"mcp add's arguments on a command line: {argv}"
        for word in argv:
            for value in (TOKEN, THEIRS, str(sandbox.kint_home)):
                assert value not in word, f"{value} on the command line: {argv}"
    got = run([str(hermes), "config", "get", "--json", "mcp_servers.kint"], env, cwd=tmp_path)
    entry = json.loads(got.stdout)
    assert entry["command"] == SERVER and entry["enabled"] is True
    assert entry["env"]["MY_TOOL_TOKEN"] == TOKEN and entry["env"]["MY_TOOL_HOME"] == THEIRS
    assert entry["env"]["KINT_HOME"] == str(sandbox.kint_home)
    assert entry["env"]["SIBYL_MEMORY_DB"] == str(store)


def shell_wrapped_hermes(sandbox, tmp_path: Path) -> str:
    """A `hermes` that is a shell script (no `#!` Python to run it through) around the
    stand-in over $HOME/hermes-config.json, whose kint entry holds a variable of the
    user's; the PATH to run setup with."""
    inner = stand_in(tmp_path / "inner", "hermes", HERMES_SCRIPT)
    wrapper = tmp_path / "bin" / "hermes"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {inner} "$@"\n')
    wrapper.chmod(0o755)
    entry = {"mcp_servers": {"kint": {"command": "/old/venv/bin/kint-server",
                                      "enabled": True, "env": {"MY_TOOL_HOME": THEIRS}}}}
    (sandbox.home / "hermes-config.json").write_text(json.dumps(entry))
    sandbox.hermes_home.mkdir(parents=True, exist_ok=True)
    (sandbox.hermes_home / "config.yaml").write_text(json.dumps(entry))
    return f"{wrapper.parent}:/usr/bin:/bin"


def test_a_hermes_that_is_no_python_script_gets_kints_settings_alone(sandbox, tmp_path):
    """Such a `hermes` takes `mcp add`'s arguments only on its command line: kint's own
    settings go there, the user's variable does not, and setup names it, why, and the
    backup that holds it."""
    path = shell_wrapped_hermes(sandbox, tmp_path)
    out = sandbox.kint("setup", "hermes", env={"PATH": path})
    assert out.returncode == 0, out.stdout + out.stderr
    assert THEIRS not in json.dumps(calls(sandbox.home, "hermes"))
    entry = json.loads((sandbox.home / "hermes-config.json").read_text())["mcp_servers"]["kint"]
    assert entry["command"] == SERVER and "MY_TOOL_HOME" not in entry["env"]
    [copy] = sandbox.hermes_home.glob("config.yaml.bak-*")
    lines = out.stdout.splitlines()
    assert lines[1:3] == [
        f"  hermes[default]: backup {copy}",
        f"  hermes[default]: kint's entry lost variables of yours (MY_TOOL_HOME): {ARGV_ONLY}; "
        "the backup above holds them"], lines


def test_a_hermes_that_is_no_python_script_is_not_given_an_env_value_of_the_users(
        sandbox, tmp_path):
    """An `--env` of the user's is not put on such a `hermes`'s command line: the profile
    fails, naming the variable (never its value)."""
    path = shell_wrapped_hermes(sandbox, tmp_path)
    out = sandbox.kint("setup", "hermes", "--env", f"MY_TOOL_TOKEN={TOKEN}", env={"PATH": path})
    assert out.returncode == 1, out.stdout + out.stderr
    assert TOKEN not in json.dumps(calls(sandbox.home, "hermes"))
    assert TOKEN not in out.stdout + out.stderr
    assert out.stdout.splitlines()[:2] == [
        "hermes[default]: failed: this `hermes` is no Python script, so it takes an entry's "
        "env only on its command line, where every user of this machine can read it, and "
        "kint's holds values of yours (MY_TOOL_TOKEN) [HARNESS_ERROR]",
        "  hermes[default]: hint: set them in the profile's config.yaml under "
        "mcp_servers.kint.env once kint is registered, and run `kint setup hermes` without "
        "them"]
