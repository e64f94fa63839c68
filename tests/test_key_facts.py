"""The session key's facts read in one place (kint.chain.key_facts) and wei written as ETH
in one way (kint.chain.units): the formatter's edges, and the reader against a real anvil
(the session's devchain), an owner's authorization set by the owner's own transaction."""

from __future__ import annotations

import decimal

import pytest
from eth_account import Account

from authorize_support import new_machine
from kint.chain import devchain
from kint.chain.key_facts import KeyFacts, read_key_facts
from kint.chain.units import eth_text, receipt_cost


@pytest.mark.parametrize("wei, text", [
    (0, "0"),
    (1, "0.000000000000000001"),
    (10**18, "1"),
    (2 * 10**13, "0.00002"),
    # doctor's threshold less one wei: a float printed 0.000020 here
    (19_999_999_999_999, "0.000019999999999999"),
    (1234 * 10**18, "1234"),
    # 28 significant digits: exact below 10**10 ETH ...
    (10**28 - 1, "9999999999.999999999999999999"),
    # ... and past it rounded half to even, as web3's from_wei then normalize() did
    (10**28 + 5, "10000000000"),
    (2**256 - 1, "115792089237316195423570985" + "0" * 33),
])
def test_eth_text_is_exact_and_drops_trailing_zeros(wei, text):
    assert eth_text(wei) == text


@pytest.mark.parametrize("wei, text", [
    (0, "0.000000000"),
    (1, "0.000000000"),
    (343_389_123_456_789_012, "0.343389123"),
    (343_499_999_999, "0.000000343"),  # below the half (a gwei's): down
    (343_500_000_001, "0.000000344"),  # above: up
    (500_000_000, "0.000000000"),      # a tie: to the even digit
    (1_500_000_000, "0.000000002"),
    (343_500_000_000, "0.000000344"),
    (2**256 - 1, "115792089237316195423570985" + "0" * 33 + ".000000000"),
])
def test_eth_text_with_places_rounds_half_to_even(wei, text):
    assert eth_text(wei, places=9) == text


def test_eth_text_ignores_the_callers_decimal_context():
    with decimal.localcontext() as ctx:
        ctx.prec, ctx.rounding = 5, decimal.ROUND_UP
        assert eth_text(19_999_999_999_999) == "0.000019999999999999"
        assert eth_text(1_500_000_000, places=9) == "0.000000002"


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    return new_machine(tmp_path_factory.mktemp("key-facts"), chain_home, create_key=False)


def test_read_key_facts_without_an_owner_reads_the_balance_only(machine):
    key = Account.create().address
    devchain.fund(machine.url, key, 19_999_999_999_999)
    facts = read_key_facts(machine.anchor, key, None)
    assert facts == KeyFacts(19_999_999_999_999)
    assert facts.as_json() == {"balance_wei": 19_999_999_999_999,
                               "balance_eth": "0.000019999999999999"}


def test_read_key_facts_for_an_owner_says_authorized_until_when(machine):
    owner, key = machine.owner(), Account.create().address
    before = read_key_facts(machine.anchor, key, owner.address)
    assert before == KeyFacts(0, False, 0)
    assert before.as_json() == {"balance_wei": 0, "balance_eth": "0", "authorized": False,
                                "expiry": 0}

    expiry = machine.now() + 7 * 86400
    machine.anchor.transact(owner, machine.anchor.encode_set_session_key(key, expiry))
    devchain.fund(machine.url, key, 10**17)
    after = read_key_facts(machine.anchor, key, owner.address)
    assert after == KeyFacts(10**17, True, expiry)
    assert list(after.as_json()) == ["balance_wei", "balance_eth", "authorized", "expiry"]
    assert after.balance_eth == "0.1"
    # doctor's check reads two things, not three (its bound counts two calls)
    assert read_key_facts(machine.anchor, key, owner.address,
                          with_expiry=False) == KeyFacts(10**17, True)


class _Spent(Exception):
    pass


def test_before_read_runs_before_every_read_and_stops_the_rest(machine):
    """A caller's budget (status's head budget) stops the reads between two of them."""
    owner, key = machine.owner(0), Account.create().address
    calls = []

    def budget(allowed: int):
        def before() -> None:
            calls.append(allowed)
            if len(calls) > allowed:
                raise _Spent
        return before

    assert read_key_facts(machine.anchor, key, owner.address, before_read=budget(3)) \
        == KeyFacts(0, False, 0)
    assert len(calls) == 3
    for allowed in (0, 1, 2):
        calls.clear()
        with pytest.raises(_Spent):
            read_key_facts(machine.anchor, key, owner.address, before_read=budget(allowed))
        assert len(calls) == allowed + 1


@pytest.mark.parametrize("receipt, cost", [
    ({"gasUsed": 21_000, "effectiveGasPrice": 2}, (21_000, 2, 0, 42_000)),  # the devchain
    ({"gasUsed": 100, "effectiveGasPrice": 3, "l1Fee": "0x10"}, (100, 3, 16, 316)),  # Base
    ({"gasUsed": 100, "effectiveGasPrice": None, "l1Fee": 5}, (100, 0, 5, 5)),
])
def test_a_receipts_cost_is_read_one_way(receipt, cost) -> None:
    """Every push, re-anchoring and owner transaction prices its receipt through
    kint.chain.units.receipt_cost: gas times the effective price, plus Base's L1 fee."""
    assert tuple(receipt_cost(receipt).values()) == cost
