"""The refusals docs/new-machine.md quotes with parts left out are the ones the code makes.

The page quotes a refusal whole where it can, and where a part varies (an address, a key's
tag, why the chain could not be read) it writes `...` or `…` there, and N and B for an
epoch's seq and block. A change of wording in the code would leave the page quoting a
refusal no kint makes; each test here makes the refusal by calling the code that raises
it, with values of its own, and matches the page's quote against it: a left-out part
stands for any text, N and B for a number, and the quote may stop before the message ends.
A new quote with a part left out fails the first test until it is tied here too.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "new-machine.md"
LEFT_OUT = ("...", "…")
OWNER = "0x" + "ab" * 20
SPACE = "cd" * 32


def _left_out_quotes() -> list[str]:
    """Every backticked quote of the page's prose with a part left out, its line breaks as
    spaces (the fenced command blocks are not quotes, and their fences would pair wrong)."""
    prose = re.sub(r"^```.*?^```", "", PAGE.read_text(), flags=re.S | re.M)
    text = re.sub(r"\s+", " ", prose)
    return [q for q in re.findall(r"`([^`]+)`", text) if any(mark in q for mark in LEFT_OUT)]


def _pattern(quote: str) -> re.Pattern[str]:
    """`quote` as a pattern: a left-out part is any text, N and B (whole words) a number."""
    parts = re.split(r"(\.\.\.|…|\b[NB]\b)", quote)
    return re.compile("".join(".+?" if part in LEFT_OUT else r"\d+" if part in ("N", "B")
                              else re.escape(part) for part in parts))


def _wrong_signer() -> list[str]:
    from kint.custody.errors import WrongSigner

    return [str(WrongSigner("0x" + "12" * 20, OWNER))]


def wrong_key() -> list[str]:
    from kint.tenant_worker.connect_key import SuppliedKey, wrong_key

    return [wrong_key(OWNER, SuppliedKey(kind=1, kek=bytes(32)), rotated=False).message]


def wrong_key_here() -> list[str]:
    """A key no wrap of this machine's carries, with no epoch header read: the page quotes
    the refusal from the words that differ from the head epoch's."""
    from kint.tenant_worker.connect_key import SuppliedKey, wrong_key

    made = wrong_key(OWNER, SuppliedKey(kind=1, kek=bytes(32)), rotated=False,
                     from_chain=False).message
    return [made[made.index("the vault of "):]]


class _EpochsOfAnotherTool:
    """A chain whose every epoch is vouched for by its Epoch event but whose calldata is no
    kint envelope (another tool wrote them)."""

    def epoch_log(self, owner: str, space: str, seq: int, block: int) -> SimpleNamespace:
        return SimpleNamespace(digest=f"{seq:064x}", prev=f"{seq - 1:064x}",
                               prev_block=block - 1, tx_hash="0x" + "00" * 32)

    def push_calldata(self, *_: object) -> bytes:
        return b"not a kint envelope"


def _no_header_parses() -> list[str]:
    from kint.chain.anchor import Head
    from kint.protocol import ProtocolError
    from kint.tenant_worker.head_header import newest_readable_header

    with pytest.raises(ProtocolError) as refused:
        newest_readable_header(_EpochsOfAnotherTool(), OWNER, SPACE,  # type: ignore[arg-type]
                               Head(f"{3:064x}", 3, 30), command="connect")
    return [refused.value.message]


def _recovery_code_with_nothing_to_check() -> list[str]:
    """Both causes the page names: the chain could not be read, or holds no epochs."""
    from kint.protocol import ErrorCode, ProtocolError
    from kint.tenant_worker.recovery_binding import _nothing_to_check

    unread = ProtocolError(ErrorCode.RPC_UNAVAILABLE, "cannot read the chain head: timed out")
    return [_nothing_to_check(OWNER, unread).message, _nothing_to_check(OWNER, None).message]


def _walk_stops_below_the_head() -> list[str]:
    from kint.chain.anchor import Head
    from kint.tenant_worker.walk_history import unserved_below_head

    head = Head(f"{7:064x}", 7, 70)
    return [unserved_below_head(5, 50, head, "the endpoint answered an error", newer=2).message,
            unserved_below_head(6, 60, head, "no Epoch event at that block", newer=0).message]


def _another_chain() -> list[str]:
    """connect through an endpoint of another chain, off the devchain (Base's chain id)."""
    from kint.chain.chain_id import on_other_chain
    from kint.chain.config import BASE_CHAIN_ID, ChainConfig
    from kint.tenant_worker.connect import another_chain_refused

    chain = ChainConfig(("http://127.0.0.1:8545",), BASE_CHAIN_ID, "0x" + "11" * 20, 1, 0.5)
    found = on_other_chain(chain, {0: 31337})
    assert found is not None
    return [another_chain_refused(found).message]


# Each left-out quote of the page, by its first words, and the refusals the code makes there.
MADE: dict[str, Callable[[], list[str]]] = {
    "derive signature recovers to": _wrong_signer,
    "this key (tag": wrong_key,
    "the vault of 0x": wrong_key_here,
    "cannot read the head epoch: none of the": _no_header_parses,
    "a recovery code cannot start a vault:": _recovery_code_with_nothing_to_check,
    "cannot walk back to epoch": _walk_stops_below_the_head,
    "http://… (KINT_RPC_URL) answers for chain": _another_chain,
}


def test_every_quote_with_a_part_left_out_is_tied_to_the_code():
    quotes = _left_out_quotes()
    assert sorted(next((start for start in MADE if q.startswith(start)), q)
                  for q in quotes) == sorted(MADE), quotes


@pytest.mark.parametrize("start", sorted(MADE))
def test_a_quote_with_a_part_left_out_matches_the_refusal_made(start, monkeypatch):
    monkeypatch.delenv("KINT_OFFLINE", raising=False)
    (quote,) = [q for q in _left_out_quotes() if q.startswith(start)]
    pattern = _pattern(quote)
    for made in MADE[start]():
        assert pattern.match(made), f"docs/new-machine.md quotes `{quote}`; the code says {made!r}"
