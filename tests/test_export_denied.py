"""`kint export` over a store this user may not open says so (review18, after lane
left18's kint.store_denied): with a folder on its path it may not search, the store read
as absent, and export refused it as `store PATH does not exist` (BAD_REQUEST), sending the
user to check --db. The OS's answer is stood in for, as in tests/test_store_denied.py (the
suite may run as root, whom no mode bit stops)."""

from __future__ import annotations

from click.testing import CliRunner

import kint.store_denied as store_denied
from kint.commands.common import Ctx
from kint.commands.export import export_cmd


def test_export_says_the_store_is_closed_to_this_user(tmp_path, monkeypatch):
    db = str(tmp_path / "closed" / "memory.db")  # its folder unsearchable: reads as absent
    monkeypatch.setattr(store_denied, "_denied_by_os",
                        lambda path: "Permission denied" if path == db else None)
    monkeypatch.setenv("KINT_TENANT", "t")
    out = CliRunner().invoke(export_cmd, [], obj=Ctx(None, db, False))
    assert out.exit_code == 2, out.output
    said = out.stderr if hasattr(out, "stderr") else out.output
    assert f"the store {db} cannot be opened by this user" in said, said
    assert "[SIBYL_ERROR]" in said and "does not exist" not in said, said
    assert f"hint: {store_denied.DENIED_HINT}" in said, said
