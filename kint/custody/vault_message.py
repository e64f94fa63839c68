"""The frozen KintVault message an EOA owner signs, and the check on that signature.

Why it is built this way:

- The signature of this one message IS the vault key's input, so the message is frozen: any
  byte of change (a field, the domain, the purpose sentence) gives every owner a different
  key. The digest is computed here by hand from the EIP-712 rules rather than through a
  library's typed-data encoder, so a library upgrade cannot move it.
- The domain has no verifyingContract and no salt; the `purpose` field, the one every
  wallet renders, is therefore a warning sentence.
- `canonical_payload` is what `cast wallet sign --data --from-file` reads: one line, no
  whitespace between tokens, keys in a fixed order, a trailing newline. Byte-stable.
- `check_derive_signature` is the only thing between a wrong signature and a silently
  different key: it recovers the signer and refuses anyone but the owner, and it is never to
  be wrapped in a try/except that carries on. It then low-S normalises, so a malleated twin
  of a signature derives the same key.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kint.custody.errors import BadDeriveSignature, WrongSigner
from kint.custody.ids import owner_address, owner_bytes
from kint.keccak import keccak

CHAIN_ID = 8453
DOMAIN_NAME = "kint"
DOMAIN_VERSION = "1"
PRIMARY_TYPE = "KintVault"
PURPOSE = ("kint-memory-v1: signing this reveals your memory encryption key. Only sign it in "
           "a kint terminal or page you opened yourself.")

# secp256k1 group order.
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
SIGNATURE_LEN = 65

_DOMAIN_TYPEHASH = keccak(b"EIP712Domain(string name,string version,uint256 chainId)")
_VAULT_TYPEHASH = keccak(b"KintVault(address owner,string purpose)")
_SIGNATURE_HEX = re.compile(r"(?:0[xX])?([0-9a-fA-F]{130})")


def vault_typed_data(owner: str | bytes) -> dict[str, Any]:
    """The EIP-712 typed data for `owner`, keys in the frozen order."""
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
            ],
            "KintVault": [
                {"name": "owner", "type": "address"},
                {"name": "purpose", "type": "string"},
            ],
        },
        "primaryType": PRIMARY_TYPE,
        "domain": {"name": DOMAIN_NAME, "version": DOMAIN_VERSION, "chainId": CHAIN_ID},
        "message": {"owner": owner_address(owner), "purpose": PURPOSE},
    }


def canonical_payload(owner: str | bytes) -> bytes:
    """The typed data as `kint canonical-payload` prints it: one line of JSON with no
    whitespace between tokens, non-ASCII escaped, then a newline."""
    text = json.dumps(vault_typed_data(owner), separators=(",", ":"), ensure_ascii=True)
    return text.encode("ascii") + b"\n"


def vault_digest(owner: str | bytes) -> bytes:
    """keccak256(0x1901 || domainSeparator || hashStruct(KintVault)): the 32 bytes signed."""
    domain = keccak(_DOMAIN_TYPEHASH + keccak(DOMAIN_NAME.encode()) +
                    keccak(DOMAIN_VERSION.encode()) + CHAIN_ID.to_bytes(32, "big"))
    struct = keccak(_VAULT_TYPEHASH + owner_bytes(owner).rjust(32, b"\0") +
                    keccak(PURPOSE.encode("utf-8")))
    return keccak(b"\x19\x01" + domain + struct)


def parse_signature_text(text: str | bytes) -> bytes:
    """The 65 bytes of a signature as a wallet tool prints it (`cast wallet sign`, a
    library's hex): 130 hex digits, either case, with or without 0x, surrounding whitespace
    ignored. Anything else is refused without echoing it."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("ascii")
        except UnicodeDecodeError:
            raise BadDeriveSignature("is not hex text") from None
    match = _SIGNATURE_HEX.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise BadDeriveSignature("must be 65 bytes as 130 hex characters (r, s, v)")
    return bytes.fromhex(match.group(1))


def check_derive_signature(signature: bytes, owner: str | bytes) -> tuple[int, int]:
    """(r, s) of a derive signature the owner made over the vault digest, low-S normalised.

    Refuses (BadDeriveSignature) anything that is not 65 bytes with v in {27, 28, 0, 1} and
    1 <= r, s < n; refuses (WrongSigner) a signature that recovers to anyone but the owner.
    """
    if not isinstance(signature, (bytes, bytearray)) or len(signature) != SIGNATURE_LEN:
        got = len(signature) if isinstance(signature, (bytes, bytearray)) else "not bytes"
        raise BadDeriveSignature(f"must be exactly {SIGNATURE_LEN} bytes, got {got}")
    r = int.from_bytes(signature[0:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    v = signature[64]
    if v in (27, 28):
        v -= 27
    if v not in (0, 1):
        raise BadDeriveSignature(f"has v = {signature[64]}; it must be 27, 28, 0 or 1")
    if not (0 < r < SECP256K1_N and 0 < s < SECP256K1_N):
        raise BadDeriveSignature("has r or s out of range")
    from eth_keys import KeyAPI  # here: printing the message (canonical-payload) needs none
    from eth_keys.exceptions import BadSignature

    expected = owner_address(owner)
    try:
        public = KeyAPI.Signature(vrs=(v, r, s)).recover_public_key_from_msg_hash(
            vault_digest(owner))
    except BadSignature:
        raise BadDeriveSignature("recovers to no key") from None
    recovered = public.to_checksum_address()
    if recovered != expected:
        raise WrongSigner(recovered, expected)
    if s > SECP256K1_N // 2:
        s = SECP256K1_N - s
    return r, s
