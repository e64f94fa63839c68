"""How far this machine got with a space, read from its state files in the CLI process:
the highest epoch its mirror or watermark holds (kint.commands.enrolled_contract's refusal
of another contract, kint.commands.owner_flag's hint for another owner's `--owner`).

A module of its own, apart from the contract check, because the owner hint needs only
this: the contract check's imports (kint.chain.config, eth_utils, the devchain's helpers)
and the conversion of the previous layout (kint.tenant_worker.state_upgrade, the epoch
envelope's cryptography) were a refused `kint push --owner OTHER`'s largest cost. The
conversion's parser and the refusal's error helper load only when a file asks for them.
See kint.commands.enrolled_contract for why the files are read without converting them.
"""

from __future__ import annotations

from pathlib import Path

from kint.commands.common import refuse
from kint.paths import space_files
from kint.tenant_worker.mirror_file import parse_mirror, parse_watermark
from kint.tenant_worker.state_format import (PREVIOUS_VERSION, STATE_VERSION,
                                             CorruptStateFile, load_json, parse_json,
                                             previous_mirror, read_bytes)


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
        from kint.tenant_worker.state_health import corrupt_error

        found = corrupt_error(unread)
        refuse(found.code, found.message, found.hint)
    return seen


def _previous_mirror_seq(path: Path, space_id: str) -> int:
    """The head seq of a mirror in the previous layout (`mirror-<space16>.json`), checked as
    far as its head, which is all this refusal reads of it."""
    from kint.tenant_worker.state_upgrade import parse_previous_head

    return parse_previous_head(path, load_json(path), space_id)[0].seq
