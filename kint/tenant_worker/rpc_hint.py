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
from kint.chain.endpoint_source import by_where
from kint.protocol.errors import (DEFAULT_HINTS, DEVCHAIN_RPC_CHECK, DEVCHAIN_RPC_HINT,
                                  DEVCHAIN_STALE_HINT, FILE_RPC_CHECK, FILE_STALE_CHECK,
                                  RETRY_THEN, RPC_CHECK, SPACE_RPC_CHECK, SPACE_STALE_HINT,
                                  UNSETTLED_HINT, UNSETTLED_THEN, ErrorCode, ProtocolError)
from kint.settings.schema import BY_NAME
from kint.settings.values import shown
from kint.settings.wire import source_text
from kint.tenant_worker.space import SpaceContext

GENERIC = DEFAULT_HINTS[ErrorCode.RPC_UNAVAILABLE]
STALE_GENERIC = DEFAULT_HINTS[ErrorCode.STALE_RPC]


def endpoint_check(chain: ChainConfig) -> str:
    """What to check of `chain`'s endpoints, by where they were set."""
    return by_where(chain, devchain=DEVCHAIN_RPC_CHECK, space=SPACE_RPC_CHECK,
                     file=FILE_RPC_CHECK, otherwise=RPC_CHECK)


def stale_hint(chain: ChainConfig) -> str:
    """STALE_RPC's hint for a head older than this machine saw, by where `chain`'s endpoints
    were set: the code's own (KINT_RPC_URL and KINT_RPC_URL_2) only where those are in
    force."""
    return by_where(chain, devchain=DEVCHAIN_STALE_HINT, space=SPACE_STALE_HINT,
                     file=FILE_STALE_CHECK, otherwise=STALE_GENERIC)


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
    endpoints, a config file's and the devchain's alike. Runs under the call's
    settings, so it names the endpoint the call used; when the chain settings cannot be
    read now, the generic hint stays."""
    hint = err.hint or ""
    generic = err.code is ErrorCode.RPC_UNAVAILABLE and hint == GENERIC
    stale = err.code is ErrorCode.STALE_RPC and hint == STALE_GENERIC
    if not generic and not stale and not hint.endswith(UNSETTLED_HINT):
        return
    try:
        chain = ctx.chain()
    except ProtocolError:
        return
    if stale:
        err.hint = stale_hint(chain)
    elif generic:
        err.hint = endpoint_hint(chain)
    else:  # what comes before it (`fund 0x... if the refusal says so; `) is kept
        err.hint = hint.removesuffix(UNSETTLED_HINT) + endpoint_check(chain) + UNSETTLED_THEN


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
