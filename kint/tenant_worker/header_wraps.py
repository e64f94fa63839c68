"""The wraps this machine keeps take in the keys another machine added (05-keys.md, "One
data key, many wraps": a key added with `kint connect --add-passphrase` opens the same data
key without the wallet, and every epoch pushed after that carries it).

A push's header carries this machine's wraps file. A machine that connected before another
one added a key would otherwise push that key back out of the header, and the passphrase
that opened the vault an epoch ago would no longer open it at the head. So a pull merges
into the wraps file every wrap that an applied epoch's header carries under the data key
the file holds.

The merge only adds, by `kek_tag`: a key leaves a vault only with a rotation (`kint rekey`),
which changes the data key, and a header sealed under another data key than the file's is
left alone. A header's wraps are not under the epoch's AES-GCM tag; they are taken on the
footing connect takes a head header's on: the epoch opened under this data key, so whoever
wrote it held that key already.

The merge stops at the most wraps one header can carry (its count is one byte, v0.3.0's
06-epochs.md, header layout): the file is what the next push puts in its header, so a file
past that would make every push fail. Wraps past the cap are left out with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kint.custody.wraps import read_wraps, write_wraps
from kint.epochs.envelope import MAX_WRAPS, Header
from kint.tenant_worker.enrolment import save_enrolment
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.state_health import disk_full

log = logging.getLogger("kint.worker")


def take_in_header_wraps(ctx: SpaceContext, headers: Iterable[Header]) -> int:
    """Add to this machine's wraps file the wraps `headers` carry that it lacks, from the
    headers sealed under the data key the file holds, in header order, up to MAX_WRAPS in
    the file; returns how many.
    The enrolment's list of key tags follows. A full disk leaves both as they were (the
    next pull tries again); nothing else is swallowed."""
    cfg = ctx.config
    local = read_wraps(cfg.home, cfg.space_id)
    if local is None:
        return 0
    held = {wrap.tag for wrap in local.wraps}
    added = []
    for header in headers:
        if header.dek_id != local.dek_id:
            continue
        for wrap in header.wraps:
            if wrap.tag not in held:
                held.add(wrap.tag)
                added.append(wrap)
    room = max(MAX_WRAPS - len(local.wraps), 0)
    if len(added) > room:
        left_out = added[room:]
        added = added[:room]
        log.warning("space %s: %d key wrap(s) another machine added are not kept (tags %s): "
                    "one epoch header carries at most %d wraps and this machine's would pass "
                    "that, so its pushes would fail; the epochs this machine pushes will not "
                    "carry those keys", cfg.space16, len(left_out),
                    ", ".join(wrap.tag.hex()[:8] for wrap in left_out), MAX_WRAPS)
    if not added:
        return 0
    wraps = local.wraps + tuple(added)
    try:
        write_wraps(cfg.home, cfg.space_id, local.dek_id, wraps)
        enrolment = ctx.enrolment()
        if enrolment is not None:
            enrolment.key_tags = [wrap.tag.hex() for wrap in wraps]
            save_enrolment(ctx.state.files["enrol"], enrolment)
    except OSError as err:
        if not disk_full(err):
            raise
        log.warning("space %s: the disk is full; the key wrap(s) another machine added are "
                    "kept at the next pull", cfg.space16)
        return 0
    log.info("space %s: keeping %d key wrap(s) another machine added (tags %s)", cfg.space16,
             len(added), ", ".join(wrap.tag.hex()[:8] for wrap in added))
    return len(added)
