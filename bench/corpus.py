"""Realistic rows for the verify and chain benchmarks, written through Sibyl's own client.

The mix, by default: 85% entities, 3% state documents, 12% journal events. An entity is a
category (one of twelve), a unique kebab-case name of two to four words, and a JSON body
of 100-400 characters (a summary in English-like prose, plus fields that vary by row:
owner, tags, a date, sometimes a number or a second sentence). A state document is a small
JSON object of current focus and next steps. A journal event has a timestamp and
evaluated / acted / forward lists of short sentences.

The prose is drawn from a fixed vocabulary of about 700 common English and
software-and-work words with a Zipf-like weighting, so it compresses about as English
does (gzip -9 takes it to roughly a third). Everything comes from one seeded
`random.Random`, so a given (n, seed) always gives the same rows, byte for byte, except
the ids and timestamps Sibyl itself stamps on write (the uuids and `created_at` /
`updated_at` columns), which kint does not export.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pro_account import ProAccount

_WORDS = """
the of and to a in is it you that he was for on are with as his they be at one have this
from or had by not word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so
these her long make thing see him two has look more day could go come did number sound no
most people my over know water than call first who may down side been now find any new work
part take get place made live where after back little only round man year came show every
good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air
well also play small end put home read hand port large spell add even land here must big
high such follow act why ask men change went light kind off need house picture try us again
animal point mother world near build self earth father head stand own page should country
found answer school grow study still learn plant cover food sun four between state keep eye
never last let thought city tree cross farm hard start might story saw far sea draw left late
run while press close night real life few north open seem together next white children begin
got walk example ease paper group always music those both mark often letter until mile river
car feet care second book carry took science eat room friend began idea fish mountain stop
once base hear horse cut sure watch color face wood main enough plain girl usual young ready
above ever red list though feel talk bird soon body dog family direct pose leave song measure
door product black short numeral class wind question happen complete ship area half rock
order fire south problem piece told knew pass since top whole king space heard best hour
better true during hundred five remember step early hold west ground interest reach fast verb
sing listen six table travel less morning ten simple several vowel toward war lay against
pattern slow center love person money serve appear road map rain rule govern pull cold notice
voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star
box noun field rest correct able pound done beauty drive stood contain front teach week final
gave green oh quick develop ocean warm free minute strong special mind behind clear tail
produce fact street inch multiply nothing course stay wheel full force blue object decide
surface deep moon island foot system busy test record boat common gold possible plane stead
dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire
bring yes distant fill east paint language among release deploy review merge branch commit
build pipeline staging production incident outage latency budget invoice customer vendor
contract meeting agenda deadline sprint backlog ticket owner reviewer approval rollback
migration schema database index query cache replica backup restore archive retention policy
compliance audit security token password rotation certificate domain server cluster region
container image registry service endpoint gateway webhook callback retry timeout quota limit
dashboard alert pager escalation runbook postmortem estimate forecast revenue margin hiring
interview onboarding offsite roadmap milestone launch beta feedback survey churn renewal
pricing discount refund shipment warehouse supplier inventory recipe garden dentist flight
hotel passport visa birthday anniversary gym doctor prescription insurance mortgage tax
receipt lawyer landlord lease repair plumber electrician kitchen bathroom roof window carpet
Friday Monday Tuesday Wednesday Thursday Saturday Sunday January February March April May
June July August September October November December Alice Bob Carol Dana Eve Frank Grace
Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil Trent Victor Walter Berlin Lisbon
Nairobi Toronto Osaka Denver Madrid Oslo Austin Dublin Python Rust Postgres Kubernetes
Terraform Grafana Stripe Slack GitHub Linux
""".split()

_CATEGORIES = ["rules", "people", "projects", "preferences", "decisions", "facts", "tools",
               "contacts", "incidents", "recipes", "places", "accounts"]
_STATUSES = [None, None, None, "active", "draft", "done"]
_FIELDS = ["owner", "where", "source", "priority", "team", "topic", "channel", "due"]


@dataclass(frozen=True)
class Row:
    """One row to write: `kind` is entity, state or event; `args` go to Sibyl's method."""

    kind: str
    args: dict[str, Any]

    @property
    def words(self) -> list[str]:
        """The row's distinctive words, for queries that should find it."""
        return self.args.get("_words", [])


class _Prose:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.weights = [1.0 / (rank + 8) for rank in range(len(_WORDS))]

    def words(self, n: int) -> list[str]:
        return self.rng.choices(_WORDS, weights=self.weights, k=n)

    def rare_words(self, n: int) -> list[str]:
        """Words from the less common half: what makes a row findable."""
        return self.rng.sample(_WORDS[len(_WORDS) // 3:], n)

    def sentence(self, lo: int = 6, hi: int = 16) -> str:
        w = self.words(self.rng.randint(lo, hi))
        text = " ".join(w)
        if self.rng.random() < 0.2:
            text += (f" ({self.rng.randint(2, 990)} "
                     f"{self.rng.choice(['ms', 'days', 'EUR', '%', 'GB', 'rows'])})")
        return text[0].upper() + text[1:] + "."

    def date(self) -> str:
        return f"2026-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"


def _entity(p: _Prose, i: int) -> Row:
    rng = p.rng
    category = _CATEGORIES[rng.randrange(len(_CATEGORIES))]
    key_words = p.rare_words(rng.randint(2, 3))
    name = "-".join(w.lower() for w in key_words) + f"-{i}"
    target = rng.randint(100, 400)
    body: dict[str, Any] = {"summary": " ".join(key_words) + ": " + p.sentence()}
    for field in rng.sample(_FIELDS, rng.randint(1, 3)):
        body[field] = p.date() if field == "due" else " ".join(p.words(rng.randint(1, 3)))
    if rng.random() < 0.5:
        body["tags"] = [w.lower() for w in p.words(rng.randint(1, 4))]
    # Grow to the target with more prose, then trim at a word boundary.
    while len(json.dumps(body)) < target:
        body["note"] = (body.get("note", "") + " " + p.sentence()).strip()
    while len(json.dumps(body)) > 400 and "note" in body:
        cut = body["note"].rsplit(" ", 1)[0]
        if cut == body["note"]:
            del body["note"]
        else:
            body["note"] = cut
    return Row("entity", {"category": category, "name": name, "body": body,
                          "status": _STATUSES[rng.randrange(len(_STATUSES))],
                          "_words": key_words})


def _state(p: _Prose, i: int) -> Row:
    key_words = p.rare_words(2)
    return Row("state", {"key": f"focus-{'-'.join(w.lower() for w in key_words)}-{i}",
                         "body": {"now": " ".join(key_words) + ": " + p.sentence(),
                                  "next": [p.sentence(4, 9) for _ in range(p.rng.randint(1, 3))],
                                  "since": p.date()},
                         "_words": key_words})


def _event(p: _Prose, i: int) -> Row:
    rng = p.rng
    key_words = p.rare_words(2)
    ts = (f"{p.date()}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
          f"{rng.randint(0, 59):02d}Z")
    return Row("event", {"ts": ts,
                         "evaluated": [" ".join(key_words) + ": " + p.sentence(4, 10)],
                         "acted": [p.sentence(4, 10) for _ in range(rng.randint(1, 2))],
                         "forward": [p.sentence(4, 8)] if rng.random() < 0.6 else None,
                         "_words": key_words})


def rows(n: int, seed: int = 2026, state_share: float = 0.03,
         event_share: float = 0.12) -> list[Row]:
    """n rows in a fixed, seeded order (the order they are written in)."""
    rng = random.Random(seed)
    p = _Prose(rng)
    out = []
    for i in range(n):
        r = rng.random()
        if r < state_share:
            out.append(_state(p, i))
        elif r < state_share + event_share:
            out.append(_event(p, i))
        else:
            out.append(_entity(p, i))
    return out


def write(client: Any, row: Row) -> None:
    """One row through Sibyl's own write method for its tier."""
    a = row.args
    if row.kind == "entity":
        client.set_entity(a["category"], a["name"], a["body"], status=a["status"])
    elif row.kind == "state":
        client.set_state(a["key"], a["body"])
    else:
        client.write_event(ts=a["ts"], evaluated=a["evaluated"], acted=a["acted"],
                           forward=a["forward"])


def open_client(db: Path, tenant: str) -> Any:
    """Sibyl's MemoryClient.local with its NullEntitlementGate (Sibyl's test support,
    passed in code: the benchmarks have no Sibyl account) and Sibyl's own CapGate: the free
    tier's 5 MiB cap. `write_store(..., account=...)` opens a Pro account's client instead."""
    from sibyl_memory_client import MemoryClient
    from sibyl_memory_client.testing import NullEntitlementGate

    db.parent.mkdir(parents=True, exist_ok=True)
    return MemoryClient.local(db, tenant_id=tenant, entitlement_gate=NullEntitlementGate())


@dataclass
class Written:
    """What `write_store` did: how many rows it wrote, in how long, and why it stopped
    early (Sibyl's CapExceededError message), if it did; and which cap gate the writes
    went through (`cap_gate`: the free tier's, or a Pro account's)."""

    requested: int
    written: int
    seconds: float
    stopped_by: str | None
    cap_gate: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"requested": self.requested, "written": self.written,
                "seconds": self.seconds, "rows_per_s": self.written / self.seconds
                if self.seconds else None, "stopped_by": self.stopped_by,
                "cap_gate": self.cap_gate}


FREE_TIER = "Sibyl's CapGate (free tier, 5 MB cap)"
PRO_ACCOUNT = ("Sibyl's EntitlementGate and CapGate for a Pro account on a throwaway "
               "signing key (bench/pro_account.py): uncapped")


def write_store(db: Path, tenant: str, data: list[Row], *,
                account: ProAccount | None = None) -> Written:
    """Write `data` in order into the store at `db` through Sibyl's own write methods,
    timing the writes (opening the client is not timed). Stops at the first
    CapExceededError.

    By default the client is the free tier's: the 5 MiB cap, counted over every store
    Sibyl can resolve on the machine, stops the writes at ~2,047 rows. With `account`
    (a `ProAccount` installed in this process's HOME) the writes go through Sibyl's real
    gates for that Pro account, which has no cap; the store's folder gets the account's
    tier cache first, as a signed-in Pro machine holds it."""
    import time

    from sibyl_memory_client.exceptions import CapExceededError

    if account is None:
        client = open_client(db, tenant)
    else:
        account.mark_uncapped(db.parent)
        client = account.open_client(db, tenant, Path.home())
    stopped_by = None
    written = 0
    try:
        t0 = time.perf_counter()
        for row in data:
            try:
                write(client, row)
            except CapExceededError as err:
                stopped_by = str(err).strip().splitlines()[0]
                break
            written += 1
        seconds = time.perf_counter() - t0
    finally:
        client.storage.close()
    return Written(len(data), written, seconds, stopped_by,
                   {"kind": FREE_TIER if account is None else PRO_ACCOUNT})
