"""The merkle root over a space's leaves and inclusion proofs (seed 000, "The proof").

Leaves are ordered by canonical id. Pairs hash as keccak256 of the two children; an odd
node is carried up unchanged; the empty set's root is keccak256("kint-empty-v1"). A proof
is a list of `[sibling_hex, sibling_is_left]`, bottom up.
"""

from __future__ import annotations

from eth_hash.auto import keccak

EMPTY_ROOT = keccak(b"kint-empty-v1")


class MerkleTree:
    """All levels of the tree, built once, so each proof costs O(log n)."""

    def __init__(self, ordered_leaves: list[bytes]) -> None:
        self.levels: list[list[bytes]] = [list(ordered_leaves)]
        level = self.levels[0]
        while len(level) > 1:
            nxt = [keccak(level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            self.levels.append(nxt)
            level = nxt

    @property
    def root(self) -> bytes:
        return self.levels[-1][0] if self.levels[0] else EMPTY_ROOT

    def proof(self, index: int) -> list[list[str | bool]]:
        out: list[list[str | bool]] = []
        for level in self.levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                out.append([level[sibling].hex(), sibling < index])
            index //= 2
        return out


def merkle_root(ordered_leaves: list[bytes]) -> bytes:
    return MerkleTree(ordered_leaves).root


def verify_proof(leaf: bytes, proof: list[list[str | bool]], root: bytes) -> bool:
    node = leaf
    try:
        for sibling_hex, sibling_is_left in proof:
            sibling = bytes.fromhex(str(sibling_hex))
            node = keccak(sibling + node) if sibling_is_left else keccak(node + sibling)
    except (ValueError, TypeError):
        return False
    return node == root
