"""One push run, shared by `python -m cli push` and the Dagster jobs: resume imports a
killed run left polling, then per record type plan and (not in a dry run) send, to the
service the record type names (the data hub, or the conversation service), keeping every
rejected row with its reason; at its end, the analysts' file shows what it wrote.

The outbound views are read from the warehouse's definitions in a DuckDB of the push's own
(`Warehouse.in_memory`), not from `warehouse.duckdb`: an analyst's session on that file, even
a read-write one holding DuckDB's lock, cannot stop a push. Only the views the selected
record types read are defined there, so a push costs what its views read, not what the lake
holds.

The outbound views are the user's: the product ships none (demo/sql/outbound holds the
demo's examples). A record type whose view is missing plans and sends nothing, and says so;
the others proceed."""

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial

import duckdb
import httpx
import pyarrow as pa

from pipelines.clients.base import Service
from pipelines.errors import Unavailable, first_line
from pipelines.lake import LakeLocation
from pipelines.lake.object_store import lake_fault
from pipelines.process import collector_paused
from pipelines.push import imports
from pipelines.push.changes import Batch, Changes, context_of, mark_ledger, within_memory
from pipelines.push.lease import Lease, holder_name, no_push_alive, wait_seconds
from pipelines.push.ledger import Ledger, now
from pipelines.push.ledger_merge import merge_ledger
from pipelines.push.plan import OUTBOUND, OUTCOMES, Outbound, Plan, Resend, Sending, make_plan
from pipelines.push.progress import FAILED, NO_VIEW, RecordTypeProgress, record_types_begun
from pipelines.push.send import Client, Sent, send_plan
from pipelines.streams.datahub import CUSTOM_FIELDS
from pipelines.streams.pushed import PUSHED, REJECTED
from pipelines.transport import CallStats
from pipelines.warehouse import WarehouseBusy, WarehouseUnavailable
from pipelines.warehouse.relations import (
    damaged_note,
    refresh_warehouse,
    set_aside_damaged_files,
    views_failed,
    warehouse_of,
)

#: Record types in the order they are pushed (`OUTBOUND` is written in that order).
ORDER = tuple(OUTBOUND)
#: How long one import task may take before the run stops waiting (it resumes next run).
IMPORT_DEADLINE_SECONDS = 30 * 60


@dataclass
class PushReport:
    dry_run: bool
    figures: dict[str, dict[str, int]] = field(default_factory=dict)
    stats: CallStats = field(default_factory=CallStats)
    #: Record types that planned nothing: their outbound view is missing.
    without_view: list[str] = field(default_factory=list)


#: Rows of an outbound view read at a time: a plan keeps the bodies it may send, and the view's
#: rows (every version of every key) only while it reads them (bench: push, peak memory).
ROWS_AT_A_TIME = 10_000


def outbound_rows(warehouse: duckdb.DuckDBPyConnection, source: str) -> Iterator[dict]:
    """The rows of `source` (`outbound.<view>`, or `outbound_source`'s; `warehouse`:
    `Warehouse.in_memory()`), its timestamps
    with timezone in UTC whatever the machine's zone: a body, and so the content hash the
    ledger tells versions apart by, must not change with the host that plans it (and DuckDB
    gives them faster in UTC than in a named zone; bench: push)."""
    warehouse.execute("SET TimeZone = 'UTC'")
    cursor = within_memory(warehouse, f"SELECT * FROM {source}")
    columns = [column[0] for column in cursor.description]
    while batch := cursor.fetchmany(ROWS_AT_A_TIME):
        yield from (dict(zip(columns, row, strict=True)) for row in batch)


def outbound_views(warehouse: duckdb.DuckDBPyConnection) -> set[str]:
    """The views of schema `outbound` the warehouse defines."""
    found = warehouse.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'outbound'"
    ).fetchall()
    return {name for (name,) in found}


def outbound_source(outbound: Outbound, views: set[str]) -> str | None:
    """What a record type's rows are read from: its outbound view, and beside it the rows
    the product adds (`Outbound.also`); None when it has neither."""
    parts = [f"SELECT * FROM outbound.{outbound.view}"] if outbound.view in views else []
    parts += [outbound.also] if outbound.also else []
    if not parts:
        return None
    return "(" + " UNION ALL BY NAME ".join(f"({part})" for part in parts) + ")"


def missing_view(view: str) -> str:
    return f"no outbound.{view} view: write one in a folder listed in WAREHOUSE_SQL"


def custom_field_definitions(lake: LakeLocation) -> dict[str, list[dict]]:
    """Each connection's pulled custom field definitions (datahub.custom_fields), against
    which profile updates are checked."""
    relation = lake.lake().relation(CUSTOM_FIELDS)
    by_connection: dict[str, list[dict]] = {}
    if relation is None:
        return by_connection
    for (row,) in lake.lake().query(f"SELECT to_json(t) FROM {relation} AS t"):
        definition = json.loads(row)
        by_connection.setdefault(definition["connection"], []).append(definition)
    return by_connection


#: What a push writes that the warehouse shows: the ledger and the rejected rows.
WRITTEN = [(PUSHED.relation, None), (REJECTED.relation, None)]


def refresh(lake: LakeLocation) -> str:
    """The analysts' file brought up to date after a push, or why it could not be: the push
    reads its own views, so that is reported, not a reason to fail. Its views read the
    ledger and the rejected rows whole, so a push that wrote to them changes nothing there
    unless they had no file before (`Warehouse.covers`)."""
    try:
        return refresh_warehouse(
            lake.lake_root, lake.warehouse_path, lake.warehouse_sql, written=WRITTEN
        )
    except (WarehouseBusy, WarehouseUnavailable) as failed:
        return str(failed)


@contextmanager
def clients_of(
    services: Mapping[str, Service], stats: CallStats
) -> Iterator[dict[str, dict[str, Client]]]:
    """Per service, a client of each of its connections (by name), on transports paced on
    the key's shared budget (`Service.transport`)."""
    with ExitStack() as stack:
        yield {
            name: {
                c.name: service.client(stack.enter_context(service.transport(c, stats)))
                for c in service.connections
            }
            for name, service in services.items()
        }


#: What the next push does after the lake failed this one.
LAKE_THEN = (
    "what this push sent is kept in its journal, and the next push moves it into the lake "
    "before it plans"
)


def run_push(
    lake: LakeLocation,
    services: Mapping[str, Service],
    dry_run: bool = False,
    record_types: list[str] | None = None,
    resend_in_doubt: Resend = False,
    log=print,
    run_id: str | None = None,
    retry_refused: bool = False,
) -> PushReport:
    """`services`: the settings of each service a record type goes to, by name (`datahub`,
    `conversation`). A push holds the lake's lease (`pipelines/push/lease.py`) from before it
    reads the ledger until its last answer is journaled; a dry run sends nothing and takes
    none. `retry_refused`: send again the rows the service refused, changed or not, without
    waiting for their retry (`pipelines/push/changes.py`)."""
    with ExitStack() as held:
        lease = None
        if not dry_run:
            lease = Lease(lake.lake().place.uri, holder_name(run_id))
            lease.acquire(wait_seconds(), log)
            held.callback(lease.release)
        planned = partial(
            _push, lake, services, dry_run, record_types, resend_in_doubt, log, lease, retry_refused
        )
        try:
            try:
                return planned()
            except duckdb.Error as error:
                # A damaged file fails the views before anything is sent: a pulled one is
                # set aside and the push planned again; a ledger file's is refused.
                damaged = set_aside_damaged_files(lake.lake())
                if not damaged:
                    raise views_failed(error) from None
                log(damaged_note(damaged))
                return planned()
        except httpx.TransportError as error:
            # A service's connection failed past its retries (a write that may have been
            # taken is never retried): said as the service's, not as the library's text.
            raise connection_failed(error) from None
        except OSError as error:
            # The lake's disk or store failed: what was sent is journaled, and the next push
            # moves it into the lake before it plans.
            fault = lake_fault(error, lake.lake_root, LAKE_THEN)
            if fault is None:
                raise
            raise fault from None


def merged_ledger(ledger: Ledger) -> str:
    """Merge the ledger's files (`pipelines/push/ledger_merge.py`) and say what was done. A
    merge that fails is said and the push stands: its rows are in the ledger either way."""
    try:
        merged = merge_ledger(ledger.lake, ledger.journal)
    except (OSError, pa.ArrowException, Unavailable) as problem:  # Unavailable: `SYNC_STORE`
        return f"files not merged ({first_line(problem)}); the next push merges them"
    if merged.written is None:
        return f"nothing to merge; {merged.removed} replaced file(s) deleted"
    return (
        f"{merged.inputs} file(s) merged into {merged.written}; "
        f"{merged.removed} replaced file(s) deleted"
    )


def connection_failed(error: httpx.TransportError) -> Unavailable:
    """A service's connection failing mid-push, said once, with what becomes of the rows."""
    try:
        url = error.request.url  # its scheme, host and port: never a user or a query
        where = f"the service at {url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
    except RuntimeError:  # no request attached
        where = "a service"
    reason = str(error) or type(error).__name__
    return Unavailable(
        f"push: {where} failed while a row was sent ({reason}). What was answered is "
        'journaled; a row whose answer was lost is in doubt (docs/push.md, "In doubt, and '
        'how it is settled"), and the next push sends the rest.'
    )


def _send(
    plan: Plan,
    progress: RecordTypeProgress,
    to: Mapping[str, Client],
    ledger: Ledger,
    lease: Lease | None,
) -> Sent:
    if OUTBOUND[plan.record_type].sending is Sending.MEMBER_IMPORT:
        sent = progress.sending(importing=True)
        return imports.send_imports(
            plan, to, ledger, IMPORT_DEADLINE_SECONDS, lease=lease, sent=sent
        )
    return send_plan(plan, to, ledger, lease=lease, sent=progress.sending(importing=False))


@dataclass
class RecordTypePush:
    """One record type planned, and unless a dry run (`send` None) sent, a batch of keys at
    a time: the keys DuckDB hands over as changed since the last push (`changes.py`), or,
    where it keys a row otherwise than Python, every row of the view at once."""

    record_type: str
    #: Where its rows are read from (`outbound_source`).
    source: str
    ledger: Ledger
    send: Callable[[Plan, RecordTypeProgress], Sent] | None
    custom_fields: Mapping[str, list[dict]]
    resend_in_doubt: Resend
    progress: RecordTypeProgress

    def run(
        self, warehouse: duckdb.DuckDBPyConnection, senders_gone: bool, retry_refused: bool
    ) -> tuple[dict[str, int], list[dict]]:
        """The figures and the rejected rows of the record type (the ledger's marks read,
        `mark_ledger`)."""
        context = context_of(self.record_type, self.custom_fields)
        changes = Changes(
            warehouse,
            self.ledger.lake,
            self.record_type,
            self.source,
            context,
            now(),
            retry_refused,
        )
        figures: Counter = Counter()
        rejections: list[dict] = []
        self.progress.handed_keys(changes.handed())
        self._planned(changes.batches(), senders_gone, figures, rejections, changes)
        if changes.differs:
            figures = Counter(sent=figures["sent"], refused=figures["refused"])
            rejections = []
            self.progress.handed_keys(None)
            rows = outbound_rows(warehouse, self.source)
            whole = Batch(list(rows), self.ledger.latest(self.record_type))
            self._planned([whole], senders_gone, figures, rejections, None)
        else:
            figures.update(changes.carried())
            rejections += changes.carried_rejections()
            if self.send is not None:
                self.ledger.compact()  # the refusals' entries, which the kept marks read
                changes.keep()
        shown = [*OUTCOMES, *([] if self.send is None else ["sent", "refused"])]
        return {name: figures[name] for name in shown}, rejections

    def _planned(
        self,
        batches: Iterable[Batch],
        senders_gone: bool,
        figures: Counter,
        rejections: list[dict],
        changes: Changes | None,
    ) -> None:
        for batch in batches:
            with collector_paused():  # the rows, the ledger's entries and the plan
                plan = make_plan(
                    self.record_type,
                    batch.rows,
                    batch.accepted,
                    self.custom_fields,
                    self.resend_in_doubt,
                    senders_gone,
                )
            # One batch in memory at a time: its rows go once planned, and its plan once
            # sent, before the next batch is read.
            del batch
            self.progress.plan_made(plan)
            figures.update(plan.counts)
            rejections += plan.rejections
            refused: set[str] = set()
            if self.send is not None:
                sent = self.send(plan, self.progress)
                figures.update(sent=sent.accepted, refused=sent.refused)
                rejections += sent.rejections
                refused = {r["key"] for r in sent.rejections}
            if changes is not None:
                changes.decided(plan, refused)
            del plan


def _push(
    lake: LakeLocation,
    services: Mapping[str, Service],
    dry_run: bool,
    record_types: list[str] | None,
    resend_in_doubt: Resend,
    log,
    lease: Lease | None,
    retry_refused: bool,
) -> PushReport:
    report = PushReport(dry_run)
    # Whether what a push marked `sending` and never had answered may still be sent by it.
    senders_gone = lease.alone if lease is not None else no_push_alive(lake.lake().place.uri)
    definitions = custom_field_definitions(lake)
    defined = warehouse_of(lake.lake_root, lake.warehouse_path, lake.warehouse_sql)
    selected = record_types or ORDER
    # Only the views the selected record types read are defined: every other binds over
    # files the push never reads.
    reading = [f"outbound.{OUTBOUND[t].view} {OUTBOUND[t].also or ''}" for t in selected]
    with (
        defined.in_memory(reading) as warehouse,
        Ledger(lake.lake(), lease=lease) as ledger,
    ):
        views = outbound_views(warehouse)
        # The services the push has rows for: one it has no view for needs no key.
        sources = {t: outbound_source(OUTBOUND[t], views) for t in selected}
        wanted = sorted({OUTBOUND[t].service for t, source in sources.items() if source})
        progress = record_types_begun(list(selected), report.stats)
        with clients_of({name: services[name] for name in wanted}, report.stats) as clients:
            for record_type, outbound in OUTBOUND.items():
                resumable = outbound.sending is Sending.MEMBER_IMPORT and not dry_run
                if resumable and outbound.service in clients:
                    resumed = imports.resume_imports(
                        record_type, clients[outbound.service], ledger, IMPORT_DEADLINE_SECONDS
                    )
                    if resumed:
                        log(f"{record_type}: resumed {resumed} task(s) a previous run left polling")
            ledger.compact()  # what a push killed before its end was answered, among them
            mark_ledger(warehouse, ledger.lake)
            for record_type in selected:
                outbound = OUTBOUND[record_type]
                if outbound.view not in views:
                    report.without_view.append(record_type)
                    planned = "the product's rows alone" if outbound.also else "nothing planned"
                    log(f"{record_type}: {missing_view(outbound.view)}; {planned}")
                source = sources[record_type]
                if source is None:
                    report.figures[record_type] = dict.fromkeys(OUTCOMES, 0)
                    progress[record_type].end(NO_VIEW)
                    continue
                sender = None
                if not dry_run:
                    sender = partial(
                        _send, to=clients[outbound.service], ledger=ledger, lease=lease
                    )
                tracked = progress[record_type]
                pushed = RecordTypePush(
                    record_type, source, ledger, sender, definitions, resend_in_doubt, tracked
                )
                tracked.begin()
                try:
                    figures, rejections = pushed.run(warehouse, senders_gone, retry_refused)
                    ledger.reject(record_type, rejections)
                except BaseException:
                    tracked.end(FAILED)
                    raise
                tracked.end()
                log(tracked.line(dry_run))
                # Its figures are the report's: the command line prints them once, as a
                # table, and a Dagster run shows them as the step's and the records' metadata.
                report.figures[record_type] = figures
        if not dry_run:  # under the lease: no other push compacts into the ledger meanwhile
            log(f"ledger: {merged_ledger(ledger)}")
    # The ledger and the rejections may have their first files now: their views follow.
    log(f"warehouse: {refresh(lake)}")
    return report
