"""Epochs on Base, as kint v0.3.0's docs/site/06-epochs.md specifies: the plaintext, the
bucketed and padded payload, the 59-byte header with its wraps, the AAD, and the split of a
large diff into several epochs. No I/O: the worker's push and pull use these."""
