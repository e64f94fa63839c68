"""`kint authorize` and `kint session-key show` against the contract the space was connected
on, not whichever EpochAnchor is in force now.

Both act for the owner this machine's enrolment names when no `--owner` is given, and read
or write `sessionKeyExpiry` on the contract the settings name now. A `contract` set in
config.toml, a KINT_CONTRACT in the environment, or a devchain stopped or deployed again
after the connect moved that contract away from the space's: an authorize went to a
contract where the space has no epochs (its pushes still go to, and are refused by, the
old one), and `show` reported the key unauthorized there. So, as every worker command that
reads the space's head refuses (kint/tenant_worker/enrolled_chain.py `other_chain`), these
refuse too, with the same code (CONFIG_INVALID), message and hint, before anything is
signed or sent. An explicit `--owner` that is the space's own owner is refused the same
way: naming it changes nothing of where its epochs are, and v0.3.0's docs (09-cli.md,
"kint authorize") give `--owner` only as who to act for, never as a way past this check. An
authorization ahead of a move is made after `kint connect` moves the space
(kint/tenant_worker/connect_owner.py `moved_from`). Another owner's `--owner` goes on,
unchecked: the enrolment is not about it.

Why the CLI reads the mirror and watermark itself: these commands need no supervisor (see
kint.commands.onchain), and the refusal only wants how far this machine got with the space
on the old contract. They are read without converting an older layout (the worker does that,
under its lock, on its first read: kint.tenant_worker.state_upgrade): a KINT_HOME still in
the previous layout is read in it, its mirror's head under the old name and its watermark
at the old version, as the conversion would carry them over. Such files are not damaged,
and calling them so would send the user to move a good file aside. A file that does not
parse is refused by name when nothing else says how far this machine got.
"""

from __future__ import annotations

from pathlib import Path

from kint.chain.config import ChainConfig
from kint.commands.common import refuse
from kint.paths import space_files
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.enrolment import Enrolment
from kint.tenant_worker.mirror_file import parse_mirror, parse_watermark
from kint.tenant_worker.state_health import corrupt_error
from kint.tenant_worker.state_format import (PREVIOUS_VERSION, STATE_VERSION,
                                             CorruptStateFile, load_json, parse_json,
                                             read_bytes)
from kint.tenant_worker.state_upgrade import parse_previous_head, previous_mirror


def seen_on_disk(home: Path, space_id: str) -> int:
    """The highest epoch of the space this machine has anchored or pulled: its mirror's
    head or its watermark, 0 for none, as the worker's SpaceContext.seen_here counts. A
    file that does not read while the other shows no epoch is refused by name
    (CORRUPT_STATE), never counted as none: it may be the one that held the epochs."""
    files = space_files(home, space_id[:16])
    old_mirror = previous_mirror(home, space_id[:16])
    unconverted = old_mirror.exists()  # the previous layout, until the worker converts it
    seen, unread = 0, None
    try:
        path = files["mirror"]
        seen = parse_mirror(path, read_bytes(path), space_id).head.seq
    except FileNotFoundError:
        pass
    except CorruptStateFile as err:
        unread = err
    if unconverted:
        try:
            seen = max(seen, _previous_mirror_seq(old_mirror, space_id))
        except FileNotFoundError:
            pass
        except CorruptStateFile as err:
            unread = unread or err
    try:
        path = files["watermark"]
        obj = parse_json(path, read_bytes(path))
        if unconverted and isinstance(obj, dict) and obj.get("v") == PREVIOUS_VERSION:
            obj = {**obj, "v": STATE_VERSION}  # as the conversion rewrites it
        seen = max(seen, parse_watermark(path, obj).seq)
    except FileNotFoundError:
        pass
    except CorruptStateFile as err:
        unread = unread or err
    if unread is not None and seen == 0:
        found = corrupt_error(unread)
        refuse(found.code, found.message, found.hint)
    return seen


def _previous_mirror_seq(path: Path, space_id: str) -> int:
    """The head seq of a mirror in the previous layout (`mirror-<space16>.json`), checked as
    far as its head, which is all this refusal reads of it."""
    return parse_previous_head(path, load_json(path), space_id)[0].seq


def check_enrolled_contract(enrolment: Enrolment, chain: ChainConfig, home: Path,
                            owner_given: str | None) -> None:
    """Refuse (exit 2) when the owner is the space's own (from `enrolment`, or given as
    `owner_given`) and `chain` is another chain or contract than the one it was connected
    on; with another owner, say nothing (the enrolment is not about it)."""
    if owner_given is not None and owner_given.lower() != enrolment.owner.lower():
        return
    found = other_chain(enrolment, chain, lambda: seen_on_disk(home, enrolment.space))
    if found is not None:
        refuse(found.code, found.message, found.hint)
