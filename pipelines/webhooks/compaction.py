"""Stored webhook events into the lake: `datahub/webhook_events/date=D/inbox.parquet`, and
beside it `datahub/webhook_quarantine/date=D/inbox.parquet` for the day's events that
cannot be a row of `webhook_events`.

Each day's events file holds every inbox event of that UTC day up to a row id, and says which
in its metadata (`inbox_max_id`). A day is rewritten whole, from the inbox, when the inbox
holds a newer row for it. Because inbox ids only grow in commit order, an event stored while a
compaction runs has a higher id than the file just written, so the next run picks it up:
compaction is idempotent and never loses an event, with no state beside the files.

Every event is decided on its own, so one event never fails its day (nor, since days are
compacted in order, the days after it). An event becomes a row of `webhook_events` if its
`data` converts to JSON text that is valid UTF-8 and that DuckDB reads as JSON, which is
what the views in `sql/datahub/` do with every row; one that does not (a lone surrogate
inside `data`, escaped or not, is refused by both) goes to the quarantine with the reason
and its raw body, the bytes the signature covered.

Per day, the quarantine file is written first and the events file, which carries the
watermark, last: a crash between them leaves the day stale, and the re-run rewrites both
whole from the inbox, so no quarantine row is ever doubled. A day rewritten with nothing to
quarantine loses its quarantine file before the events file is replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date

import duckdb
import pyarrow as pa

from pipelines.inbox import compaction as plumbing
from pipelines.inbox.compaction import FILE_NAME, ForeignInbox, storable
from pipelines.lake import Lake
from pipelines.stream import TIMESTAMP, Stream, described
from pipelines.webhooks.events import StoredEvent, WebhookInbox
from pipelines.webhooks.inbox import PLACE, inbox_path, open_inbox

RECEIVED_AT = described("received_at", TIMESTAMP, "When the receiver stored the event.")
#: The first columns of both streams: which event it is, by the inbox's key and envelope.
ENVELOPE = [
    described(
        "idempotency_key", pa.string(), "The delivery's `Service-Idempotency-Key`: one per event."
    ),
    described("event", pa.string(), "The event's name, e.g. `message.open`, `order.sync`."),
    described("timestamp", TIMESTAMP, "When the event happened, as the envelope says (UTC)."),
    described("source", pa.string(), "`maac` or `caac`."),
    described("event_id", pa.string(), "Carried by the synchronization events (`*.sync`)."),
]
WEBHOOK_EVENTS = Stream(
    "datahub",
    "webhook_events",
    pa.schema(
        [
            *ENVELOPE,
            described("data", pa.string(), "The envelope's `data`, as JSON text."),
            RECEIVED_AT,
        ]
    ),
    daily=True,
    key=("idempotency_key",),
    day="The UTC day of the event's `timestamp` (the partition).",
)
WEBHOOK_QUARANTINE = Stream(
    "datahub",
    "webhook_quarantine",
    pa.schema(
        [
            *ENVELOPE,
            described("reason", pa.string(), "Why it is not in `webhook_events`."),
            described("body", pa.binary(), "The raw bytes the signature covers."),
            RECEIVED_AT,
        ]
    ),
    daily=True,
    key=("idempotency_key",),
)
WATERMARK = "inbox_max_id"
#: Events decided together: one Arrow table and one DuckDB query per chunk.
CHUNK_EVENTS = 1000
#: A reason quotes at most this much of an error message (DuckDB's quote the input).
REASON_CHARS = 300


@dataclass
class Compaction(plumbing.Compacted):
    rows: int = 0
    quarantined: int = 0

    def rewritten(self) -> tuple[Stream, ...]:
        return (WEBHOOK_EVENTS, WEBHOOK_QUARANTINE) if self.quarantined else (WEBHOOK_EVENTS,)


def compact_inbox(lake_root: str, lake: Lake, log: plumbing.Log, warn: plumbing.Log) -> Compaction:
    """The receiver's inbox compacted into the lake (`compact`), what was done said on `log`
    and `warn`; nothing where no inbox is there yet. The Dagster asset and the command line's
    sync both run it."""
    inbox = open_inbox(lake_root, create=False)
    if inbox is None:
        path = inbox_path(lake_root)
        log(f"{WEBHOOK_EVENTS.relation}: no inbox at {path}, nothing to compact")
        return Compaction(inbox=str(path))
    with inbox:
        done = compact(inbox, lake)
        done.inbox, done.inbox_counts = inbox.location, inbox.counts()
    log(f"{WEBHOOK_EVENTS.relation}: {done.rows} rows over {len(done.days)} day(s) rewritten")
    if done.quarantined:
        warn(
            f"{WEBHOOK_QUARANTINE.relation}: {done.quarantined} event(s) of those days "
            "cannot be rows of webhook_events; kept there with the reason and the raw body"
        )
    return done


def stale_days(inbox: WebhookInbox, lake: Lake) -> Mapping[date, int]:
    """Days whose file lacks events the inbox holds, with the inbox's newest id for each."""
    return plumbing.stale_days(inbox, lake, WEBHOOK_EVENTS, lambda: _every_stale_day(inbox, lake))


def _every_stale_day(inbox: WebhookInbox, lake: Lake) -> dict[date, int]:
    """`stale_days` from every landed day's file and the whole inbox."""
    days = plumbing.landed(lake, WEBHOOK_EVENTS)
    others = plumbing.foreign(inbox.uuid, days, plumbing.landed(lake, WEBHOOK_QUARANTINE))
    if others:
        # A new inbox restarts ids at 1: comparing them with the old watermarks would skip
        # its events, and rewriting the days from it would drop the old inbox's.
        raise ForeignInbox(
            f"{lake.uri(lake.stream_dir(WEBHOOK_EVENTS))} (or {WEBHOOK_QUARANTINE.name} beside "
            "it) was "
            f"compacted from inbox(es) {sorted(others)}, not from {inbox.location} "
            f"({inbox.uuid}); move those files aside or point WEBHOOK_INBOX (or SYNC_STORE) at "
            "the inbox they came from"
        )
    tops = {day: int(metadata.get(WATERMARK, 0)) for day, metadata in days.items()}
    return {day: top for day, top in inbox.day_watermarks().items() if top > tops.get(day, 0)}


#: The webhook receiver's inbox, compacted by a sync and by its sensor's runs.
WEBHOOK_COMPACTION = plumbing.InboxCompaction(
    "webhooks",
    (WEBHOOK_EVENTS, WEBHOOK_QUARANTINE),
    compact_inbox,
    PLACE,
    holds="webhook events",
)


def _reason(text: str) -> str:
    text = storable(text) or ""
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _quarantined(event: StoredEvent, reason: str) -> dict:
    return {
        "idempotency_key": storable(event.idempotency_key),
        "event": storable(event.event),
        "timestamp": event.timestamp,
        "source": storable(event.source),
        "event_id": storable(event.event_id),
        "reason": _reason(reason),
        "body": event.body,
        "received_at": event.received_at,
    }


def _row(event: StoredEvent) -> dict | str:
    """The event's row of webhook_events, or why it cannot have one."""
    try:
        data = json.loads(event.body)["data"]
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        # The receiver read it, but how deep Python's JSON recursion may go depends on the
        # caller's stack, and Dagster's is deeper.
        return "the body nests too deep to convert"
    except Exception as exc:
        return f"the body no longer reads as an event ({type(exc).__name__}: {exc})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "data is not valid Unicode text (a lone surrogate)"
    return {
        "idempotency_key": event.idempotency_key,
        "event": event.event,
        "timestamp": event.timestamp,
        "source": event.source,
        "event_id": event.event_id,
        "data": text,
        "received_at": event.received_at,
    }


def _decide(
    events: list[StoredEvent], con: duckdb.DuckDBPyConnection
) -> tuple[pa.Table, list[dict]]:
    """The chunk's rows of webhook_events as a table, and its quarantine rows."""
    reasons: dict[int, str] = {}
    rows: list[tuple[int, dict]] = []
    for n, event in enumerate(events):
        row = _row(event)
        if isinstance(row, str):
            reasons[n] = row
        else:
            rows.append((n, row))
    schema = WEBHOOK_EVENTS.schema
    try:
        table = pa.Table.from_pylist([row for _, row in rows], schema=schema)
    except Exception:
        # Find the row(s) Arrow refuses; the others are built one by one.
        built = []
        for n, row in rows:
            try:
                built.append((n, pa.Table.from_pylist([row], schema=schema)))
            except Exception as exc:
                reasons[n] = f"not a row of webhook_events ({type(exc).__name__}: {exc})"
        rows = [(n, row) for n, row in rows if n not in reasons]
        table = pa.concat_tables([part for _, part in built]) if built else schema.empty_table()
    # The views cast `data` to JSON on every query: a row DuckDB cannot read breaks them all.
    texts = pa.table({"n": pa.array([n for n, _ in rows], pa.int64()), "data": table["data"]})
    query = con.from_arrow(texts).filter("TRY_CAST(data AS JSON) IS NULL").project("n")
    unreadable = {n for (n,) in query.fetchall()}
    if unreadable:
        for n, row in rows:
            if n in unreadable:
                reasons[n] = f"DuckDB cannot read data as JSON ({_duckdb_error(con, row['data'])})"
        table = table.filter(pa.array([n not in unreadable for n, _ in rows], pa.bool_()))
    quarantine = [_quarantined(events[n], reason) for n, reason in sorted(reasons.items())]
    return table, quarantine


def _duckdb_error(con: duckdb.DuckDBPyConnection, text: str) -> str:
    try:
        con.execute("SELECT CAST(? AS JSON)", [text]).fetchall()
    except duckdb.Error as exc:
        # The message goes on to quote the input and the query.
        return str(exc).split("  Input:")[0].split("\n")[0]
    return "no message"


def _compact_day(
    inbox: WebhookInbox, lake: Lake, day: date, top: int, con: duckdb.DuckDBPyConnection
) -> tuple[int, int]:
    """Rewrite one day from the inbox's events with id <= `top`: (rows, quarantined)."""
    metadata = plumbing.day_metadata(inbox.uuid, {WATERMARK: top})
    # The events file is renamed into place last: its watermark says the day is done only
    # once the quarantine beside it is complete (or gone).
    with lake.writer(WEBHOOK_EVENTS, FILE_NAME, day, metadata) as events:
        quarantine = None
        with ExitStack() as opened:
            for chunk in plumbing.chunks(inbox.events_of(day, top), CHUNK_EVENTS):
                table, bad = _decide(chunk, con)
                events.extend([table])
                if not bad:
                    continue
                if quarantine is None:
                    # Opened on the first bad event: most days have none, and no file.
                    quarantine = opened.enter_context(
                        lake.writer(WEBHOOK_QUARANTINE, FILE_NAME, day, metadata)
                    )
                quarantine.extend(bad)
        if quarantine is None:
            # An earlier run's quarantine of this day would no longer be true.
            lake.drop(WEBHOOK_QUARANTINE, FILE_NAME, day)
    return events.rows, 0 if quarantine is None else quarantine.rows


def compact(inbox: WebhookInbox, lake: Lake) -> Compaction:
    """Rewrite every stale day from the inbox; a day's files are replaced atomically."""
    done = Compaction()
    newest = inbox.newest()
    with duckdb.connect(config={"threads": 1}) as con:
        for day, top in sorted(stale_days(inbox, lake).items()):
            rows, quarantined = _compact_day(inbox, lake, day, top, con)
            done.rows += rows
            done.quarantined += quarantined
            done.days.append(day)
    plumbing.compacted(lake, WEBHOOK_EVENTS, inbox, newest)
    return done
