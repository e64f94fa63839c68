"""The variables of the user's own in kint's entry (env_checks.users_env), given back to each
harness only as it takes them, with the real CLIs: a value the harness would refuse (which
fails the whole entry, after Claude Code's `mcp remove` already ran) or save changed
(Hermes' `mcp add` reads `str(NAME=VALUE).strip()`) is left out, and named, with why, under
the backup that holds it. Codex's file is written by setup itself, and checked by `codex mcp
get`, which refuses a config holding a value its schema does not take.
"""

from __future__ import annotations

import json
import tomllib

from real_clients import (ROOT, SERVER, QUIET, claude_binary, client_or_skip, harness_env,
                          kint_setup, run)
from test_setup import setup as codex_setup

THEIRS = "/srv/of-the-user-7f3a"

# A kint entry's env in Hermes' config.yaml as a person writes it: a number, a boolean, an
# empty key (no value), a `|` block (its text ends in a newline), a name Hermes refuses,
# and two values Hermes keeps as they are.
HERMES_YAML = f"""\
mcp_servers:
  kint:
    command: /old/venv/bin/kint-server
    enabled: true
    env:
      MY_TOOL_HOME: {THEIRS}
      MY_COUNT: 1
      MY_FLAG: true
      MY_UNSET:
      MY_BLOCK: |
        a line of the user's
      my-var: of-the-user
      MY_INDENT: "  kept as it is"
"""


def test_hermes_is_given_back_only_the_values_it_saves_as_they_are(sandbox, tmp_path):
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    env = harness_env(sandbox, tmp_path, hermes=hermes)
    root = sandbox.hermes_home
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(HERMES_YAML)

    out = kint_setup(sandbox, env, "hermes")
    store = root / "sibyl" / "memory.db"
    [copy] = root.glob("config.yaml.bak-*")
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        f"hermes[default]: registered kint (store {store})",
        f"  hermes[default]: backup {copy}",
        "  hermes[default]: kint's entry lost variables of yours, which this harness does not "
        "take as they are (MY_COUNT: not a string (a number), which `hermes mcp add` would "
        "save as text; MY_FLAG: not a string (a boolean), which `hermes mcp add` would save "
        "as text; MY_UNSET: not a string (no value), which `hermes mcp add` would save as "
        "text; MY_BLOCK: ends in whitespace, which `hermes mcp add` drops; 'my-var': not a "
        "name Hermes takes); the backup above holds them"], lines
    got = run([str(hermes), "config", "get", "--json", "mcp_servers.kint"], env, cwd=tmp_path)
    entry = json.loads(got.stdout)
    assert entry["command"] == SERVER
    assert entry["env"] == {"MY_TOOL_HOME": THEIRS, "MY_INDENT": "  kept as it is",
                            "KINT_HOME": str(sandbox.kint_home), "SIBYL_MEMORY_DB": str(store),
                            "KINT_TENANT": entry["env"]["KINT_TENANT"]}
    assert "MY_BLOCK: |" in copy.read_text()  # the backup holds them as they were

    again = kint_setup(sandbox, env, "hermes")
    assert again.stdout.splitlines()[0] == (
        f"hermes[default]: kint already registered (store {store}), nothing changed")


def test_claude_code_is_given_back_only_string_values(sandbox, tmp_path):
    """Claude Code's schema takes only strings in an entry's `env`: one number among the
    user's variables refused the whole entry, after `claude mcp remove` had run."""
    real = client_or_skip(claude_binary(), "Claude Code (npm @anthropic-ai/claude-code)")
    env = harness_env(sandbox, tmp_path, claude=real)
    config = sandbox.home / ".claude.json"
    config.write_text(json.dumps({"mcpServers": {"kint": {
        "type": "stdio", "command": "/old/venv/bin/kint-server", "args": [],
        "env": {"MY_TOOL_HOME": THEIRS, "my-var": " of the user\n", "MY_COUNT": 1,
                "MY_FLAG": False, "MY_UNSET": None}}}}))
    out = sandbox.kint("setup", "claude", env={**QUIET, "PATH": env["PATH"]}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [copy] = sandbox.home.glob(".claude.json.bak-*")
    assert out.stdout.splitlines()[2:] == [
        f"  claude: backup {copy}",
        "  claude: kint's entry lost variables of yours, which this harness does not take as "
        "they are (MY_COUNT: not a string (a number); MY_FLAG: not a string (a boolean); "
        "MY_UNSET: not a string (no value)); the backup above holds them"], out.stdout
    entry = json.loads(config.read_text())["mcpServers"]["kint"]
    assert entry["args"][-1] == SERVER
    assert entry["env"] == {"MY_TOOL_HOME": THEIRS, "my-var": " of the user\n",
                            "KINT_HOME": str(sandbox.kint_home),
                            "SIBYL_MEMORY_DB": str(sandbox.sibyl_db)}


def test_codex_is_given_back_only_what_its_config_takes(sandbox, tmp_path):
    """Codex refuses its whole config for a number in an entry's `env` or an `env_vars`
    item that is neither a name nor a `{ name = ... }` table: setup leaves such values out
    (naming them), and keeps a table item, which it used to drop without a word."""
    codex = client_or_skip(ROOT / "node_modules" / ".bin" / "codex", "Codex (npm @openai/codex)")
    config = sandbox.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[mcp_servers.kint]\ncommand = "/old/venv/bin/kint-server"\n'
        'env_vars = ["MY_PROXY_NAME", { name = "MY_TABLE_NAME" }, 3]\n\n'
        f'[mcp_servers.kint.env]\nMY_TOOL_HOME = "{THEIRS}"\nMY_COUNT = 1\n"my-var" = "x"\n')
    out = codex_setup(sandbox, "codex")
    assert out.returncode == 0, out.stdout + out.stderr
    [copy] = config.parent.glob("config.toml.bak-*")
    assert out.stdout.splitlines() == [
        f"codex: wrote [mcp_servers.kint] to {config}", f"  codex: backup {copy}",
        "  codex: kint's entry lost variables of yours, which this harness does not take as "
        "they are (MY_COUNT: not a string (a number); env_vars item 3: neither a name nor a "
        "table with one); the backup above holds them"]
    kint = tomllib.loads(config.read_text())["mcp_servers"]["kint"]
    assert kint["env"] == {"MY_TOOL_HOME": THEIRS, "my-var": "x",
                           "KINT_HOME": str(sandbox.kint_home),
                           "SIBYL_MEMORY_DB": str(sandbox.sibyl_db)}
    assert kint["env_vars"][-2:] == ["MY_PROXY_NAME", {"name": "MY_TABLE_NAME"}]
    env = harness_env(sandbox, tmp_path, codex=codex)
    got = run([str(codex), "mcp", "get", "kint", "--json"], {**env, "CODEX_HOME":
                                                             str(config.parent)}, cwd=tmp_path)
    assert got.returncode == 0, got.stdout + got.stderr
    assert json.loads(got.stdout)["transport"]["env"]["MY_TOOL_HOME"] == THEIRS


def test_an_env_value_hermes_would_cut_fails_the_profile_before_anything_is_written(
        sandbox, tmp_path):
    """Hermes saves `--env NAME=VALUE` stripped: an `--env` value of the user's ending in
    whitespace was saved cut, and setup then reported Hermes' save as failed though it had
    written the file. Now the profile fails first, naming the variable (never its value)."""
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    env = harness_env(sandbox, tmp_path, hermes=hermes)
    root = sandbox.hermes_home
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("model: of-the-user\n")
    out = sandbox.kint("setup", "hermes", "--env", "MY_PADDED=tok-of-the-user \n",
                       env={"PATH": env["PATH"]}, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines()[:2] == [
        "hermes[default]: failed: `hermes mcp add` drops the whitespace at the end of an "
        "--env value, and yours end in some (MY_PADDED) [BAD_REQUEST]",
        "  hermes[default]: hint: give them without it, then run `kint setup hermes` again"]
    assert "tok-of-the-user" not in out.stdout + out.stderr
    assert (root / "config.yaml").read_text() == "model: of-the-user\n"
    assert not list(root.glob("config.yaml.bak-*"))
