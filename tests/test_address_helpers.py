"""kint's own address helpers (kint.custody.ids: `address_problem`, `is_address_text`,
`checksum_address`), which the command line and the workers use in place of eth_utils':
eth_utils loads pydantic and the rest (~0.1 s of CPU at every `kint canonical-payload`,
`connect`, `session-key show`, and `--owner` check), and web3's ~0.3 s more came with
eth_account where only the session key's address was read. Their answers are checked
here against eth_utils: its checksum, and its `is_address` except where the mixed case of
an address is not its checksum, which eth_utils 6 takes and kint refuses (a character
mistyped names another owner)."""

from __future__ import annotations

import random

import pytest
from eth_utils import is_address, is_checksum_address, to_checksum_address

from conftest import kint_loading, make_sandbox
from kint.custody.errors import BadOwner
from kint.custody.ids import (NOT_AN_ADDRESS, NOT_ITS_CHECKSUM, address_problem,
                              checksum_address, is_address_text)

# EIP-55's own examples.
EIP55 = ("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
         "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB", "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
         "0x52908400098527886E0F7030069857D2E4169EE7", "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
         "0xde709f2102306220921060314715629080e2fb77", "0x27b1fdb04752bbc536007a920d24acb045561c26")


def test_the_checksum_and_the_address_test_are_eth_utils_own():
    rng = random.Random(20)
    addresses = [*EIP55, "0x" + "00" * 20, "0x" + "ff" * 20,
                 *("0x" + rng.randbytes(20).hex() for _ in range(300))]
    for address in addresses:
        for spelling in (address, address.lower(), address.upper().replace("0X", "0x"),
                         address[2:], "0X" + address[2:]):
            assert checksum_address(spelling) == to_checksum_address(spelling), spelling
            assert is_address_text(spelling) is is_address(spelling) is True, spelling
        assert checksum_address(bytes.fromhex(address[2:])) == to_checksum_address(address)
    for address in EIP55[:6]:  # the mixed-case examples come back as they are
        assert checksum_address(address.lower()) == address
    for text in ("0x12", "0x" + "g" * 40, "0x" + "ab" * 21, " 0x" + "ab" * 20, "", "0x",
                 "ab" * 19 + "a"):
        assert is_address_text(text) is is_address(text) is False, text
        assert address_problem(text) == NOT_AN_ADDRESS
    for address in EIP55[:6]:  # one letter's case changed: the bytes are an address still,
        digits = address[2:]  # and eth_utils 6 takes it, but it is not its own checksum
        at = next(i for i, c in enumerate(digits) if c.isalpha())
        wrong = "0x" + digits[:at] + digits[at].swapcase() + digits[at + 1:]
        assert is_address(wrong) and not is_checksum_address(wrong), wrong
        for spelling in (wrong, wrong[2:]):
            assert address_problem(spelling) == NOT_ITS_CHECKSUM, spelling
            assert is_address_text(spelling) is False, spelling
    for spelling in ("0x" + "AB" * 20, "0X" + "ab" * 20):  # one case: no checksum to check
        assert is_address_text(spelling) is is_address(spelling) is True, spelling
    assert is_address_text(b"\x01" * 20) is False  # text only: bytes are never typed in
    with pytest.raises(BadOwner):
        checksum_address("0x12")


def test_commands_that_read_an_address_load_no_eth_utils(tmp_path):
    sb = make_sandbox(tmp_path / "machine")
    owner = "0x000000000000000000000000000000000000dEaD"
    for argv, code in ((("canonical-payload", "--owner", owner), 0),
                       (("session-key", "show", "--owner", owner), 0),
                       (("authorize", "payload", "--owner", owner), 2),  # no session key
                       (("push", "--owner", "0x12"), 2)):
        out, loaded = kint_loading(sb.env, *argv)
        assert out.returncode == code, (argv, out.stdout, out.stderr)
        heavy = sorted({m.split(".")[0] for m in loaded} & {"eth_utils", "eth_account",
                                                              "pydantic", "web3"})
        assert heavy == [], (argv, heavy)
        assert "kint.custody.ids" in loaded  # the list is real
