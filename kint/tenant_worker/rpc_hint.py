"""RPC_UNAVAILABLE's hint, and an unsettled push journal's (UNSETTLED_HINT), naming what
set the endpoint that did not answer; a timeout's message, naming the KINT_RPC_TIMEOUT
it waited and whose it was (`timeout_named`; a command's own chain call:
`chain_timeout_named`), or the other bound a read waited (`bound_named`); doctor's cap on a
call says its own seconds through the same rewriter (`bound_said`).

The generic hint sends the user to KINT_RPC_URL and KINT_RPC_URL_2. On the devchain no such
setting is in force: the endpoint is the one the devchain's record names, and the fix is
to start the devchain again; a space connected with `kint connect --rpc-urls` keeps its
own endpoints in its enrolment, and a `[spaces."<label>"]` table in config.toml beats both.
A hint that sends the user to a setting that is not in force is a wrong next step.

An interrupted push whose journal is kept because the chain could not be read (pending.py,
overtaken.py, unauthorized_journal.py) is raised with UNSETTLED_HINT, its check the generic
one: the settlement does not know which settings the call runs under. The same check of
the endpoint in force takes its place here, and its tail (UNSETTLED_THEN) stays as it
was, which is what kint-server knows it by to send an agent to memory_pull.

The hints that send the user to another endpoint (an archive one for a pull's walk, one
that serves a gap's epoch or a header, one that takes a send) or to check the endpoints (a
journal an endpoint answered for untruly) are raised in machine-wide words and named the
same way on the way out (`named_hint`, kint.chain.endpoint_source's other_endpoint): they
said "rpc_url in config.toml" or "KINT_RPC_URL" of a space whose endpoints a connect kept
or its own table sets, where neither changes anything.

A chain call that timed out said "the endpoint did not answer within KINT_RPC_TIMEOUT"
with neither the value nor whose it was: a user who set 30 in a harness's entry, or in
config.toml, and saw a push give up could not tell which value it had waited, nor where
to change it. A request's (handlers.with_settings), a watcher push's
(sessions._watcher_push) and a command's own chain call (kint.commands.onchain) name both.
"""

from __future__ import annotations

from kint import settings
from kint.chain.calls import RPC_TIMEOUT_WORDS
from kint.chain.config import DEVCHAIN_SOURCE, ChainConfig
from kint.chain.contract_source import contract_check
from kint.chain.endpoint_source import by_where, endpoint_in_force, other_endpoint
from kint.chain.keychain_rpc import SOURCE as KEYCHAIN_SOURCE
from kint.protocol.errors import (CHAIN_UNREADABLE_AT, DEFAULT_HINTS, DEVCHAIN_RPC_CHECK,
                                  DEVCHAIN_RPC_HINT, DEVCHAIN_STALE_HINT, FILE_RPC_CHECK,
                                  FILE_STALE_CHECK, RETRY_THEN, RPC_CHECK_AT, SPACE_RPC_CHECK,
                                  SPACE_STALE_HINT, STALE_CHECK_AT, STALE_HEAD, UNSETTLED_HINT,
                                  UNSETTLED_THEN,
                                  ErrorCode, ProtocolError, hint_with_notices,
                                  split_notices)
from kint.protocol.hints import (ARCHIVE_AT, ARCHIVE_HINT, CHAIN_UNREADABLE_DEVCHAIN,
                                 CONNECT_WHEN_READABLE, CONNECT_WHEN_READABLE_AT,
                                 HEADER_TRANSPORT_AT,
                                 HEADER_TRANSPORT_DEVCHAIN, HEADER_TRANSPORT_HINT,
                                 SEND_REFUSED_AT, SEND_REFUSED_HINT,
                                 STALE_JOURNAL_AT, STALE_JOURNAL_HINT, UNREAD_GAP_AT,
                                 UNREAD_GAP_HINT, UNREAD_OVER_SKIPPED_AT,
                                 UNREAD_OVER_SKIPPED_HINT)
from kint.settings.schema import BY_NAME
from kint.settings.values import shown
from kint.settings.wire import source_text
from kint.tenant_worker.space import SpaceContext

GENERIC = DEFAULT_HINTS[ErrorCode.RPC_UNAVAILABLE]
# A stale head from the Keychain's endpoint: its second opinion to check, or another primary
# (`{rpc}`: KINT_RPC_URL where it is set, endpoint_source.keychain_replaced). Begins with
# "check ", as STALE_CHECK_AT does: stale_journal_hint takes the check from it.
STALE_KEYCHAIN_AT = "check KINT_RPC_URL_2, or set {rpc}"
STALE_GENERIC = DEFAULT_HINTS[ErrorCode.STALE_RPC]
# The hints raised in machine-wide words that send the user to another endpoint, each with
# its template ({endpoint}: kint.chain.endpoint_source.other_endpoint): a pull's walk that
# met no old history, a gap the last pull could not read (a push's, and a snapshot's given
# --over-skipped), a header the endpoint would not serve (rekey passes it on under
# CHAIN_UNREADABLE: rekey._current_wraps), and CHAIN_UNREADABLE's own.
ANOTHER_ENDPOINT = {ARCHIVE_HINT: ARCHIVE_AT, UNREAD_GAP_HINT: UNREAD_GAP_AT,
                    UNREAD_OVER_SKIPPED_HINT: UNREAD_OVER_SKIPPED_AT,
                    HEADER_TRANSPORT_HINT: HEADER_TRANSPORT_AT,
                    DEFAULT_HINTS[ErrorCode.CHAIN_UNREADABLE]: CHAIN_UNREADABLE_AT}
# The transport failures of ANOTHER_ENDPOINT, each with its words on the devchain: the
# devchain's own check (DEVCHAIN_TRANSPORT), where it said to give the space another RPC
# and then, filled in, that there was none to change.
TRANSPORT = {HEADER_TRANSPORT_AT: HEADER_TRANSPORT_DEVCHAIN,
             CHAIN_UNREADABLE_AT: CHAIN_UNREADABLE_DEVCHAIN}
# A connect's own `--rpc-urls`, which it used in place of the space's settings
# (kint.tenant_worker.connect): the endpoints to change or check are those (name_the_given).
GIVEN_URLS = "the URLs given to this connect's --rpc-urls, which it used in place of settings"
GIVEN_RPC_CHECK = "check the URLs given to --rpc-urls and that they answer"
# A connect's recovery code refused while the chain could not be read, in machine-wide words
# (CONNECT_WHEN_READABLE), up to its `{then}`: named with the check of the endpoints in
# force (`readable_named`).
READABLE_MACHINE_WIDE = CONNECT_WHEN_READABLE.format(then="")


def readable_named(hint: str, check: str) -> str | None:
    """`hint`, CONNECT_WHEN_READABLE in machine-wide words, with `check` (the endpoints in
    force, or a connect's own --rpc-urls) in their place; None: not that hint."""
    if not hint.startswith(READABLE_MACHINE_WIDE):
        return None
    return CONNECT_WHEN_READABLE_AT.format(check=check,
                                           then=hint.removeprefix(READABLE_MACHINE_WIDE))


def endpoint_check(chain: ChainConfig) -> str:
    """What to check of `chain`'s endpoints, by where they were set (the machine's
    KINT_RPC_URL named where it was: kint.chain.endpoint_source.rpc_setting)."""
    return by_where(chain, devchain=DEVCHAIN_RPC_CHECK, space=SPACE_RPC_CHECK,
                     file=FILE_RPC_CHECK, otherwise=RPC_CHECK_AT)


def stale_hint(chain: ChainConfig) -> str:
    """STALE_RPC's hint for a head older than this machine saw, by where `chain`'s endpoints
    were set: the code's own (KINT_RPC_URL and KINT_RPC_URL_2) only where those are in
    force, and named where they are set (the supervisor's environment). The Keychain's
    Alchemy key is no check of a stale head (it reaches one fixed URL, whose lag no key
    mends): KINT_RPC_URL, which takes its place, is the way to another endpoint
    (STALE_KEYCHAIN_AT)."""
    keychain = chain.rpc_source == KEYCHAIN_SOURCE
    return by_where(chain, devchain=DEVCHAIN_STALE_HINT, space=SPACE_STALE_HINT,
                     file=FILE_STALE_CHECK,
                     otherwise=(STALE_KEYCHAIN_AT if keychain else STALE_CHECK_AT) + STALE_HEAD,
                     another=keychain)


def stale_journal_hint(chain: ChainConfig) -> str:
    """An interrupted push's journal an endpoint answered for untruly (pending.py): the
    endpoints in force checked as STALE_RPC's hint checks them (`stale_hint`, less its
    reason), then the pull that settles it."""
    check = stale_hint(chain).partition(STALE_HEAD)[0]
    return STALE_JOURNAL_AT.format(endpoints=check.removeprefix("check "))


def named_hint(chain: ChainConfig, hint: str) -> str | None:
    """`hint`, raised in machine-wide words, naming where `chain`'s endpoints in force are
    set (None: not one of those hints)."""
    if hint == STALE_JOURNAL_HINT:
        return stale_journal_hint(chain)
    if hint == SEND_REFUSED_HINT:
        return SEND_REFUSED_AT.format(endpoint=endpoint_in_force(chain))
    template = ANOTHER_ENDPOINT.get(hint)
    if template is None:
        return None
    if template in TRANSPORT and chain.rpc_source == DEVCHAIN_SOURCE:
        # A transport failure on the devchain almost always means it is not running (the
        # RPC_UNAVAILABLE hint there says so: an endpoint of another chain is no fix): the
        # devchain's check whole, no RPC of its own to change.
        return TRANSPORT[template]
    # An archive endpoint is nearly always a provider's keyed URL, which `kint connect
    # --rpc-urls` refuses on a command line: the way to give one holds no key.
    return template.format(endpoint=other_endpoint(chain, keyless=hint == ARCHIVE_HINT))


def name_the_given(err: ProtocolError, chain: ChainConfig | None = None) -> None:
    """Give `err`, a connect's failure through the endpoints given to its `--rpc-urls`, the
    hint that names them (GIVEN_URLS), when it is RPC_UNAVAILABLE with the generic hint or
    one of ANOTHER_ENDPOINT's: `name_the_endpoint` names the settings' endpoints, which a
    connect given `--rpc-urls` did not use, and said "rpc_url in config.toml, where the
    endpoints in force are set" of a config.toml whose endpoint answered. Named before it
    leaves the op, it is none of the machine-wide hints, which `name_the_endpoint` leaves.
    So is a recovery code's refusal while the chain could not be read (CONNECT_WHEN_READABLE:
    `readable_named`), which said "check KINT_RPC_URL" of a connect's dead --rpc-urls, and
    the check of a contract with no EpochAnchor (kint.chain.contract_source), named with
    the settings' endpoint where it was raised, given `chain` (the settings' the connect
    read through, its contract the one checked)."""
    bare, notices = split_notices(err.hint)
    hint = bare or ""
    if err.code is ErrorCode.RPC_UNAVAILABLE and hint == GENERIC:
        hint = GIVEN_RPC_CHECK + RETRY_THEN
    elif hint in ANOTHER_ENDPOINT:
        hint = ANOTHER_ENDPOINT[hint].format(endpoint=GIVEN_URLS)
    elif hint.startswith(READABLE_MACHINE_WIDE):
        hint = readable_named(hint, GIVEN_RPC_CHECK) or hint
    elif chain is not None and hint == contract_check(chain):
        hint = contract_check(chain, endpoint=GIVEN_URLS)
    else:
        return
    err.hint = hint_with_notices(hint, notices)


def endpoint_hint(chain: ChainConfig) -> str:
    """The hint for an endpoint of `chain` that did not answer, by where it was set."""
    if chain.rpc_source == DEVCHAIN_SOURCE:
        return DEVCHAIN_RPC_HINT
    return endpoint_check(chain) + RETRY_THEN  # a space's own endpoints: SPACE_RPC_HINT


def name_the_endpoint(ctx: SpaceContext, err: ProtocolError) -> None:
    """Give `err` the hint of the endpoint in force, when it is RPC_UNAVAILABLE with the
    generic hint (a handler's own hint is kept), or ends with UNSETTLED_HINT (whatever its
    code: an endpoint that contradicts itself is STALE_RPC); a STALE_RPC with the code's
    own hint (a head older than this machine saw) names the endpoints in force
    (`stale_hint`), where it said "check KINT_RPC_URL and KINT_RPC_URL_2" of a space's kept
    endpoints, a config file's and the devchain's alike. So does a hint that sends the user
    to another endpoint or to check the endpoints (`named_hint`), whatever its code, and a
    recovery code's connect refused while the chain could not be read (`readable_named`:
    its hint said "check KINT_RPC_URL or the space's endpoints" whatever was in force). Runs
    under the call's settings, so it names the endpoint the call used; when the chain
    settings cannot be read now, the machine-wide words stay. The notices a push put under
    its hint (push.py: `--reanchor` unused, an overtaken journal's) are set aside while
    the hint is matched and named, then put back under it: matched with them, a refused
    send's or a gap's hint kept the machine-wide words."""
    bare, notices = split_notices(err.hint)
    hint = bare or ""
    generic = err.code is ErrorCode.RPC_UNAVAILABLE and hint == GENERIC
    stale = err.code is ErrorCode.STALE_RPC and hint == STALE_GENERIC
    elsewhere = hint in (STALE_JOURNAL_HINT, SEND_REFUSED_HINT) or hint in ANOTHER_ENDPOINT
    readable = hint.startswith(READABLE_MACHINE_WIDE)
    if (not generic and not stale and not elsewhere and not readable
            and not hint.endswith(UNSETTLED_HINT)):
        return
    try:
        chain = ctx.chain()
    except ProtocolError:
        return
    if readable:
        err.hint = readable_named(hint, endpoint_check(chain))
    elif elsewhere:
        err.hint = named_hint(chain, hint)
    elif stale:
        err.hint = stale_hint(chain)
    elif generic:
        err.hint = endpoint_hint(chain)
    else:  # what comes before it (`fund 0x... if the refusal says so; `) is kept
        err.hint = hint.removesuffix(UNSETTLED_HINT) + endpoint_check(chain) + UNSETTLED_THEN
    err.hint = hint_with_notices(err.hint, notices)


def timeout_named(err: ProtocolError) -> None:
    """Give a timed-out chain call's message the KINT_RPC_TIMEOUT it waited and whose it was
    (this call's, a kint-server session's for the watcher's pushes, config.toml's, the
    supervisor's environment's, the default): called under the settings the work ran
    with, so the value looked up is the one it waited. Any other failure is left as it
    is, and so is one already named."""
    named = bound_named(err.message, "KINT_RPC_TIMEOUT")
    if named != err.message:
        err.message = named
        err.args = (err.message,)


def bound_named(text: str, name: str) -> str:
    """`text`, a chain failure's words, with a timeout naming the setting `name` that bounded
    the wait, its value in force and whose it was, where it said "within KINT_RPC_TIMEOUT":
    a read made with another bound (status's session key facts wait at most
    KINT_VERIFY_HEAD_SECONDS) sent the user to a setting that changes nothing. Called
    under the settings the read ran with; any other text is returned as it is."""
    return bound_said(text, _setting_said(settings.lookup(name)))


def chain_timeout_named(text: str, chain: ChainConfig) -> str:
    """`text`, the failure of a chain call a command made itself (kint.commands.onchain:
    `authorize`, `session-key show`), with a timeout naming the KINT_RPC_TIMEOUT `chain`
    waited and whose it was. Not looked up here: the value and its source are the ones
    `chain` was loaded with, the space's worker's when it handed them over (`space_chain`:
    the supervisor's environment or the space's table in config.toml, which this process
    does not read)."""
    return bound_said(text, _setting_said(settings.Value(
        BY_NAME["KINT_RPC_TIMEOUT"], chain.rpc_timeout_s, chain.rpc_timeout_source,
        chain.rpc_timeout_where)))


def _setting_said(value: settings.Value) -> str:
    """The bound a timeout waited, as the setting in force: "NAME=Xs (SOURCE; ", SOURCE as
    `source_text` says it ("the default", "from ..."). The one place a setting's value
    becomes those words, so a looked-up value (`bound_named`) and a chain's as loaded
    (`chain_timeout_named`) cannot come to be said two ways."""
    return f"{value.name}={shown(value.setting, value.value)}s ({source_text(value)}; "


def bound_said(text: str, said: str) -> str:
    """`text` with "KINT_RPC_TIMEOUT (" of a timeout's words (RPC_TIMEOUT_WORDS, then the
    exception's name in parentheses: kint.chain.calls.transport_words) said as `said`, the
    bound the call waited, which opens that parenthesis and ends with "; " before the
    name: the one rewriter of those words, for a setting in force (`_setting_said`) and
    for doctor's own cap (doctor_chain), so neither leaves two parentheses in a row. Any
    other text is returned as it is."""
    if RPC_TIMEOUT_WORDS + " (" not in text:
        return text
    named = RPC_TIMEOUT_WORDS.removesuffix("KINT_RPC_TIMEOUT") + said
    return text.replace(RPC_TIMEOUT_WORDS + " (", named, 1)
