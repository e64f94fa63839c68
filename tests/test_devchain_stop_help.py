"""`kint devchain stop --help` says what the stop keeps for the next start, as
docs/commands.md ("kint devchain stop") and the lifecycle module do: the chain's blocks,
transactions and logs and its latest state, not the state at earlier blocks (anvil's
historical states are not dumped). The help said only that "its state stays", which a
user reading a past block after a restart (`cast call --block N`) took for all of it.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import make_sandbox

DOCS = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_stop_help_names_what_a_restart_keeps_as_the_docs_do(tmp_path):
    out = make_sandbox(tmp_path / "machine").kint("devchain", "stop", "--help")
    assert out.returncode == 0, out.stderr
    said = _words(out.stdout)
    kept = "the chain's blocks, transactions and logs, and its latest state, not the state at " \
           "earlier blocks"
    assert kept in said, said
    assert "refused after the next start" in said, said
    section = _words(DOCS.read_text().split("### kint devchain stop")[1].split("###")[0])
    assert kept in section, section  # the docs' words, which the help now carries
