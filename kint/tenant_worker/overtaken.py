"""A killed push whose seq the chain has passed (docs/faults.md, its second row): the
pending journal of epoch N meets a chain head above N - 1 that is not its own epoch,
because another machine pushed before this machine's worker settled the journal.

Only the Epoch event of seq N can tell the two cases apart:

- its digest is the journal's: this machine's epoch landed, and other epochs came after it
  (a machine that pulled it pushed on top). It is recorded as any landed epoch is, and a
  pull goes on from it;
- another digest: another machine's epoch holds seq N. The contract appends an epoch only
  when its `prev` is the current head digest, and the head only moves forward (v0.3.0's
  11-contract.md, "Functions" and "Errors": StaleHead), so a transaction built on seq
  N - 1 can never land now. The journal is dropped; the rows it carried are still in the
  store, unanchored, and the pull's fork rules decide about them as for any machine
  whose changes were not anchored.

The event is found from the head the contract reports, back through each event's
prevBlock, each checked to carry the digest the step above named (the walk a pull does,
03-new-machine.md). An event the endpoint does not serve, or one that does not chain to
the head it reported, is not an answer: the journal is kept and the settlement refused, so
an endpoint that fails or contradicts itself never makes a landed epoch look lost. An epoch
taken as landed must also be the journal's own transaction (pending.py checks its hash and
its receipt against what was signed).
"""

from __future__ import annotations

from dataclasses import dataclass

from kint.chain.anchor import Anchor, EpochLog, Head
from kint.chain.rpc import RpcUnavailable
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.errors import UNSETTLED_HINT
from kint.protocol.hints import ASIDE_THEN, OVERTAKEN_NOTICE_TAIL, WRITE_BACK_TAIL

UNSETTLED = "the journal is kept until the chain can be read"
# What became of a dropped journal's transaction that the endpoint held, waiting to be
# mined (dropped_nonce.release_nonce): its revert would spend the epoch's calldata gas.
REPLACED = ("its transaction, still waiting at the endpoint, was replaced by a transfer to "
            "self at its nonce, so it never reverts at an epoch's gas")
WAITS_TO_REVERT = ("its transaction is still waiting at the endpoint and will revert when "
                   "mined, spending its gas; nothing anchored is lost")


def not_replaced(address: str) -> str:
    """WAITS_TO_REVERT for a transaction of a rotated-away session key whose keystore is
    not here to sign its replacement (former_key.py)."""
    return (f"its transaction is still waiting at the endpoint, from the previous session "
            f"key {address}, which this machine can no longer open (session.key.old is "
            f"another key, or none) to replace it: it will revert when mined, spending its "
            f"gas; nothing anchored is lost")




def carried_where(moved_to: str | None, kept: str | None = None) -> str:
    """Where the changes a dropped journal carried are: still in the store, or, once a
    `pull --discard-local` moved the store aside, in that copy (`moved_to`, this pull's;
    `kept`, an earlier pull's the notice kept, which wins: the store that pull moved aside
    held them, any moved since did not), where a describe that said "still in the store"
    sent the user to the new, restored store that does not hold them."""
    if kept is not None:
        return f"in the store a discarding pull moved aside ({kept}), not anchored"
    if moved_to is None:
        return "still in the store, not anchored"
    return f"in the store this pull moved aside ({moved_to}), not anchored"




# What a dropped journal's rows are once the store was pulled up to the chain it was
# settled against (`pulled_since`): a pull goes on over the head's move only when the store
# holds no change the chain never saw (local_state.py), or one lost (restored, keeping what
# was written since) or moved aside (--discard-local), so the rows it carried were gone
# from the store by then; any written again since are new changes, anchored as any is.
# Said with no command: "still in the store, not anchored" and "`kint push` anchors them"
# were false inside the push that goes on past it (an agent's memory_push too), which
# anchors what the store holds. Nor does it say this push anchors them: one refused after
# it carries it under its hint, and so does a pull's FORK, where no push goes on.
PULLED_SINCE = ("the store has since been pulled up to the chain, which a pull does only "
                "over a store holding no unanchored change (or one lost, or moved aside), so "
                "the changes it carried are in the store only if written again since, as new "
                "changes")


PULL_THEN = ("run `kint pull`, then `{again}` (should the pull refuse as a fork, `kint "
             "pull --discard-local` moves the store aside, nothing deleted, and restores "
             "the anchored rows)")


@dataclass(frozen=True)
class Overtaken:
    """What settling a journal the chain had passed found: `landed`, epoch `seq` was this
    machine's and is recorded now; else another machine's epoch holds `seq` and the
    journal was dropped. `head_seq` is the chain head it was settled against."""

    seq: int
    head_seq: int
    landed: bool
    waiting: str | None = None  # REPLACED, WAITS_TO_REVERT: its transaction the endpoint held
    # A kept notice whose chain the store was pulled up to since (settled_notice._as_now):
    # said, but no push is behind for it. Never kept: it is what holds when read.
    pulled_since: bool = False
    # The store a discarding pull moved aside after the notice was kept, holding the rows
    # the dropped journal carried (settled_notice.moved_aside): a pull killed before it
    # said the notice left it kept, which then sent the user to the restored store.
    moved_to: str | None = None

    def describe(self, moved_to: str | None = None) -> str:
        """What became of the journal; `moved_to`: the store a pull moved aside
        (--discard-local), which holds the changes a dropped journal carried (the one kept
        in `self.moved_to` first), unless the store was pulled past it before with no copy
        named (`pulled_since`: PULLED_SINCE)."""
        if self.landed:
            return (f"an interrupted push of epoch {self.seq} had landed and is recorded now; "
                    f"another machine has since pushed up to seq {self.head_seq}")
        carried = (f"; {PULLED_SINCE}" if self.pulled_since and self.moved_to is None
                   else f", and the changes it carried are "
                        f"{carried_where(moved_to, self.moved_to)}")
        return (f"an interrupted push of epoch {self.seq} never landed and never can: "
                f"another machine's epoch holds seq {self.seq} (the chain is at seq "
                f"{self.head_seq}), and the contract takes an epoch only on the current "
                f"head; its journal was dropped{carried}"
                + (f"; {self.waiting}" if self.waiting else ""))

    def notice(self, moved_to: str | None = None) -> str:
        """What a pull that went on past it carries among its warnings: `describe`, and for a
        dropped journal what to do with the rows it carried (PULL_THEN, the refusal's hint,
        asks for the very pull that is saying it), in the store or in the one the pull
        moved aside (`moved_to`). One the store was pulled past since owes nothing, and is
        `describe` alone, as an `Unauthorized` whose rows were anchored since is; unless a
        copy was named before (`self.moved_to`), which `describe` says first and whose
        write-back step follows it here too (it was dropped, the copy named with no step)."""
        if self.landed or (self.pulled_since and self.moved_to is None):
            return self.describe()
        if moved_to is not None or self.moved_to is not None:
            return f"{self.describe(moved_to)}; {WRITE_BACK_TAIL}"
        return f"{self.describe()}; {OVERTAKEN_NOTICE_TAIL}"

    def hint(self, again: str = "kint push") -> str:
        """What to do: a pull first, then `again` (the command refused); with a copy named
        (`self.moved_to`), the rows written back from it between the two (ASIDE_THEN): the
        refusal uses the notice up, and PULL_THEN's push anchored nothing of the copy."""
        return (PULL_THEN if self.moved_to is None else ASIDE_THEN).format(again=again)

    def refusal(self, again: str = "kint push") -> ProtocolError:
        """What a push (or rekey: `again`) that met it answers: this machine is behind the
        chain either way, and a pull is what brings it to the head."""
        return ProtocolError(ErrorCode.CHAIN_MOVED, self.describe(), self.hint(again))


def epoch_at(anchor: Anchor, owner: str, space_hex: str, head: Head, seq: int) -> EpochLog:
    """The Epoch event of `seq` (at or below the head), reached from the head back through
    each event's prevBlock, every step checked against the digest the one above named.
    Refuses (RPC_UNAVAILABLE, STALE_RPC) rather than guess."""
    at, block, digest = head.seq, head.block, head.digest
    while True:
        try:
            event = anchor.epoch_log(owner, space_hex, at, block)
            why = "is not served"
        except RpcUnavailable as err:
            event, why = None, f"could not be read ({err})"
        if event is None:
            raise ProtocolError(ErrorCode.RPC_UNAVAILABLE,
                                f"the Epoch event of seq {at} (block {block}) {why}, so "
                                f"whether an interrupted push of epoch {seq} landed is not "
                                f"known; {UNSETTLED}", UNSETTLED_HINT)
        if event.digest != digest:
            raise ProtocolError(ErrorCode.STALE_RPC,
                                f"the Epoch event of seq {at} has digest {event.digest[:12]}, "
                                f"not the {digest[:12]} the chain names for it: the endpoint "
                                f"contradicts itself; {UNSETTLED}", UNSETTLED_HINT)
        if at == seq:
            return event
        at, block, digest = at - 1, event.prev_block, event.prev
