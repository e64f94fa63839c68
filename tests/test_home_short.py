"""`kint join`'s header names the store under the user's home as `~/...`, as kint v0.3.0's
own example prints it (03-new-machine.md, "One command: kint join": `store
~/.sibyl-memory/memory.db`); it printed the whole path. Only the text: `--json`'s `store`
stays the path a script opens (tests/test_join.py checks both through the real CLI)."""

from __future__ import annotations

from kint.render import home_short


def test_a_path_under_home_is_shown_from_its_tilde(monkeypatch):
    monkeypatch.setenv("HOME", "/home/me")
    assert home_short("/home/me/.sibyl-memory/memory.db") == "~/.sibyl-memory/memory.db"
    assert home_short("/home/me") == "~"
    # Another user's home that starts with the same letters, or a path elsewhere: as it is.
    assert home_short("/home/meg/memory.db") == "/home/meg/memory.db"
    assert home_short("/srv/memory.db") == "/srv/memory.db"
    # A control character in a path is escaped, never sent to the terminal.
    assert home_short("/home/me/a\nb.db") == "~/a\\nb.db"
