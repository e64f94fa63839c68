"""The chain: everything kint says to Base (or the devchain) goes through here, so the
bounds on a call, the refusals it can end in and the contract's bytes are one code path.

Which chain (config; an endpoint's chain id, chain_id; v0.3.0's macOS Keychain endpoint,
keychain_rpc; where a space's endpoints in force were set, and so where it is given another,
endpoint_source; where its contract was set, and the check of an address with no
EpochAnchor, contract_source), how to reach it with bounded calls (rpc) and what a call can
end in besides its answer (calls), the EpochAnchor contract (anchor: its reads; anchor_writes: its
calldata, transactions and receipts; anchor_abi: its interface as bytes, no I/O) and its
compiled bytes (artifact, artifacts/), what it says of a session key (key_facts), the
machine-wide nonce book every space's pushes share (nonces), wei as ETH text (units), and the
embedded local chain for development (devchain)."""
