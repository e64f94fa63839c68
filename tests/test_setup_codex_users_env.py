"""`kint setup codex` keeps the variables of the user's own in kint's table (`env` values
and `env_vars` names that are not kint settings), which it used to replace with kint's
alone without a word; kint's settings there stay setup's, and PYTHONPATH stays out, each
value of the user's it replaces or drops named (never shown), where it said nothing."""

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
        'PYTHONPATH = "/somewhere"\nKINT_KEY_TTL = "30d"\n'
        f'SIBYL_MEMORY_DB = "{sandbox.sibyl_db}"\nKINT_TENANT = "old-tenant"\n')
    out = setup(sandbox, "codex", "--env", "KINT_TENANT=new-tenant")
    assert out.returncode == 0, out.stdout + out.stderr
    [copy] = config.parent.glob("config.toml.bak-*")
    keep = "(give yours with --env {}=... to keep it)"
    assert out.stdout.splitlines() == [  # the same store, and the --env given now: no word
        f"codex: wrote [mcp_servers.kint] to {config}", f"  codex: backup {copy}",
        f"  codex: replaced your KINT_HOME=... in kint's entry with kint's "
        f"{keep.format('KINT_HOME')}",
        "  codex: removed your PYTHONPATH=... from kint's entry: setup keeps PYTHONPATH out "
        "of kint-server",
        f"  codex: removed your KINT_KEY_TTL=... from kint's entry, where kint's settings are "
        f"setup's {keep.format('KINT_KEY_TTL')}"]
    kint = tomllib.loads(config.read_text())["mcp_servers"]["kint"]
    assert kint["command"] == SERVER
    assert kint["env"] == {"MY_TOOL_HOME": THEIRS, "KINT_HOME": str(sandbox.kint_home),
                           "SIBYL_MEMORY_DB": str(sandbox.sibyl_db),
                           "KINT_TENANT": "new-tenant"}
    assert kint["env_vars"][-1] == "MY_PROXY_NAME" and "KINT_KEY_TTL" in kint["env_vars"]
    assert not {"PYTHONPATH", "KINT_OWNER_KEY"} & set(kint["env_vars"])
    again = setup(sandbox, "codex", "--env", "KINT_TENANT=new-tenant")
    assert again.stdout.splitlines() == ["codex: already configured"]
