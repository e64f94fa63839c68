"""Where a space's endpoints in force were set, and so where the user gives it another.

One mechanism decides it (ChainConfig.rpc_source, set by kint.chain.config's
load_chain_config), for every wording that sends the user to change the endpoint: the
worker's RPC_UNAVAILABLE and STALE_RPC hints (kint.tenant_worker.rpc_hint), a cold start's
and doctor's (kint.chain.chain_id), and the refusals that ask for another endpoint's word
(an endpoint on another chain, kint.chain.anchor; a reorganisation, behind_head and
reanchor). Those said "rpc_url in config.toml, or `kint connect --rpc-urls`" alike: the
machine-wide rpc_url does not replace the endpoints a connect kept for a space, and a
connect's do not replace a space's own table in config.toml, so one of the two named
changed nothing. The hints of kint.protocol.hints that ask for another endpoint (an `_AT`
template) are built from it on the way out of a worker's op (rpc_hint.named_hint).
"""

from __future__ import annotations

from kint import settings
from kint.chain.config import DEVCHAIN_SOURCE, SPACE_URLS_SOURCE, ChainConfig
from kint.settings.loader import space_label

# A space's own endpoints given by a connect; it replaces those an earlier connect kept.
CONNECT_RPC_URLS = "`kint connect --rpc-urls URL`"
# What connect takes there: an endpoint with a key in it is refused on a command line
# (kint.commands.connect.checked_rpc_urls) and goes in the space's table.
KEYLESS = " with a URL that holds no key"
# A space's own table in config.toml: it beats a connect's endpoints and the machine's.
# `{label}`: the space's, where this process knows it (a worker), else `<label>`.
SPACE_TABLE = 'rpc_url in the space\'s [spaces."{label}"] table in config.toml'


def space_table(label: str | None = None) -> str:
    """SPACE_TABLE for the space this process serves: a worker names its own label, where
    the hint said a literal `<label>` the user had to work out (kint.settings.loader
    knows it: the names the worker's settings find the table by). A command reading the
    chain in its own process (kint.commands.onchain.open_anchor) serves no space, but
    knows the caller's: `label`."""
    return SPACE_TABLE.format(label=label or space_label() or "<label>")


def kept_endpoints(chain: ChainConfig) -> bool:
    """Whether `chain`'s endpoints are the ones the space's enrolment keeps from `kint
    connect --rpc-urls` (the one place that decides it, for every wording)."""
    return chain.rpc_source == SPACE_URLS_SOURCE


def by_where(chain: ChainConfig, *, devchain: str, space: str, file: str,
             otherwise: str) -> str:
    """The text of these four for where `chain`'s endpoints were set: the devchain's record,
    the space's kept endpoints, a settings file (`file` names it: its `{where}`), or else
    the environment or the default. One order of asking serves every endpoint wording
    (this module's and kint.tenant_worker.rpc_hint's), so that they never send the user to
    different places."""
    if chain.rpc_source == DEVCHAIN_SOURCE:
        return devchain
    if kept_endpoints(chain):
        return space
    if chain.rpc_source == settings.FILE and chain.rpc_where:
        return file.format(where=chain.rpc_where)
    return otherwise


def other_endpoint(chain: ChainConfig, *, keyless: bool = False,
                   label: str | None = None) -> str:
    """Where to give the space of `chain` another endpoint, by where the ones in force were
    set: a connect's kept endpoints are replaced by a connect again (or the space's table,
    which beats them); a config file's by its rpc_url; the devchain's record's by the
    space's own (the machine's KINT_RPC_URL there would take every space off the devchain);
    the machine's settings by KINT_RPC_URL, or the space's own. `keyless`: the endpoint
    asked for is most often a provider's keyed URL (an archive one), which a connect
    refuses on its command line: the connect is named for one with no key in it. `label`:
    the space's, where this process is no worker of it (`space_table`)."""
    table, keys = space_table(label), KEYLESS if keyless else ""
    return by_where(
        chain, devchain=f"{CONNECT_RPC_URLS}{keys}, or {table}",
        space=(f"{CONNECT_RPC_URLS} again{keys}, which replaces the endpoints the last one "
               f"kept for this space, or {table}"),
        file="rpc_url in {where}, where the endpoints in force are set",
        otherwise=f"KINT_RPC_URL, or {CONNECT_RPC_URLS} for this space alone"
                  + (f",{keys}" if keys else ""))
