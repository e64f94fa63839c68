"""`kint authorize` and `kint session-key show` on another contract than the space's read how
far this machine got with the space from its mirror and watermark, without a supervisor
and without converting them (kint.commands.enrolled_contract). A KINT_HOME still in the
previous state layout (its mirror `mirror-<space16>.json`, its watermark at version 1, both
converted by the worker's first read: kint.tenant_worker.state_upgrade) is read in that
layout (review18): its watermark was refused as CORRUPT_STATE, with the advice to move a
good file aside, and its old mirror's epochs were not counted at all."""

from __future__ import annotations

import json

import pytest

from kint.commands.seen_here import seen_on_disk

SPACE_ID = "ab" * 32
DIGEST = "cd" * 32


def write_previous_layout(home, *, mirror_seq: int | None, watermark_seq: int | None) -> None:
    space16 = SPACE_ID[:16]
    if mirror_seq is not None:
        (home / f"mirror-{space16}.json").write_text(json.dumps({
            "v": 1, "space": SPACE_ID, "head": {"seq": mirror_seq, "digest": DIGEST,
                                                "block": 10},
            "anchored_root": None, "skipped": [], "rows": []}))
    if watermark_seq is not None:
        (home / f"watermark-{space16}.json").write_text(json.dumps({
            "v": 1, "seq": watermark_seq, "digest": DIGEST, "block": 10}))


@pytest.mark.parametrize("mirror_seq, watermark_seq, seen", [(3, 3, 3), (4, 3, 4), (2, None, 2)])
def test_a_home_in_the_previous_layout_says_how_far_this_machine_got(tmp_path, mirror_seq,
                                                                     watermark_seq, seen):
    write_previous_layout(tmp_path, mirror_seq=mirror_seq, watermark_seq=watermark_seq)
    assert seen_on_disk(tmp_path, SPACE_ID) == seen


def test_a_version_1_watermark_without_the_old_mirror_is_still_refused(tmp_path, capsys):
    # Not the previous layout: the worker refuses such a watermark too (state_format
    # `require_version`), and with nothing else to say how far this machine got, so does this.
    write_previous_layout(tmp_path, mirror_seq=None, watermark_seq=3)
    with pytest.raises(SystemExit) as raised:
        seen_on_disk(tmp_path, SPACE_ID)
    assert raised.value.code == 2
    assert "[CORRUPT_STATE]" in capsys.readouterr().err


def test_an_old_mirror_that_does_not_read_is_named(tmp_path, capsys):
    (tmp_path / f"mirror-{SPACE_ID[:16]}.json").write_text("garbled")
    with pytest.raises(SystemExit):
        seen_on_disk(tmp_path, SPACE_ID)
    err = capsys.readouterr().err
    assert f"mirror-{SPACE_ID[:16]}.json " in err and "[CORRUPT_STATE]" in err, err
