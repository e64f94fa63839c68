"""`kint canonical-payload --owner ADDRESS`: the frozen EIP-712 message an EOA owner signs
once per machine to open the vault (05-keys.md, "The vault message").

Byte-stable, one line, no whitespace between tokens, ending in a newline: exactly what
`cast wallet sign --data --from-file` reads. It names no tenant and reads nothing.
"""

from __future__ import annotations

import sys

import click

from kint.custody.ids import NOT_ITS_CHECKSUM, address_problem
from kint.protocol.hints import CHECKSUM_HINT


@click.command("canonical-payload")
@click.option("--owner", required=True, metavar="ADDRESS", help="The owner wallet address.")
def canonical_payload_cmd(owner: str) -> None:
    """Print the vault message an EOA owner signs (domain kint / 1 / chain 8453, primary
    type KintVault with owner and purpose). Sign it only in a terminal you opened."""
    from kint.custody.vault_message import canonical_payload

    problem = address_problem(owner)
    if problem is not None:
        from kint.commands.common import usage_error

        usage_error(f"--owner {owner!r} {problem}",
                    CHECKSUM_HINT if problem == NOT_ITS_CHECKSUM else None)
    payload = canonical_payload(owner)
    sys.stdout.buffer.write(payload if payload.endswith(b"\n") else payload + b"\n")
    sys.stdout.flush()
