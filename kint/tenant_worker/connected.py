"""A connected space's chain and the sender of its transactions.

Push, pull, rekey and the pending-epoch check all start the same way: the space must be
connected on this machine (its enrolment), and what it sends goes through the machine's
one session key and nonce book. Apart from push so that the pending check (which push
itself runs) does not import push back.
"""

from __future__ import annotations

from kint.chain.anchor import Anchor
from kint.chain.config import ChainConfig
from kint.chain.nonces import NonceBook
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.hints import NOT_CONNECTED_HINT
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.enrolment import NOT_CONNECTED_MESSAGE, Enrolment
from kint.tenant_worker.session_sender import SessionSender
from kint.tenant_worker.space import SpaceContext


def connected(ctx: SpaceContext) -> tuple[ChainConfig, Enrolment]:
    """The space's chain and its enrolment; NOT_CONNECTED when this machine has none, and
    CONFIG_INVALID (enrolled_chain.py `other_chain`) when the chain or contract in force is
    not the one the space was connected on, before any chain call: its epochs, mirror and
    watermark are that contract's, so another's head (none, or older) made a pull refuse as
    a stale or lying RPC and a push send to a contract that never saw the space."""
    enrolment = ctx.enrolment()
    if enrolment is None:
        raise ProtocolError(ErrorCode.NOT_CONNECTED, NOT_CONNECTED_MESSAGE, NOT_CONNECTED_HINT)
    chain = ctx.chain()
    elsewhere = other_chain(enrolment, chain, ctx.seen_here)
    if elsewhere is not None:
        raise elsewhere
    return chain, enrolment


def sender_for(ctx: SpaceContext, anchor: Anchor) -> SessionSender:
    """The space's sender: the machine's session key, the machine-wide nonce book."""
    return SessionSender(anchor, ctx.session_account(), NonceBook(ctx.config.home),
                         ctx.config.space16)
