"""Wei written as ETH: the one way kint shows an amount of ether, to a person or in JSON
(`balance_eth`); and what a mined transaction cost, read from its receipt one way.

Decimal, not a float: a float rounds, and near doctor's 0.00002 ETH threshold a float
balance of 19,999,999,999,999 wei printed as 0.000020 while the check failed for holding
too little. Not web3's `from_wei` either: it costs a command the import of web3, and it
gives the same digits.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Any

WEI_PER_ETH = 10**18
# Decimal's default context, named so that no caller's context changes the text: 28
# significant digits, so an amount is exact below 10**10 ETH and rounded half to even
# above it (no key or transaction holds that much).
_CONTEXT = Context(prec=28, rounding=ROUND_HALF_EVEN)


def eth_text(wei: int, places: int | None = None) -> str:
    """`wei` in ETH, without the unit. Exact with trailing zeros dropped ("0" for none,
    "0.000000000000000001" for one wei) by default; with `places`, rounded half to even to
    that many decimals (push's per-epoch cost: gwei's nine)."""
    value = _CONTEXT.divide(Decimal(int(wei)), Decimal(WEI_PER_ETH))
    if places is None:
        return format(_CONTEXT.normalize(value), "f")
    with localcontext(_CONTEXT):  # format rounds with the thread's context
        return format(value, f".{places}f")


def receipt_cost(receipt: Any) -> dict[str, int]:
    """What a mined transaction cost its sender, in wei: `gas` used, its
    `effective_gas_price`, the `l1_fee` an OP-stack chain such as Base adds to its receipts
    (hex text or a number; none on the devchain), and `cost_wei`, all three together."""
    gas = int(receipt["gasUsed"])
    price = int(receipt.get("effectiveGasPrice", 0) or 0)
    l1_fee = receipt.get("l1Fee")
    l1 = int(l1_fee, 16) if isinstance(l1_fee, str) else int(l1_fee or 0)
    return {"gas": gas, "effective_gas_price": price, "l1_fee": l1,
            "cost_wei": gas * price + l1}
