"""OpenClaw: `mcp.servers.kint` in `~/.openclaw/openclaw.json`, written by OpenClaw's own
CLI (`openclaw mcp set kint '<json>'`).

The definition launches `/usr/bin/env -u PYTHONPATH KEY=VALUE ... <kint-server>`: kint's
variables travel in the launch line itself, so they reach the server whatever environment
OpenClaw's runtime gives it, and the shell's PYTHONPATH does not. The file is copied to
`openclaw.json.bak-<unix time>` first; a definition that already is this one is left alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kint.harnesses import (SERVER_NAME, Plan, Report, backed_up, backup, env_command, run_cli,
                            tail, which)

TIMEOUT = 120
# OpenClaw's `string` plugin (a chain poller) prints its own lines on every CLI call, and
# they would crowd out the reason `mcp set` failed (kint v0.3.0 drops them too).
PLUGIN_NOISE = "string-bridge"


def config_path() -> Path:
    return Path.home() / ".openclaw" / "openclaw.json"


def definition(plan: Plan) -> dict[str, Any]:
    return {"command": env_command(),
            "args": ["-u", "PYTHONPATH", *[f"{k}={v}" for k, v in plan.env.items()],
                     str(plan.server)]}


def saved(path: Path) -> Any:
    """The saved definition, when the file is plain JSON (OpenClaw may write JSON5: then
    setup cannot tell and runs `mcp set`, which is idempotent on OpenClaw's side)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data["mcp"]["servers"][SERVER_NAME]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def same(current: Any, wanted: dict[str, Any]) -> bool:
    return isinstance(current, dict) and all(current.get(k) == v for k, v in wanted.items())


def setup(plan: Plan, explicit_target: bool = True) -> list[Report]:
    cli = which("openclaw")
    if cli is None:
        return [Report("openclaw", "skipped", ["openclaw: CLI not found, skipped"])]
    path = config_path()
    wanted = definition(plan)
    if same(saved(path), wanted):
        return [Report("openclaw", "unchanged",
                       ["openclaw: kint already saved, nothing changed"])]
    lines: list[str] = []
    backed_up(lines, "openclaw", backup(path))
    out = run_cli([cli, "mcp", "set", SERVER_NAME, json.dumps(wanted)], timeout=TIMEOUT)
    if out.returncode != 0:
        return [Report("openclaw", "failed",
                       [f"openclaw: failed: `openclaw mcp set` exited {out.returncode}: "
                        f"{tail(out, noise=PLUGIN_NOISE)}", *lines])]
    return [Report("openclaw", "changed",
                   ["openclaw: saved MCP server kint (openclaw mcp set)", *lines])]
