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
from kint.chain.keychain_rpc import SERVICE as KEYCHAIN_ITEM
from kint.chain.keychain_rpc import SOURCE as KEYCHAIN_SOURCE
from kint.settings.loader import env_source, space_label

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


# The machine's primary endpoint setting where `by_where`'s `otherwise` is in force, named
# where it was set (`rpc_setting`), as kint.chain.contract_source names KINT_CONTRACT: a
# plain "KINT_RPC_URL" beside "KINT_CONTRACT in the supervisor's environment" sent the user
# to a setting that, in their own shell, changes nothing. The Keychain's endpoint is the
# one v0.3.0 reads while KINT_RPC_URL is unset (kint.chain.keychain_rpc): it is what to
# check, and KINT_RPC_URL, which takes its place, is where another endpoint is given.
RPC_SETTING = {
    settings.DAEMON_ENV: "KINT_RPC_URL in the supervisor's environment",
    settings.THIS_CALL: "KINT_RPC_URL in this command's environment",
    KEYCHAIN_SOURCE: (f"the macOS Keychain's Alchemy key (item `{KEYCHAIN_ITEM}`, read while "
                      f"KINT_RPC_URL is unset)"),
}
# Where the Keychain's endpoint is replaced, named where the process that read the Keychain
# sees it (`{where}`: keychain_replaced): set in the user's own shell, KINT_RPC_URL changed
# nothing for a running supervisor's workers, as the comment above says of its environment.
KEYCHAIN_REPLACED = ("KINT_RPC_URL ({where}), which takes the place of the macOS Keychain's "
                     "Alchemy key")
# Read by every process of this machine, a running worker's included (kint.settings.loader).
CONFIG_RPC_URL = "`rpc_url` in config.toml"


def keychain_replaced() -> str:
    """KEYCHAIN_REPLACED for this process: in the supervisor's and its workers' (the
    processes whose hints a worker raises), config.toml or the supervisor's environment;
    in a command's, config.toml alone, which both a command reading the chain itself and
    a connected space's worker read, where "this command's environment" is no place the
    worker whose endpoint it is looks."""
    if env_source() == settings.DAEMON_ENV:
        return KEYCHAIN_REPLACED.format(where=f"{CONFIG_RPC_URL}, or the supervisor's "
                                              f"environment")
    return KEYCHAIN_REPLACED.format(where=CONFIG_RPC_URL)


def rpc_setting(chain: ChainConfig, *, another: bool = False) -> str:
    """The setting that gave `chain` its endpoints where the machine's settings did (the
    supervisor's environment, this command's, the Keychain; else plain KINT_RPC_URL: the
    default, or a source no wording names). `another`: where the user gives another
    endpoint, which for the Keychain's is KINT_RPC_URL."""
    if another and chain.rpc_source == KEYCHAIN_SOURCE:
        return keychain_replaced()
    return RPC_SETTING.get(chain.rpc_source, "KINT_RPC_URL")


def kept_endpoints(chain: ChainConfig) -> bool:
    """Whether `chain`'s endpoints are the ones the space's enrolment keeps from `kint
    connect --rpc-urls` (the one place that decides it, for every wording)."""
    return chain.rpc_source == SPACE_URLS_SOURCE


def by_where(chain: ChainConfig, *, devchain: str, space: str, file: str,
             otherwise: str, another: bool = False) -> str:
    """The text of these four for where `chain`'s endpoints were set: the devchain's record,
    the space's kept endpoints, a settings file (`file` names it: its `{where}`), or else
    the environment, the Keychain or the default (`otherwise`: its `{rpc}` names which,
    `rpc_setting`). One order of asking serves every endpoint wording (this module's and
    kint.tenant_worker.rpc_hint's), so that they never send the user to different places."""
    if chain.rpc_source == DEVCHAIN_SOURCE:
        return devchain
    if kept_endpoints(chain):
        return space
    if chain.rpc_source == settings.FILE and chain.rpc_where:
        return file.format(where=chain.rpc_where)
    return otherwise.replace("{rpc}", rpc_setting(chain, another=another))


def other_endpoint(chain: ChainConfig, *, keyless: bool = False,
                   label: str | None = None) -> str:
    """Where to give the space of `chain` another endpoint, by where the ones in force were
    set: a connect's kept endpoints are replaced by a connect again (or the space's table,
    which beats them); a config file's by its rpc_url; the devchain's record's by the
    space's own (the machine's KINT_RPC_URL there would take every space off the devchain);
    the machine's settings by KINT_RPC_URL where it was set (`rpc_setting`), or the
    space's own. `keyless`: the endpoint
    asked for is most often a provider's keyed URL (an archive one), which a connect
    refuses on its command line: the connect is named for one with no key in it. `label`:
    the space's, where this process is no worker of it (`space_table`)."""
    table, keys = space_table(label), KEYLESS if keyless else ""
    return by_where(
        chain, devchain=f"{CONNECT_RPC_URLS}{keys}, or {table}",
        space=(f"{CONNECT_RPC_URLS} again{keys}, which replaces the endpoints the last one "
               f"kept for this space, or {table}"),
        file="rpc_url in {where}, where the endpoints in force are set",
        otherwise=f"{{rpc}}, or {CONNECT_RPC_URLS} for this space alone"
                  + (f",{keys}" if keys else ""), another=True)


def endpoint_in_force(chain: ChainConfig) -> str:
    """The endpoint `chain`'s calls go through, by where it was set: what a hint asks the
    user to check (a refused send's, a contract with no EpochAnchor's:
    kint.chain.contract_source), where "KINT_RPC_URL" or "a connect's endpoints" named two
    places, at most one of them in force."""
    return by_where(chain, devchain="the devchain's, which `kint devchain status` names",
                    space="one of those this space was given by `kint connect --rpc-urls`",
                    file="set in {where}", otherwise="{rpc}")
