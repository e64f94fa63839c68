"""Rows as kint sees them: the exact stored text of a Sibyl row, its leaf, and the merkle
tree over every leaf of a space (docs/how-it-works.md, "The leaf and the rows root").

Pure functions and read-only SQL only, so the worker (verify, push, pull) and kint-server
(noting the leaf of a write it just made) compute the same bytes the same way.
"""
