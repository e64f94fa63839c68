"""Which chain this machine anchors on, read once per use (docs/settings.md; v0.3.0's
10-configuration.md, "Base: chain, RPCs and contract").

Base mainnet is the default: chain 8453, the deployed EpochAnchor
`0xa22E03f7a4145Bf4909a83595C90a38E14d79600` (`KINT_CONTRACT`), the primary endpoint
`KINT_RPC_URL` (else, on macOS, the Alchemy key in the Keychain item `dev.api.alchemy`,
kint.chain.keychain_rpc; else `https://mainnet.base.org`) and an independent second
opinion for a cold start, `KINT_RPC_URL_2` (else `https://base-rpc.publicnode.com` when the
primary is `https://mainnet.base.org`, else `https://mainnet.base.org`). Every value is read through
kint.settings, so it may come from config.toml, the environment or (for a space) the
file's `[spaces."<label>"]` table, and each carries its source.

A devchain running under KINT_HOME (`kint devchain start`) replaces the defaults: its record
names the endpoint, the chain id and the contract it deployed. A primary endpoint that
something sets beats the devchain, so a machine can point at Base while a devchain runs;
one that is the devchain's own endpoint gets the devchain's chain id and contract.

The endpoints a space was given by `kint connect --rpc-urls` (kept in its enrolment) beat
the machine's, and a `[spaces."<label>"]` table in config.toml beats those.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson
from eth_utils import to_checksum_address

from kint import settings
from kint.chain.keychain_rpc import SERVICE as KEYCHAIN_ITEM
from kint.chain.keychain_rpc import SOURCE as KEYCHAIN_SOURCE
from kint.chain.keychain_rpc import keychain_rpc_url
from kint.custody.ids import address_problem, checksum_address
from kint.paths import devchain_dir
from kint.settings.loader import refusal
from kint.settings.schema import BASE_PUBLIC_RPC, DEFAULT_CONTRACT, STRICT

BASE_CHAIN_ID = 8453
BASE_SECOND_RPC = "https://base-rpc.publicnode.com"
DEFAULT_CONFIRMATIONS = 2
DEVCHAIN_SOURCE = "devchain record"
SPACE_URLS_SOURCE = "connect --rpc-urls"


class ChainConfigError(Exception):
    """The chain settings are malformed (a contract that is not an address, a garbled
    devchain record). `code` is the protocol's error code a worker refuses with."""

    code = "BAD_REQUEST"
    hint: str | None = None


class CorruptDevchainRecord(ChainConfigError):
    """The devchain's record under KINT_HOME does not parse: a file of kint's own it cannot
    read (CORRUPT_STATE), refused as `kint devchain` refuses it, with the same way out
    (`kint devchain stop` reads the record too, and refuses it as well)."""

    code = "CORRUPT_STATE"
    hint = "remove it and run `kint devchain start`"


class RefusedChainSetting(ChainConfigError):
    """A chain setting whose value does not parse, where it was set (kint.settings.loader
    `refusal`): no chain is used in its place."""

    code = "CONFIG_INVALID"

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def check_chain_settings() -> None:
    """RefusedChainSetting for the first chain setting in force here that was refused: its
    own value, the machine's primary endpoint (which says whether a devchain is the
    chain), and the second endpoint. Before anything else reads them: a refused value
    reads as unset, which is Base mainnet's default."""
    for name in STRICT:
        for found in ((settings.lookup(name), settings.machine_lookup(name))
                      if name == "KINT_RPC_URL" else (settings.lookup(name),)):
            if found.refused is not None:
                raise RefusedChainSetting(*refusal(found))


@dataclass(frozen=True)
class ChainConfig:
    """`rpc_urls[0]` is the primary endpoint, `rpc_urls[1]` the second opinion.
    `chain_id` is what transactions are signed for: 8453 on Base, the devchain's own id
    locally. (The epoch AAD and the vault message use 8453 whatever this says.)"""

    rpc_urls: tuple[str, ...]
    chain_id: int
    anchor: str
    confirmations: int
    rpc_timeout_s: float
    devchain: bool = False
    # Whether a read that cannot connect or times out is tried twice more (kint.chain.rpc):
    # off where the caller bounds the whole wait (verify's head budget, doctor's calls).
    rpc_retries: bool = True
    allow_single_rpc: bool = False
    # Where the endpoints and the contract came from (a settings source, the devchain
    # record, or the space's `connect --rpc-urls`) and, for a file, which file and table:
    # for `kint config show` and the reports of values a caller gave that are not used.
    rpc_source: str = "default"
    rpc_where: str | None = None
    contract_source: str = "default"
    contract_where: str | None = None
    # Where the loaded `rpc_timeout_s` came from (a chain from `with_rpc_timeout` keeps the
    # loaded one's, which no message reads), as for the endpoints: a command whose chain settings
    # came from the space's worker (`space_chain`) names the worker's KINT_RPC_TIMEOUT and
    # its source when a call times out, not what its own environment would say. Not
    # compared: configs that differ only in where the same timeout came from are the same
    # chain, and verify's head Anchor (SpaceContext.head_anchor) is kept while they are.
    rpc_timeout_source: str = field(default="default", compare=False)
    rpc_timeout_where: str | None = field(default=None, compare=False)
    # Where the machine's own KINT_RPC_URL came from (settings.machine_lookup, without a
    # space's table), which chooses the chain beside the devchain's record: the refusal of a
    # space read on another chain names it as the setting to change back
    # (kint.tenant_worker.enrolled_chain), from this one lookup, and a command that checks
    # the space's chain itself gets the worker's with the rest (`space_chain`), where its
    # own lookup named the command's environment. Not compared, as the timeout's source.
    machine_rpc_source: str = field(default="default", compare=False)
    machine_rpc_where: str | None = field(default=None, compare=False)

    def with_rpc_timeout(self, timeout_s: float) -> ChainConfig:
        """This chain for a read its caller bounds (verify's head read and status's session
        key facts by KINT_VERIFY_HEAD_SECONDS, doctor's calls by its cap): one try of
        `timeout_s`, as three would triple the caller's bound. The timeout's source is left
        the loaded KINT_RPC_TIMEOUT's, and no message reads it from such a chain:
        rpc_hint.chain_timeout_named reads only a chain as loaded (the one `space_chain`
        hands a command), and status's key facts name their bound themselves (bound_named)."""
        return replace(self, rpc_timeout_s=timeout_s, rpc_retries=False)

    @property
    def second_is_same_endpoint(self) -> bool:
        return len(self.rpc_urls) < 2 or same_endpoint(self.rpc_urls[0], self.rpc_urls[1])


def same_endpoint(a: str, b: str) -> bool:
    """Two URLs are the same endpoint when host, port and path match; a trailing slash is
    ignored."""
    pa, pb = urllib.parse.urlsplit(a), urllib.parse.urlsplit(b)

    def key(p: urllib.parse.SplitResult) -> tuple[str, int | None, str]:
        port = p.port or {"https": 443, "http": 80}.get(p.scheme)
        return ((p.hostname or "").lower(), port, p.path.rstrip("/"))

    return key(pa) == key(pb)


def second_rpc(primary: str) -> str:
    explicit = settings.value("KINT_RPC_URL_2")
    if explicit:
        return explicit
    return BASE_SECOND_RPC if same_endpoint(primary, BASE_PUBLIC_RPC) else BASE_PUBLIC_RPC


def devchain_record(home: Path) -> Path:
    return devchain_dir(home) / "devchain.json"


def contract_address() -> str:
    """The contract in force, checksummed. Its value was checked as it was read (the
    settings' address kind, EIP-55 included); checked again with that same check, so a
    caller that skipped check_chain_settings cannot get an unchecked address."""
    value = settings.value("KINT_CONTRACT") or DEFAULT_CONTRACT
    problem = address_problem(value)
    if problem is not None:
        raise ChainConfigError(f"KINT_CONTRACT={value!r} {problem}")
    return checksum_address(value)


@dataclass(frozen=True)
class Devchain:
    rpc_url: str
    chain_id: int
    anchor: str


def read_devchain(home: Path) -> Devchain | None:
    """The devchain's record under `home`, or None when there is none."""
    record = devchain_record(home)
    try:
        data = orjson.loads(record.read_bytes())
        return Devchain(str(data["rpc_url"]), int(data["chain_id"]),
                        to_checksum_address(data["anchor"]))
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise CorruptDevchainRecord(f"{record} is corrupt") from None


def _source(value: settings.Value) -> tuple[str, str | None]:
    if value.where and value.table:
        return value.source, f'{value.where} [spaces."{value.table}"]'
    return value.source, value.where


def load_chain_config(home: Path, space_rpc_urls: list[str] | None = None) -> ChainConfig:
    """The chain settings in force here. For a space, `space_rpc_urls` are the endpoints
    its enrolment keeps (`kint connect --rpc-urls`): they, or a `[spaces."<label>"]` table
    in config.toml, change how the space reaches its chain, never which chain it is.
    A chain setting whose value was refused stops it (RefusedChainSetting)."""
    check_chain_settings()
    timeout_value = settings.lookup("KINT_RPC_TIMEOUT")
    timeout = timeout_value.value
    single = bool(settings.value("KINT_ALLOW_SINGLE_RPC"))
    machine = settings.machine_lookup("KINT_RPC_URL")
    primary = settings.lookup("KINT_RPC_URL")
    contract = settings.lookup("KINT_CONTRACT")
    try:
        dev = read_devchain(home)
    except ChainConfigError:
        if machine.source == settings.DEFAULT:
            raise
        dev = None
    on_devchain = dev is not None and (machine.source == settings.DEFAULT
                                       or same_endpoint(machine.value, dev.rpc_url))
    if on_devchain and machine.source == settings.DEFAULT:
        assert dev is not None
        urls, source = (dev.rpc_url,), (DEVCHAIN_SOURCE, str(devchain_record(home)))
    elif on_devchain:
        urls, source = (machine.value,), _source(machine)
    else:
        first, source = machine.value, _source(machine)
        if machine.source == settings.DEFAULT:  # v0.3.0: else the Keychain's Alchemy key
            keyed = keychain_rpc_url()
            if keyed is not None:
                first, source = keyed, (KEYCHAIN_SOURCE, KEYCHAIN_ITEM)
        urls = (first, second_rpc(first))
    if primary.table is not None:
        urls = (primary.value,) if on_devchain else (primary.value, second_rpc(primary.value))
        source = _source(primary)
    elif space_rpc_urls:
        urls, source = tuple(space_rpc_urls), (SPACE_URLS_SOURCE, None)
    timeout_source = _source(timeout_value)
    sources = {"rpc_source": source[0], "rpc_where": source[1],
               "rpc_timeout_source": timeout_source[0], "rpc_timeout_where": timeout_source[1],
               "machine_rpc_source": machine.source, "machine_rpc_where": machine.where}
    if on_devchain:
        assert dev is not None
        anchor, (csource, cwhere) = dev.anchor, (DEVCHAIN_SOURCE, str(devchain_record(home)))
        if contract.source != settings.DEFAULT:
            anchor, (csource, cwhere) = contract_address(), _source(contract)
        return ChainConfig(urls, dev.chain_id, anchor, 1, timeout, devchain=True,
                           allow_single_rpc=single, contract_source=csource,
                           contract_where=cwhere, **sources)
    csource, cwhere = _source(contract)
    return ChainConfig(urls, BASE_CHAIN_ID, contract_address(), DEFAULT_CONFIRMATIONS, timeout,
                       allow_single_rpc=single, contract_source=csource, contract_where=cwhere,
                       **sources)
