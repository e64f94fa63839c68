"""`kint setup codex` keeps the variables of the user's own in kint's table (`env` values
and `env_vars` names that are not kint settings), which it used to replace with kint's
alone without a word; kint's settings there stay setup's, and PYTHONPATH stays out."""

from __future__ import annotations

import tomllib

from test_setup import SERVER, setup

THEIRS = "/srv/of-the-user-7f3a"


def test_codex_keeps_the_users_variables_in_kints_table(sandbox):
    config = sandbox.home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[mcp_servers.kint]\ncommand = "/old/venv/bin/kint-server"\n'
        'env_vars = ["MY_PROXY_NAME", "PYTHONPATH", "KINT_OWNER_KEY"]\n\n'
        f'[mcp_servers.kint.env]\nMY_TOOL_HOME = "{THEIRS}"\nKINT_HOME = "/old/kint-home"\n'
        'PYTHONPATH = "/somewhere"\nKINT_KEY_TTL = "30d"\n')
    out = setup(sandbox, "codex")
    assert out.returncode == 0, out.stdout + out.stderr
    kint = tomllib.loads(config.read_text())["mcp_servers"]["kint"]
    assert kint["command"] == SERVER
    assert kint["env"] == {"MY_TOOL_HOME": THEIRS, "KINT_HOME": str(sandbox.kint_home),
                           "SIBYL_MEMORY_DB": str(sandbox.sibyl_db)}
    assert kint["env_vars"][-1] == "MY_PROXY_NAME" and "KINT_KEY_TTL" in kint["env_vars"]
    assert not {"PYTHONPATH", "KINT_OWNER_KEY"} & set(kint["env_vars"])
    again = setup(sandbox, "codex")
    assert again.stdout.splitlines() == ["codex: already configured"]
