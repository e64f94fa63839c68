"""What settling an interrupted push's journal found (overtaken.py, unauthorized_journal.py),
kept in `settled-<space16>.json` (0600) until a command has said it.

Why a file: the usual settlement is a restarted worker's, at its start
(rekey_settle.settle_at_start). The worker killed mid-push is a crash, which the supervisor
restarts at once, with nobody's command waiting: what the start settlement found was only
logged, and the push, pull, rekey or recovery-code run after it found no journal and said
nothing, the user never told that the push did not land or that its rows wait for a key.
Kept in the worker's memory, it would still be lost whenever the worker exits before that
command: its idle exit (KINT_WORKER_IDLE_SECONDS, 15 minutes), a recycle, `kint supervisor
restart`, an upgrade; the next command is the user's, often later than that.

Every settlement that finds something keeps it here (`keep`), so one cut short after it
(an endpoint failing later in a pull) leaves it for the next command too, and the next
push (compact's too), pull, rekey or recovery-code reads it (`found`) and, once it has
said it, removes it (`said`): said once. Not the store watcher's push nor a closing
kint-server's exit push: nobody reads their refusal, and one attached after a killed push
(the usual case) used the notice up unseen (push.TOLD). A file that does not read is
removed with a line in the log: it only ever repeats what the log already holds. It is
read under the head lock by every push and pull, so never through a link, never blocking
(a FIFO there hung the settlement, and the space, until a writer came), at most MAX_BYTES;
what cannot be removed (a directory standing there) is logged, not raised: raised, it
failed every push, pull, rekey and recovery-code as INTERNAL.

A dropped journal's rows go aside with the store when a `pull --discard-local` moves it
after the settlement kept the notice: the pull names the copy in the kept notice as it
moves it, so one killed before it said the notice does not leave it saying the rows are
still in the store (the restored one, which does not hold them). Named twice: before the
rename, as the copy the store is moving to (`moving_aside`), with the store's identity
(device and inode, which a rename keeps), and after it, as where they are (`moved_aside`).
A read takes the first as where the rows are only once a file of that name is the store
renamed: the name was chosen unused, but a clock stepped back can choose it again for a
later discard that does not rewrite the notice, and that copy holds other rows. A kill
between the rename and the second write said "still in the store".

A notice is the vault's it was found in: it names the owner, chain and contract, and one
read under another enrolment is dropped. Connect moves a space to another owner, chain or
contract while nothing of the old one is seen here and no push journal waits, which the
notice does not count: the new vault's first push was refused with the old vault's words.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import orjson

from kint.paths import atomic_write, read_small_file, settled_notice_path
from kint.protocol import ProtocolError
from kint.protocol.hints import SAID_BY_NEXT
from kint.taken_once import removed
from kint.tenant_worker.overtaken import Overtaken
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.unauthorized_journal import Unauthorized

log = logging.getLogger("kint.worker")

# What settling a push journal found that its caller says: the chain had passed it, or its
# key may not write and it was dropped.
Found = Overtaken | Unauthorized
_KINDS: dict[str, type[Overtaken] | type[Unauthorized]] = {
    "overtaken": Overtaken, "unauthorized": Unauthorized}
# A notice is a few hundred bytes: a file past this is not one, and is not read whole.
MAX_BYTES = 64 * 1024
# What a notice says of the store now (`_as_now`), never kept: stored, a `true` was trusted
# after new rows came, and a kint without the field could not read the notice at all.
NOW_ONLY = frozenset({"anchored_since", "pulled_since"})
# A file whose fields are not a notice's (JSON of another shape).
UNREAD = (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError)


def _path(ctx: SpaceContext) -> Path:
    return settled_notice_path(ctx.config.home, ctx.config.space16)


def vault(ctx: SpaceContext) -> list[str | int] | None:
    """The owner, chain and contract the space is enrolled for (None: not connected): what
    a notice names. Read by the settlement before it can drop the journal (`keep` takes
    it): read after, an enrolment that no longer read failed the settlement that had just
    dropped the journal, CORRUPT_STATE, and what it found was only in the log."""
    enrolment = ctx.enrolment()
    if enrolment is None:
        return None
    return [enrolment.owner.lower(), enrolment.chain_id, enrolment.contract.lower()]


def keep(ctx: SpaceContext, found: Found, vault_read: list[str | int] | None,
         moving_to: str | None = None, moving_id: list[int] | None = None) -> None:
    """Keep what a settlement found until a command says it, naming `vault_read` (`vault`,
    read before the settlement), and `moving_to`, the copy a discarding pull is about to
    move the store to, with the store's `moving_id` (`moving_aside`). A write that fails
    (a full disk) leaves it to the log and to the command that settled, if any."""
    kind = "overtaken" if isinstance(found, Overtaken) else "unauthorized"
    kept = {name: value for name, value in asdict(found).items() if name not in NOW_ONLY}
    moving = {} if moving_to is None else {"moving_to": moving_to, "moving_id": moving_id}
    notice = {"kind": kind, "found": kept, "vault": vault_read, **moving}
    try:
        atomic_write(_path(ctx), orjson.dumps(notice))
    except OSError as err:
        log.warning("space %s: what the settlement found is only in this log: %s",
                    ctx.config.space16, err)


def found(ctx: SpaceContext) -> Found | None:
    """What a settlement found that no command has said yet, or None. One kept under
    another owner, chain or contract than the space's now is dropped; one without them
    (kept before they were written) is taken as the space's."""
    path = _path(ctx)
    held = _held(path)
    if held.unread is not None:
        log.warning("space %s: %s does not read (%s)%s: what it held is in this log",
                    ctx.config.space16, path, held.unread, removed(path) or ", removed")
        return None
    if held.notice is None:
        return None
    if held.elsewhere(ctx):
        log.warning("space %s: %s was kept for another vault (owner, chain id, contract: "
                    "%s) than this space's now; dropped%s", ctx.config.space16, path,
                    held.kept_for, removed(path))
        return None
    return _as_now(ctx, held.notice)


@dataclass(frozen=True)
class _Held:
    """What reading the notice found, for `found` (which removes what it cannot say) and
    `waiting` (which only names it): no file (`notice` and `unread` None), a file that
    does not read (`unread`, why), or the notice and the vault it was kept for."""

    notice: Found | None = None
    kept_for: Any = None
    unread: Exception | None = None

    def elsewhere(self, ctx: SpaceContext) -> bool:
        """Kept for another vault than the space's now (`vault`, which raises when the
        enrolment does not read); one kept before notices named it is the space's."""
        return self.kept_for is not None and self.kept_for != vault(ctx)


def _held(path: Path) -> _Held:
    try:
        notice, kept_for, (moving_to, moving_id) = _read(path)
    except FileNotFoundError:
        return _Held()
    except UNREAD as err:
        return _Held(unread=err)
    if moving_to is not None and notice.moved_to is None and _is_moved(moving_to, moving_id):
        notice = replace(notice, moved_to=moving_to)  # moved, the notice not rewritten
    return _Held(notice, kept_for)


def _identity(path: str) -> list[int] | None:
    """The file's device and inode (the link itself's), which a rename keeps; None when
    nothing is there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _is_moved(copy: str, store_id: Any) -> bool:
    """Whether `copy` is the store a discarding pull named before its rename: the same
    file, not only one by that name. A notice kept without the store's identity (it did
    not read before the rename) takes the name alone."""
    return _identity(copy) == store_id if store_id is not None else os.path.lexists(copy)


def _read(path: Path) -> tuple[Found, Any, tuple[str | None, Any]]:
    """The notice at `path`, the vault it was kept for and the copy a discarding pull was
    moving the store to as it wrote it, with the store's identity (`moving_aside`). Only
    the fields this kint's dataclass knows are taken, `NOW_ONLY` never: a later kint may
    keep more (an earlier one that met a field it did not know removed the notice unsaid),
    and what holds now is `_as_now`'s to say. A copy's path (`moved_to`) that is not a
    string does not read: it was printed as it stood (a dict's repr) by `kint status`, the
    pull and memory_status; nor does a `moving_to` that is not one."""
    data = orjson.loads(read_small_file(path, MAX_BYTES))
    kind = _KINDS[data["kind"]]
    known = {f.name for f in fields(kind)} - NOW_ONLY
    held = {name: value for name, value in data["found"].items() if name in known}
    moved_to = held.get("moved_to")
    moving_to = data.get("moving_to")
    for name, path_said in (("moved_to", moved_to), ("moving_to", moving_to)):
        if path_said is not None and not isinstance(path_said, str):  # said to a user
            raise TypeError(f"{name} is {type(path_said).__name__}, not a path")
    return kind(**held), data.get("vault"), (moving_to, data.get("moving_id"))


def _as_now(ctx: SpaceContext, notice: Found) -> Found:
    """`notice` as it holds now. A dropped journal's rows that the store no longer holds
    unanchored (the watcher's push, which leaves the notice kept, anchored them) are said
    so, not sent to `kint push`, which would find nothing to push. A chain the store has
    since been pulled up to (kint-server's start-up pull, which leaves the notice kept for
    the agent, went on past it) is said so too: the notice is still said, but the push it
    meets is no longer behind for it, where it refused CHAIN_MOVED ("pull first") with
    nothing left to pull. A store that cannot be read leaves the words as they were kept."""
    if isinstance(notice, Overtaken):
        mirror = _mirror_now(ctx)
        pulled = mirror is not None and mirror.head.seq >= notice.head_seq
        return replace(notice, pulled_since=True) if pulled else notice
    if notice.kept is not None or notice.moved_to is not None:
        return notice  # the store now says nothing of rows kept or moved aside
    from kint.tenant_worker.state_format import CorruptStateFile
    from kint.tenant_worker.unanchored import count_unanchored

    mirror = _mirror_now(ctx)
    if mirror is None or not os.path.exists(ctx.config.db):
        return notice
    try:
        left = len(count_unanchored(ctx, mirror).unanchored)
    except (OSError, sqlite3.Error, ProtocolError, CorruptStateFile) as err:
        log.info("space %s: whether the rows of a dropped journal are anchored since is not "
                 "known (%s)", ctx.config.space16, err)
        return notice
    return replace(notice, anchored_since=True) if left == 0 else notice


def _mirror_now(ctx: SpaceContext) -> Any:
    """The mirror, for `_as_now`; None when there is none or it does not read (the
    command's own read of it names that)."""
    from kint.tenant_worker.state_format import CorruptStateFile

    try:
        return ctx.state.mirror()
    except (OSError, ProtocolError, CorruptStateFile) as err:
        log.info("space %s: the mirror a kept notice is read against does not read (%s)",
                 ctx.config.space16, err)
        return None


def moving_aside(ctx: SpaceContext, found: Found, moving_to: str) -> None:
    """A discarding pull is about to move the store aside to `moving_to` (nothing moved
    yet): the kept notice names that copy, taken as where the rows are once it exists
    (`_held`) as the store renamed (its identity, kept beside it), so a pull killed after
    the rename and before `moved_aside` leaves the rows named where they are. The same
    journals as `moved_aside`."""
    named = _to_name(ctx, found, moving_to, "being moved")
    if named is not None:
        keep(ctx, found, named[0], moving_to=moving_to,
             moving_id=_identity(ctx.config.db))


def moved_aside(ctx: SpaceContext, found: Found, moved_to: str) -> None:
    """A discarding pull has moved the store aside (to `moved_to`) after the settlement
    kept `found`: the rows a dropped journal carried are in that copy, and the notice kept
    says so, should the pull be killed before it says it (the next command's words named
    the restored store). The first copy named stays: a store moved aside since did not
    hold them. Named too for a journal kept (its transaction may still land): its rows are
    in the store until it lands, so in the copy now (the notice said nothing of where they
    went). Nothing for a journal that landed (its rows are anchored), nor for one that owes
    nothing (`owes_nothing`): its rows were anchored, or gone from the store, before this
    move, and a copy named there (read as it was kept, never worked out again) sent the
    user to write back rows the copy did not hold."""
    named = _to_name(ctx, found, moved_to, "moved")
    if named is not None:
        keep(ctx, replace(found, moved_to=moved_to), named[0])


def _to_name(ctx: SpaceContext, found: Found, copy: str,
             moving: str) -> tuple[list[str | int] | None] | None:
    """The vault to keep the notice under once it names `copy` (in a 1-tuple), or None
    when it is not to name it (`moved_aside`'s journals) or the vault does not read (said
    in the log as the store `moving` aside: "being moved" before the rename, "moved"
    after it)."""
    from kint.tenant_worker.state_format import CorruptStateFile

    landed = isinstance(found, Overtaken) and found.landed
    if (landed or owes_nothing(found) or found.moved_to is not None
            or not _path(ctx).exists()):
        return None
    try:  # read by the pull before the move: the store is gone, the pull goes on
        return (vault(ctx),)
    except (OSError, ProtocolError, CorruptStateFile) as err:
        log.warning("space %s: the kept notice does not name the store %s aside to %s "
                    "(%s)", ctx.config.space16, moving, copy, err)
        return None


def owes_nothing(found: Found) -> bool:
    """Whether `found` is said only to tell it: nothing of it waits for the command (its
    rows anchored since, or the chain it was settled against pulled since)."""
    if isinstance(found, Overtaken):
        return found.pulled_since
    return found.anchored_since


def waiting(ctx: SpaceContext) -> str | None:
    """What `kint status` and `kint doctor` say of a notice still kept, or None: one line
    naming the file and what it holds, so an outcome no command has said yet is seen
    without running the command that says it (and uses it up). Read only: a file that does
    not read is named so and left to that command, which removes it; one kept for another
    vault than the space's now is not named, as that command drops it unsaid (an enrolment
    that does not read leaves it named: the command's own refusal says that file)."""
    from kint.tenant_worker.state_format import CorruptStateFile

    path = _path(ctx)
    held = _held(path)
    if held.unread is not None:
        return (f"{path.name}: it does not read ({held.unread}), and is removed by "
                f"{SAID_BY_NEXT}")
    if held.notice is None:
        return None
    try:
        if held.elsewhere(ctx):
            return None
    except (ProtocolError, CorruptStateFile):
        pass
    return (f"{path.name} keeps what settling an interrupted push found, said by no "
            f"command yet: {_as_now(ctx, held.notice).describe()}; {SAID_BY_NEXT} says it")


def said(ctx: SpaceContext) -> None:
    """The command has said it: not again. One that cannot be removed is logged, not
    raised: the command's answer, which says it, must still reach its caller."""
    left = removed(_path(ctx))
    if left:
        log.warning("space %s: %s was said%s", ctx.config.space16, _path(ctx), left)
