"""Lines the docs quote word for word are the lines the code makes.

README.md and docs/ quote several of kint's outputs and refusals exactly (most of them kint
v0.3.0's words): the authorize page's two lines, the no-owner and no-signature refusals,
memory_push's KEY_EXPIRED message, status's cap block, pull's unapplied-epoch lines, the
closed-store refusal, pull's refusal of rows with no mirror, `kint supervisor status`'s
exit status, connect's and pull's progress lines, the BUSY that names the op running, and a
second `kint setup`'s refusal. A change of wording in the code would leave the docs quoting
a line no kint prints; each test here makes the line from the code, with the docs'
placeholders for its variable parts, and looks for it in the page that quotes it (a line
made deep in the worker is looked for among the strings its module writes). Whitespace is
compared loosely, since the docs wrap a quote across lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _flat(text: str) -> str:
    """`text` with every run of whitespace as one space (a quote wrapped across lines)."""
    return re.sub(r"\s+", " ", text)


def _quoted_in(page: Path, line: str) -> bool:
    return _flat(line) in _flat(page.read_text())


@pytest.mark.parametrize("page", ["quickstart.md", "authorize.md", "commands.md"])
def test_the_authorize_page_lines_for_a_base_account_are_the_ones_printed(page):
    from kint.authorize_page.handler import PATH_PREFIX
    from kint.commands.authorize_page_lane import _open_page_line

    url = f"  http://127.0.0.1:<port>{PATH_PREFIX}<64 hex>"
    block = _open_page_line("0x<owner>", "smart") + "\n" + url + "\n"
    assert block in (DOCS / page).read_text(), f"docs/{page} quotes another page block"


@pytest.mark.parametrize("page", ["authorize.md", "commands.md"])
def test_the_authorize_page_line_for_any_other_owner_is_the_one_printed(page):
    from kint.commands.authorize_page_lane import _open_page_line

    assert _quoted_in(DOCS / page, _open_page_line("0x<owner>", None))


def test_the_no_owner_and_no_signature_refusals_are_quoted_as_made():
    from kint.commands.connect import NO_SIGNATURE
    from kint.commands.owner_address import NO_OWNER

    assert _quoted_in(DOCS / "commands.md", f"`{NO_OWNER}`")
    assert _quoted_in(DOCS / "commands.md", f"`{NO_SIGNATURE}`")


def test_memory_push_key_expired_message_is_quoted_as_made():
    from kint.agent_server.results import KEY_GONE

    assert _quoted_in(DOCS / "harnesses.md", f"`{KEY_GONE}`")


def test_status_cap_block_is_quoted_as_made():
    from kint.render_space import cap_lines, cap_size

    lines = cap_lines({"sibyl_bytes": 0, "kint_bytes": 0, "volunteered_total": 0,
                       "cap_bytes": 5 * 1048576})
    commands = DOCS / "commands.md"
    assert _quoted_in(commands, f"`{lines[0]}`")
    assert lines[-1].endswith(f" of {cap_size(5 * 1048576)}") and \
        _quoted_in(commands, f"of {cap_size(5 * 1048576)}`")
    for label in ("sibyl stores", "kint state", "enforced total"):
        assert any(line.strip().startswith(label) for line in lines[1:]), label
        assert _quoted_in(commands, label)
    # the sizes' units, as the section gives them: KB to one decimal, MB to two
    assert cap_size(1536) == "1.5 KB" and cap_size(3 * 1048576) == "3.00 MB"
    assert _quoted_in(commands, "in KB to one decimal below 1 MiB and in MB to two from 1 MiB up")


def test_pull_prints_unapplied_epochs_last_and_indented_as_commands_md_says():
    from kint.render_pull import pull_output_lines

    summary = "restored 1 epoch(s), 2 rows; head seq 1 at block 7"
    result = {"applied_epochs": [{"seq": 3, "block": 7, "rows": 2, "deletions": 0}],
              "skipped": [{"seq": 2, "block": 6, "reason": "<reason>"}],
              "closed": [{"seq": 1, "block": 5, "reason": "<reason>"}],
              "rpcs_agreed": False, "message": summary}
    assert pull_output_lines(result)[-3:] == [summary,
                                              "  SKIPPED epoch 2 block 6: <reason>",
                                              "  CLOSED epoch 1 block 5: <reason>"]
    commands = DOCS / "commands.md"
    assert _quoted_in(commands, "`  SKIPPED epoch N block B: <reason>`")
    assert _quoted_in(commands, "`  CLOSED epoch N block B: <reason>`")


def test_a_store_closed_to_this_user_is_quoted_as_refused():
    from kint.store_denied import denied_message

    said = denied_message("PATH", "Permission denied")
    generic = re.sub(r"\(uid \d+\)", "(uid N)", said)
    assert _quoted_in(DOCS / "faults.md", f'"{generic}"')
    prefix = generic.split(": Permission denied")[0]
    assert _quoted_in(DOCS / "commands.md", f"`{prefix}: ...; nothing was moved`")


def test_the_pull_over_rows_without_a_mirror_is_quoted_as_refused():
    from kint.tenant_worker.local_state import NO_MIRROR_FORK

    said = NO_MIRROR_FORK.format(rows="N", tenant="T")
    assert _quoted_in(DOCS / "commands.md", f"`{said}`")


def test_supervisor_status_exit_codes_are_said_in_readme_as_help_says_them():
    """README gives `kint supervisor status`'s exit status in --help's words (one source:
    kint.commands.supervisor_status.HELP, beside the `run` that returns it)."""
    from kint.commands.supervisor_status import HELP

    exits = HELP.split("\n\n", 1)[1]
    assert exits.startswith("Exit code 0 ")
    assert _quoted_in(ROOT / "README.md", exits)


def _patterns(module: Path) -> list[re.Pattern[str]]:
    """Every string `module` writes out, as a pattern: a plain literal as itself, an
    f-string with each `{...}` as any text (the docs put a placeholder there)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.JoinedStr):
            found.append("".join(re.escape(part.value) if isinstance(part, ast.Constant)
                                 else ".+?" for part in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(re.escape(node.value))
    return [re.compile(pattern) for pattern in found]


def _made_in(module: str, line: str, prefix: str = "") -> bool:
    """Whether kint/<module> writes `line` (its `prefix` added by the code that shows it)."""
    assert line.startswith(prefix), line
    said = line[len(prefix):]
    return any(p.fullmatch(said) for p in _patterns(ROOT / "kint" / module))


def test_connect_and_pull_progress_lines_are_quoted_as_made():
    """The lines docs/commands.md says connect and pull show while they wait, and the BUSY
    that names the op running, each a string the worker's code writes."""
    text = _flat((DOCS / "commands.md").read_text())
    connect = re.findall(r"`(connect: [^`]+)`", text)
    assert len(connect) == 5, connect
    for line in connect:  # connect's steps, and the stretches of the caller's secrets
        assert any(_made_in(f"tenant_worker/{module}.py", line, "connect: ")
                   for module in ("connect", "connect_key")), line
    assert _made_in("tenant_worker/pull.py", "pull: reading the chain head")
    assert "`pull: reading the chain head`" in text
    cold = "pull: cold start, asking a second RPC for the head"
    assert _made_in("tenant_worker/cold_start.py", cold) and f"`{cold}`" in text
    busy = "a connect is already running for this space (for 4 s)"
    assert _made_in("tenant_worker/head_lock.py", busy) and f"`{busy}`" in text


def test_a_second_setup_is_refused_as_harnesses_md_quotes_it(tmp_path):
    """docs/harnesses.md, "Two setups at once": the refusal a setup meets while another holds
    `setup.lock`, made here by holding the lock on another open file (flock locks by open
    file, so one process can hold it against itself)."""
    import fcntl
    import os

    from kint.harnesses.failures import SetupError
    from kint.harnesses.setup_lock import LOCK_NAME, setup_lock
    from kint.render import refusal_text

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    held = os.open(home / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(held, b"4242")
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SetupError) as refused:
            with setup_lock(home):
                pass
    finally:
        os.close(held)
    err = refused.value
    said = refusal_text(err.code, err.message, err.hint).replace(str(home), "/home/me/.kint")
    assert _quoted_in(DOCS / "harnesses.md", said), said
