"""Asset checks that every stream shares, read from the lake with an in-memory DuckDB (never
the warehouse file, so a check never waits on its lock), and what Dagster records of a run's
checks (`plan_checks_once`).

A check of a daily stream looks at the days its run landed, so an hourly run costs what it
lands, not what the lake has kept. What needs the whole stream (a key repeated across days,
a page damaged in a day no run lands again) is the same checks in the job
`whole_stream_checks`, which a daily schedule runs (`assets/definitions.py`)."""

from datetime import date, timedelta

import dagster as dg
import sqlalchemy as db
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

from assets.resources import LakeResource
from assets.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from pipelines.damaged import FOLDER, REASON_SUFFIX, damaged_of, set_aside_damaged
from pipelines.drift import drift_in_lake
from pipelines.stream import Stream

#: The job that runs every stream's checks over the whole stream, daily.
WHOLE_STREAM_JOB = "whole_stream_checks"


def checked_days(context: dg.AssetCheckExecutionContext, stream: Stream) -> list[date] | None:
    """The days a check of a daily stream looks at: its run's partitions, which the run
    landed. None, the whole stream, for a snapshot stream, in `WHOLE_STREAM_JOB`, or in a
    run without partitions (a check run alone from the UI), or called outside a run."""
    try:
        run = context.run
    except dg.DagsterError:  # called directly, outside a run: there is none
        return None
    tags = run.tags
    first = tags.get(ASSET_PARTITION_RANGE_START_TAG) or tags.get(PARTITION_NAME_TAG)
    last = tags.get(ASSET_PARTITION_RANGE_END_TAG) or tags.get(PARTITION_NAME_TAG)
    if not stream.daily or run.job_name == WHOLE_STREAM_JOB or not (first and last):
        return None
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


def scope(days: list[date] | None) -> dict[str, str]:
    """What a check looked at, as its metadata says."""
    return {"scope": f"days {days[0]} to {days[-1]}" if days else "the whole stream"}


def nothing_compared(reason: str, metadata: dict | None = None) -> dg.AssetCheckResult:
    """The result of a check that found nothing to compare: not a pass (a green check must
    have looked at something), but a warning, as nothing is known to be wrong either."""
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"nothing compared: {reason}",
        metadata={"nothing_compared": reason, **(metadata or {})},
    )


def unique_ids_check(stream: Stream, asset_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    """No key repeats within a connection (`stream.key` may include a daily stream's `date`)."""
    key = ", ".join(["connection", *stream.key])

    @dg.asset_check(
        asset=asset_key,
        name="ids_unique",
        blocking=False,
        description=(
            f"No ({key}) repeats in {stream.relation}: within the days a run landed, and "
            f"across every landed file in the job {WHOLE_STREAM_JOB}."
        ),
    )
    def ids_unique(context: dg.AssetCheckExecutionContext, lake: LakeResource):
        store, days = lake.lake(), checked_days(context, stream)
        relation = store.relation(stream, days)
        if relation is None:
            return nothing_compared(f"{stream.relation} not landed", scope(days))
        # Keys counted by their 64-bit hash: a repeated key always hashes alike, so none is
        # missed, and the table is a third of the keys' (a year of trigger logs checks in
        # 16 MB). Two keys sharing a hash (about 1e-8 for a million) look repeated: an
        # exact count then decides.
        [(rows, distinct)] = store.query(
            f"SELECT count(*), count(DISTINCT hash({key})) FROM {relation}", spill=True
        )
        if distinct < rows:
            [(rows, distinct)] = store.query(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {relation}", spill=True
            )
        return dg.AssetCheckResult(
            passed=rows == distinct,
            metadata={
                "rows": rows,
                "distinct_keys": distinct,
                "repeated": rows - distinct,
                **scope(days),
            },
        )

    return ids_unique


def schema_matches_check(stream: Stream, asset_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    """Warns while the landed rows hold what the stream's declared schema does not: fields
    the service added, values of another type, declared fields it stopped sending (kept in
    `_extra`, `pipelines/drift.py`)."""

    @dg.asset_check(
        asset=asset_key,
        name="schema_matches",
        blocking=False,
        description=(
            f"Every landed row of {stream.relation} matches its declared columns: no field "
            "the service added, retyped or left out (what did is kept in `_extra`). The "
            f"rows of the days a run landed; every row in the job {WHOLE_STREAM_JOB}."
        ),
    )
    def schema_matches(context: dg.AssetCheckExecutionContext, lake: LakeResource):
        days = checked_days(context, stream)
        rows, drift = drift_in_lake(lake.lake(), stream, days)
        if not rows:
            return nothing_compared(f"{stream.relation} holds no rows", scope(days))
        described = {
            f"{kind}: {path}": f"{count} rows"
            for kind, paths in drift.items()
            for path, count in paths.items()
        }
        return dg.AssetCheckResult(
            passed=not drift,
            severity=dg.AssetCheckSeverity.WARN,
            description=(
                "the service sends what the declared schema does not hold; see `_extra` "
                f"and the metadata ({', '.join(described)})"
                if drift
                else None
            ),
            metadata={"rows": rows, "schema_drift": drift, **scope(days)},
        )

    return schema_matches


def files_readable_check(stream: Stream, asset_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    """Every page of every file of the stream reads (checksums verified), and no damaged
    file lies set aside for a person to look at. What it finds damaged it sets aside, as any
    reader does (`pipelines/damaged.py`); the next sync lands those days again. Warns,
    naming the files."""

    @dg.asset_check(
        asset=asset_key,
        name="files_readable",
        blocking=False,
        description=(
            f"Every page of every file of {stream.relation} reads as Parquet, checksums "
            f"verified, and no damaged file lies in `{FOLDER}/` in the lake. One found damaged "
            "is moved there with its reason, and its day or snapshot lands again with the "
            f"next sync. The files of the days a run landed; every file in the job "
            f"{WHOLE_STREAM_JOB}."
        ),
    )
    def files_readable(context: dg.AssetCheckExecutionContext, lake: LakeResource):
        store, days = lake.lake(), checked_days(context, stream)
        found = set_aside_damaged(store, stream, days, pages=True)
        files = store.files(stream, days)
        set_aside = damaged_of(store, stream)
        if not files and not set_aside:
            return nothing_compared(f"{stream.relation} not landed", scope(days))
        return dg.AssetCheckResult(
            passed=not set_aside,
            severity=dg.AssetCheckSeverity.WARN,
            description=(
                "".join(f"found damaged: {f}. " for f in found)
                + f"{len(set_aside)} damaged file(s) set aside; their days or snapshots land "
                f"again with the next sync. Look at each and its {REASON_SUFFIX}, then delete "
                f"them: {'; '.join(set_aside)}"
                if set_aside
                else None
            ),
            metadata={
                "files": len(files),
                "found_now": {f.path: f.reason for f in found},
                "set_aside": set_aside,
                **scope(days),
            },
        )

    return files_readable


#: The checks every stream gets, each made from (stream, asset key).
STREAM_CHECKS = (unique_ids_check, schema_matches_check, files_readable_check)


def stream_checks(streams: list[Stream]) -> list[dg.AssetChecksDefinition]:
    """Every check each of `streams` gets, on its asset (`<service>/<stream>`)."""
    return [
        check(stream, dg.AssetKey([stream.service, stream.name]))
        for stream in streams
        for check in STREAM_CHECKS
    ]


def plan_checks_once(context: dg.AssetExecutionContext) -> None:
    """One planned evaluation per check of this asset and run, as Dagster means to record a
    check without partitions (docs/dagster.md, where it says what a check's history shows).

    Dagster 1.13 plans such a check once per partition of a run over days, then records its
    one evaluation beside those (`DagsterRun.get_resolved_partitions_subset_for_events` in
    `dagster/_core/storage/dagster_run.py` returns the run's partitions before it looks at the
    check's, which are none); the UI shows each planned day as "Skipped". A backfill launched
    from the UI puts every check of its assets in its runs, so only what is recorded can be
    mended: here, in the asset's step, which runs after Dagster plans the run and before the
    asset's checks. Each check keeps one planned row, without a partition, which its evaluation
    completes (or which the UI shows as failed if the run fails first)."""
    storage = context.instance.event_log_storage
    if not isinstance(storage, SqlEventLogStorage):
        return  # a storage of another kind keeps its records as Dagster writes them
    graph = context.job_def.asset_layer.asset_graph
    names = [
        key.name
        for key in graph.get_check_keys_for_assets({context.asset_key})
        if graph.get(key).partitions_def is None
    ]
    table = AssetCheckExecutionsTable.c
    per_partition = db.and_(
        table.asset_key == context.asset_key.to_string(),
        table.run_id == context.run.run_id,
        table.check_name.in_(names),
        table.execution_status == AssetCheckExecutionRecordStatus.PLANNED.value,
        table.partition.isnot(None),
    )
    first_of_each = db.select(db.func.min(table.id)).where(per_partition).group_by(table.check_name)
    try:
        with storage.index_transaction() as connection:
            kept = [row[0] for row in connection.execute(first_of_each)]
            if kept:  # a run without partitions writes nothing here
                connection.execute(
                    AssetCheckExecutionsTable.update()
                    .where(table.id.in_(kept))
                    .values(partition=None)
                )
                connection.execute(AssetCheckExecutionsTable.delete().where(per_partition))
    except db.exc.SQLAlchemyError as problem:
        # The landing matters more than the checks' history: it goes on, and says so.
        context.log.warning(
            f"checks of {context.asset_key.to_user_string()}: recorded as planned once per day "
            f"of the run, not once: {problem}"
        )
