"""Sentences that say what a refusal left as it was, shared by layers that may not import
one another.

A refused or held push leaves the store as it was, and every message that refuses one says
so in the same words, whichever layer raises it: the protocol's default hints
(kint.protocol.errors), the worker's refusals, and custody's account of a data key it does
not hold (kint.custody.vault_cache), which may not import the protocol layer. This module
imports nothing, so any layer can take the words from it without a cycle.
"""

NOTHING_DROPPED = "nothing was dropped, the changes stay in the store until the next push"
NOTHING_ANCHORED_OR_DROPPED = "nothing was anchored and nothing was dropped"
