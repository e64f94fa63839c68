"""Facts of kint v0.3.0's getting-started pages and its pages for agents and on Sibyl
(01-introduction.md, 02-quickstart.md, 03-new-machine.md, 14-agents.md, 15-sibyl.md) that
no other test pinned: how `kint status` prints the cap, the refusal of a command with no
owner to act for, a derive signature given on argv, and the connect lines of a recovery
code. Most run no chain; the two command lines are refused before any worker is asked."""

from __future__ import annotations

import click
from click.testing import CliRunner

from kint import render

SIGNATURE = "0x" + "ab" * 65
OWNER = "0x000000000000000000000000000000000000dEaD"


def test_cap_sizes_print_in_kb_below_one_mib_and_in_mb_from_it():
    # 15-sibyl.md, "One client, one cap": KB with one decimal below 1 MiB, MB with two
    # decimals from 1 MiB up; the cap itself reads `5.00 MB` (02-quickstart.md, "Check it").
    assert [render.cap_size(n) for n in (0, 512, 40_960, 1048575, 1048576, 5242880)] == [
        "0.0 KB", "0.5 KB", "40.0 KB", "1024.0 KB", "1.00 MB", "5.00 MB"]
    assert render.cap_lines({"sibyl_bytes": 2_621_440, "kint_bytes": 20_480,
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
    text = render.space_status_text({
        "tenant": "t", "space": "ab" * 8, "label": "t", "kint_home": "/k",
        "store": {"path": "/s/memory.db", "exists": True, "size_bytes": 4096},
        "rows": {"entity": 1}, "files": {}, "worker": {"pid": 7, "uptime_s": 3},
        "cap": cap, "held": {"message": "refusing to anchor: x", "reason": "watcher"}})
    lines = text.splitlines()
    assert lines[-4:] == render.cap_lines(cap), text
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


def test_a_derive_signature_on_argv_is_refused_in_v030s_words_and_not_echoed(sandbox):
    # 14-agents.md, "Common errors and fixes": `kint: give the derive signature with
    # --signature - (stdin) or --signature-file PATH; never on argv`, a `kint:` error (exit
    # 2); kint takes a path there too, and a value that names no file is that mistake.
    out = sandbox.kint("connect", "--owner", OWNER, "--signature", SIGNATURE)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[0] == (
        "kint: error: give the derive signature with --signature - (stdin) or "
        "--signature-file PATH; never on argv [BAD_REQUEST]"), out.stderr
    assert "ab" * 65 not in out.stdout + out.stderr


def test_with_no_owner_known_authorize_refuses_in_v030s_words(sandbox):
    # 14-agents.md, "Common errors and fixes": `kint: no owner known on this machine: pass
    # --owner 0x... or run kint connect`, exit 2 (02-quickstart.md, step 4: authorize needs
    # an owner from `kint connect` or `--owner`).
    sandbox.kint("session-key", "create")
    for lane in ("payload", "direct"):
        out = sandbox.kint("authorize", lane)
        assert out.returncode == 2, (lane, out.stdout, out.stderr)
        assert out.stderr.splitlines()[0] == (
            "kint: error: no owner known on this machine: pass --owner 0x... or run kint "
            "connect [NOT_CONNECTED]"), out.stderr
