"""A file a process leaves its successor (a supervisor's succession record, a worker's
session handoff) is read once: removed whether it reads or not, and one that does not
read is said in its reader's words and taken as none (kint/taken_once.py)."""

from __future__ import annotations

from kint.taken_once import take_once


def _taken(path, said):
    def read(data):
        if data.get("v") != 1:
            raise ValueError(f"version {data.get('v')!r}")
        return data["what"]

    return take_once(path, read, (ValueError, KeyError), said.append)


def test_a_handed_file_is_taken_once_whatever_it_holds(tmp_path):
    path, said = tmp_path / "handed.json", []
    assert _taken(path, said) is None and said == []  # none left: nothing said
    for text, why in [('{"v": 1, "what": "sessions"}', None),
                      ('{"v": 1, "wh', "is unreadable ("),
                      ('{"v": 2, "what": "sessions"}', "does not hold what it must (version 2)"),
                      ('{"v": 1}', "does not hold what it must ('what')")]:
        path.write_text(text)
        got = _taken(path, said)
        assert not path.exists(), text
        if why is None:
            assert got == "sessions" and said == [], said
        else:
            assert got is None and said.pop().startswith(why), (text, said)
    path.mkdir()  # there, and cannot be read or removed as a file: said, not raised
    assert _taken(path, said) is None
    assert said.pop().endswith(", and cannot be removed (Is a directory)")
