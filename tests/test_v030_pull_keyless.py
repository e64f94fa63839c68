"""A pull needs the cached data key, not the session key file: kint v0.3.0's pull sends no
transaction and needs "a cached data key" (09-cli.md, "What each command touches"), and
"restoring and reading never send a transaction" (03-new-machine.md). Its exit table's
"`pull` too, for the session key" (exit 3) is the local passphrase that loads the session
key, which also seals the key cache (05-keys.md): tests/test_v030_lines.py holds pull to
that. Here the keystore alone is gone, with no interrupted push's journal waiting: the pull
restores and exits 0, and the push after it, which signs with the key, exits 3. With such a
journal the pull settles it first, which needs the key, and exits 3
(tests/test_pending_resend_settled.py).

Through the real CLI on the session's devchain.
"""

from __future__ import annotations

import json

from chain_machines import anchored, new_machine, ok
from conftest import write_rules


def test_a_pull_without_the_session_key_file_restores_and_the_push_exits_3(tmp_path,
                                                                           chain_home):
    with anchored(new_machine(tmp_path / "m", chain_home), first="the first rule") as sb:
        # No restart: the worker looks for the file at every use (session_account).
        keystore = sb.kint_home / "session.key"
        keystore.rename(keystore.with_name("session.key.aside"))

        pulled = json.loads(ok(sb.kint("pull", "--discard-local", "--json")).stdout)
        assert pulled["applied"] and pulled["store_root_matches"] is True, pulled
        assert pulled["head"]["seq"] == 1, pulled

        write_rules(sb.sibyl_db, sb.tenant, first="the rule, changed")
        out = sb.kint("push")
        assert out.returncode == 3, (out.stdout, out.stderr)
        assert out.stderr.splitlines()[0].endswith("[NO_SESSION_KEY]"), out.stderr
        assert not keystore.exists()  # nothing made one behind the user's back
