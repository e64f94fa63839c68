"""The merkle root over a space's leaves and inclusion proofs (docs/how-it-works.md, "The
leaf and the rows root").

Leaves are ordered by canonical id. Pairs hash as keccak256 of the two children; an odd
node is carried up unchanged; the empty set's root is keccak256("kint-empty-v1"). A proof
is a list of `[sibling_hex, sibling_is_left]`, bottom up.
"""

from __future__ import annotations

from typing import Iterable

from kint.keccak import keccak

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


def rehash(tree: MerkleTree, first: int, changed: Iterable[int] = ()) -> None:
    """Bring `tree`'s upper levels in step with its leaves after a change, hashing only
    what the change reaches, so a state moved forward one epoch at a time does not pay for
    the whole tree per epoch (a 10,000-row push is 13 epochs).

    The caller has already rewritten `tree.levels[0]`: every leaf from index `first` on
    (its length may have changed: rows put or removed shift everything after them, and so
    every pair from there up), and the leaves at `changed`, each below `first`, replaced in
    place (same count; only their own path to the root changes). The result is the layout
    of `MerkleTree` exactly: the same pairs, the odd node carried up unchanged.
    """
    levels = tree.levels
    first = min(first, len(levels[0]))
    dirty = {i for i in changed if i < first}
    k = 0
    while len(levels[k]) > 1:
        level = levels[k]
        if k + 1 == len(levels):
            levels.append([])
        up, n, top = levels[k + 1], len(level), first // 2
        del up[top:]  # every parent from `top` on covers a leaf at or after `first`
        up.extend(keccak(level[i] + level[i + 1]) for i in range(2 * top, n - 1, 2))
        if n % 2:
            up.append(level[-1])
        parents = {i // 2 for i in dirty if i // 2 < top}
        for j in parents:  # below `top` both children exist: 2j + 1 < first <= n
            up[j] = keccak(level[2 * j] + level[2 * j + 1])
        first, dirty, k = top, parents, k + 1
    del levels[k + 1:]  # a shrunken tree's old upper levels


def verify_proof(leaf: bytes, proof: list[list[str | bool]], root: bytes) -> bool:
    node = leaf
    try:
        for sibling_hex, sibling_is_left in proof:
            sibling = bytes.fromhex(str(sibling_hex))
            node = keccak(sibling + node) if sibling_is_left else keccak(node + sibling)
    except (ValueError, TypeError):
        return False
    return node == root
