"""The chain: which one (config), how to reach it with bounded calls (rpc), the
EpochAnchor contract (anchor), and the embedded local chain for development (devchain)."""
