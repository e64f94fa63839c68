"""The chain: which one (config), how to reach it with bounded calls (rpc), the
EpochAnchor contract (anchor), what it says of a session key (key_facts), wei as ETH text
(units), and the embedded local chain for development (devchain)."""
