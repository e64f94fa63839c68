"""Facts of kint v0.3.0's getting-started pages and its pages for agents and on Sibyl
(01-introduction.md, 02-quickstart.md, 03-new-machine.md, 14-agents.md, 15-sibyl.md) that
no other test pinned: how `kint status` prints the cap, the refusal of a command with no
owner to act for, a derive signature given on argv, the connect lines of a recovery code, a
deletion replayed in a tier with no SDK delete, and `kint setup claude` beside Sibyl's own
server. None needs the chain: the command lines are refused before any worker is asked,
and setup runs against a stand-in Claude Code CLI."""

from __future__ import annotations

import json
import sys

import click
from click.testing import CliRunner

from chain_machines import make_session_key
from kint import render_pull, render_space

SIGNATURE = "0x" + "ab" * 65
OWNER = "0x000000000000000000000000000000000000dEaD"


def test_cap_sizes_print_in_kb_below_one_mib_and_in_mb_from_it():
    # 15-sibyl.md, "One client, one cap": KB with one decimal below 1 MiB, MB with two
    # decimals from 1 MiB up; the cap itself reads `5.00 MB` (02-quickstart.md, "Check it").
    assert [render_space.cap_size(n) for n in (0, 512, 40_960, 1048575, 1048576, 5242880)] == [
        "0.0 KB", "0.5 KB", "40.0 KB", "1024.0 KB", "1.00 MB", "5.00 MB"]
    assert render_space.cap_lines({"sibyl_bytes": 2_621_440, "kint_bytes": 20_480,
                             "volunteered_total": 2_641_920, "cap_bytes": 5_242_880}) == [
        "cap accounting (the same 5 MiB free cap Sibyl enforces):",
        "  sibyl stores      2.50 MB",
        "  kint state        20.0 KB   (mirror, epoch cache, keys; volunteered)",
        "  enforced total    2.52 MB of 5.00 MB"]


def test_the_cap_block_is_the_last_four_lines_of_status():
    # 15-sibyl.md, "One client, one cap": "The last four lines of `kint status`" are the
    # cap block; kint's own worker line comes before it.
    cap = {"sibyl_bytes": 4096, "kint_bytes": 8192, "volunteered_total": 12288,
           "cap_bytes": 5242880}
    text = render_space.space_status_text({
        "tenant": "t", "space": "ab" * 8, "label": "t", "kint_home": "/k",
        "store": {"path": "/s/memory.db", "exists": True, "size_bytes": 4096},
        "rows": {"entity": 1}, "files": {}, "worker": {"pid": 7, "uptime_s": 3},
        "cap": cap, "held": {"message": "refusing to anchor: x", "reason": "watcher"}})
    lines = text.splitlines()
    assert lines[-4:] == render_space.cap_lines(cap), text
    assert lines[-5].startswith("worker:  pid 7, up "), text
    assert lines[0] == f"tenant t  space {'ab' * 8}  store /s/memory.db", text


def test_a_recovery_code_connect_says_no_key_tag_and_where_the_key_came_from():
    # 03-new-machine.md, "The recovery code": connect reports `key tag none` and `data key
    # from recovery code` (the worker's answer for it: test_chain_e2e.py).
    from kint.commands.connect import print_connected

    @click.command()
    def show():
        print_connected({"owner": OWNER, "space": "ab" * 8, "key_tag": None,
                         "source": "recovery code", "session": "0x" + "12" * 20})

    out = CliRunner().invoke(show, [])
    assert out.output.splitlines() == [
        f"connected: owner {OWNER}",
        f"space {'ab' * 8}  key tag none  data key from recovery code",
        f"session key: 0x{'12' * 20}"], out.output


def test_a_connect_without_its_signature_is_refused_in_v030s_words(sandbox):
    # 14-agents.md, "Common errors and fixes": `kint: give the derive signature with
    # --signature - (stdin) or --signature-file PATH; never on argv`, a `kint:` error (exit
    # 2), for an EOA connect given no signature; 09-cli.md takes any other value of
    # --signature as a path, so one that names no file is the same mistake.
    for given in (("--signature", SIGNATURE), ()):
        out = sandbox.kint("connect", "--owner", OWNER, *given)
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines()[0] == (
            "kint: error: give the derive signature with --signature - (stdin) or "
            "--signature-file PATH; never on argv [BAD_REQUEST]"), out.stderr
        assert "ab" * 65 not in out.stdout + out.stderr


def test_with_no_owner_known_authorize_refuses_in_v030s_words(sandbox):
    # 14-agents.md, "Common errors and fixes": `kint: no owner known on this machine: pass
    # --owner 0x... or run kint connect`, exit 2 (02-quickstart.md, step 4: authorize needs
    # an owner from `kint connect` or `--owner`).
    # The key written as `session-key create` writes it, at a test's scrypt cost
    # (chain_machines.make_session_key; the command itself: test_authorize_cli.py).
    make_session_key(sandbox)
    for lane in ("payload", "direct"):
        out = sandbox.kint("authorize", lane)
        assert out.returncode == 2, (lane, out.stdout, out.stderr)
        assert out.stderr.splitlines()[0] == (
            "kint: error: no owner known on this machine: pass --owner 0x... or run kint "
            "connect [NOT_CONNECTED]"), out.stderr


def test_a_deletion_outside_the_entity_tier_is_a_warning_naming_the_missing_sdk_delete():
    # 03-new-machine.md, "Replay through Sibyl's write methods" (and 15-sibyl.md, "The four
    # write methods"): only entities have an SDK delete (`delete_entity`); a deletion in
    # another tier is reported as `no SDK delete for this tier`, deletions before rows.
    from contextlib import nullcontext
    from types import SimpleNamespace

    from kint.epochs.plaintext import Plaintext
    from kint.rows.canon import canonical_id
    from kint.tenant_worker.replay import replay

    calls: list[tuple] = []
    client = SimpleNamespace(delete_entity=lambda *a: calls.append(("delete_entity", *a)))
    plaintext = Plaintext(tenant="t", space="0" * 64, seq=2, prev="1" * 64, rows=(),
                          deleted=(("state", None, "plan"), ("entity", "rules", "gone")),
                          rows_root="2" * 64, n_rows=0, created_at="2026-12-05T00:00:00Z")
    present = {canonical_id("state", None, "plan"): object(),
               canonical_id("entity", "rules", "gone"): object()}
    written: dict[str, int] = {}
    # The space's context, as far as a replay reads it: its Sibyl client, and the block
    # that keeps it open (no discard meanwhile: nothing to wait for here).
    space = SimpleNamespace(client=lambda: client, using_client=nullcontext)
    warnings = replay(space, None, plaintext, present, written)
    assert calls == [("delete_entity", "rules", "gone")]
    assert len(warnings) == 1 and warnings[0].startswith("epoch 2: state plan: "), warnings
    assert "no SDK delete for this tier" in warnings[0], warnings
    assert canonical_id("state", None, "plan") in present  # it stays in the store


STAND_IN_CLAUDE = """\
#!{python}
# A stand-in for Claude Code's CLI: `claude mcp add-json --scope user NAME -` (the JSON on
# stdin, as setup gives it) and `claude mcp remove --scope user NAME` edit mcpServers in
# ~/.claude.json.
import json, os, sys
from pathlib import Path
path = Path(os.environ["HOME"]) / ".claude.json"
data = json.loads(path.read_text()) if path.exists() else {{}}
servers = data.setdefault("mcpServers", {{}})
if sys.argv[1:3] == ["mcp", "add-json"]:
    servers[sys.argv[5]] = json.loads(sys.stdin.read() if sys.argv[6] == "-" else sys.argv[6])
elif sys.argv[1:3] == ["mcp", "remove"]:
    servers.pop(sys.argv[-1], None)
path.write_text(json.dumps(data))
"""


def test_setup_claude_leaves_sibyls_own_server_and_says_how_to_remove_it(sandbox, tmp_path):
    # 02-quickstart.md, step 5, and 15-sibyl.md, "kint-server is their server plus six
    # tools": setup leaves a sibyl-memory-mcp registration alone and, for Claude Code, says
    # to run `claude mcp remove -s user sibyl-memory` (one store, one server).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(STAND_IN_CLAUDE.format(python=sys.executable))
    (bin_dir / "claude").chmod(0o755)
    sibyls = {"type": "stdio", "command": "sibyl-memory-mcp", "args": [], "env": {}}
    config = sandbox.home / ".claude.json"
    config.write_text(json.dumps({"mcpServers": {"sibyl-memory": sibyls}}))
    out = sandbox.kint("setup", "claude", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "claude: registered kint (user scope)", lines
    assert lines[1] == ("  claude: `claude mcp remove -s user sibyl-memory` if Sibyl's own "
                        "server is also registered (one store, one server)"), lines
    servers = json.loads(config.read_text())["mcpServers"]
    assert servers["sibyl-memory"] == sibyls and "kint" in servers


def test_memory_push_without_the_data_key_answers_key_expired_in_v030s_words():
    # 14-agents.md, "Common errors and fixes": `KEY_EXPIRED`: `the data key on this machine
    # has expired or is missing`; the worker's own words (which of the two, which space)
    # follow, and the hint is still the human's `kint connect`.
    from kint.agent_server import results
    from kint.client import KintError

    for said in ("the cached data key of space ab12 expired at 2026-12-05 06:00 UTC: nothing "
                 "was dropped; run kint connect again",
                 "no data key on this machine: run `kint connect` for space ab12 first"):
        mapped = results.push_error(KintError("NO_DATA_KEY", said, "run `kint connect`"),
                                    lambda: True)
        assert (mapped.code, mapped.message, mapped.hint) == (
            "KEY_EXPIRED", f"the data key on this machine has expired or is missing: {said}",
            "run `kint connect`")


def test_kint_pull_prints_skipped_and_closed_epochs_last_and_indented():
    # 03-new-machine.md, "What it prints": the summary and the cold start's line, and
    # "after that" one SKIPPED line per gap and one CLOSED line per epoch under a retired
    # key, indented two spaces as "Gaps" and "Epochs sealed under a retired key" show them.
    digest = "ab" * 32
    result = {
        "applied": [3], "backups": [], "warnings": [], "gap": [], "rows_total": 4,
        "rpcs_agreed": True, "message": "restored 1 epoch(s), 4 rows; head seq 3 at block 60; "
                                        "store root matches the anchored root",
        "skipped": [{"seq": 2, "block": 50, "reason": "not a kint epoch", "superseded_by": 3}],
        "closed": [{"seq": 1, "block": 40, "reason": "sealed under a data key this machine "
                                                     "does not hold (rotated)"}],
        "applied_epochs": [{"seq": 3, "block": 60, "rows": 4, "deletions": 0}],
        "chain_head": {"seq": 3, "block": 60, "digest": digest},
    }
    assert render_pull.pull_output_lines(result) == [
        "pull: cold start, both RPCs agree: head seq 3, digest abababababababab, block 60",
        "pull: applied epoch 3 (4 rows, 0 deletions) from block 60",
        "restored 1 epoch(s), 4 rows; head seq 3 at block 60; store root matches the anchored "
        "root",
        "cold start: two RPCs agreed on the head: True",
        "  SKIPPED epoch 2 block 50: not a kint epoch (snapshot epoch 3 carries the whole "
        "state, the pull carried on)",
        "  CLOSED epoch 1 block 40: sealed under a data key this machine does not hold "
        "(rotated)",
    ]


def test_the_exit_statuses_scripts_read_are_v030s():
    # 02-quickstart.md, "The first push": 3 for a missing key, 4 when the chain moved, 5 for
    # other refusals; 03-new-machine.md, "What it prints" and "One command: kint join": pull
    # and join exit 4 for a fork, 6 for a freshness refusal, 5 for any other pull refusal (a
    # missing data key included); 14-agents.md: 3 for a session key that cannot be loaded.
    from kint.commands.exit_codes import exit_code_for

    for command in ("push", "compact", "rekey"):
        assert [exit_code_for(command, code) for code in (
            "NO_DATA_KEY", "NO_SESSION_KEY", "CHAIN_MOVED", "GAP", "NOT_CONNECTED")] == [
            3, 3, 4, 5, 5], command
    for command in ("pull", "join"):
        assert [exit_code_for(command, code) for code in (
            "FORK", "STALE_RPC", "NO_DATA_KEY", "GAP", "NO_SESSION_KEY")] == [
            4, 6, 5, 5, 3], command
