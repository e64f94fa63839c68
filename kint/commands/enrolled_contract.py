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
from kint.commands.seen_here import seen_on_disk
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.enrolment import Enrolment


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
