"""Asset checks that every stream shares, read from the lake with an in-memory DuckDB (never
the warehouse file, so a check never waits on its lock), and how a check of a
day-partitioned stream records its result (`each_day`).

A check of a daily stream looks at the days its run landed, so an hourly run costs what it
lands, not what the lake has kept. What needs the whole stream (a key repeated across days,
a page damaged in a day no run lands again) is the same checks in the job
`whole_stream_checks`, which a daily schedule runs (`assets/definitions.py`).

Every check of a day-partitioned stream is partitioned like it (`partitions_of`): Dagster
plans it once per day of a run, and shows its result per day. Dagster 1.13 records an
`AssetCheckResult` under the run's day only in a run of one day; a run over days (a
backfill, a sync, the hourly schedules) evaluates each check once, over its days, and
`each_day` records that one result for each of them, as Dagster's public
`AssetCheckEvaluation` with the day, so each day of the run shows it and none is left
planned. A run without days (the whole-stream job), or on an instance that is not kept (the
command line's without DAGSTER_HOME), records it once, without a day. Partitioned
checks are a preview of Dagster 1.13; tests/pipelines/test_factory.py runs what is relied
on here.

A check that found nothing to compare (a stream not landed yet, no closed day) records no
result in a run: Dagster 1.13 has no "skipped" result, but a planned evaluation that ends
without one is the UI's "Skipped", and the reason is in the run (`_skipped`). A warning
would stand beside the checks that found something wrong as one of them."""

import functools
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from typing import Protocol, TypeVar

import dagster as dg

from assets.dagster_internals import AssetCheckEvaluationTargetMaterializationData
from assets.factory import asset_key
from assets.partitions import partitions_of
from assets.resources import LakeResource
from assets.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from pipelines.lake.drift import drift_in_lake
from pipelines.pull.damaged import FOLDER, REASON_SUFFIX, damaged_of, set_aside_damaged
from pipelines.stream import Stream

#: The job that runs every stream's checks over the whole stream, daily.
WHOLE_STREAM_JOB = "whole_stream_checks"

Check = TypeVar("Check", bound=Callable)


def _run_of(context: dg.AssetCheckExecutionContext | None) -> dg.DagsterRun | None:
    try:
        return None if context is None else context.run
    except dg.DagsterError:  # called directly, outside a run: there is none
        return None


def checked_days(context: dg.AssetCheckExecutionContext, stream: Stream) -> list[date] | None:
    """The days a check of a daily stream looks at: its run's partitions, which the run
    landed. None, the whole stream, for a snapshot stream, in `WHOLE_STREAM_JOB`, or in a
    run without partitions (a check run alone from the UI), or called outside a run."""
    run = _run_of(context)
    if run is None:
        return None
    tags = run.tags
    first = tags.get(ASSET_PARTITION_RANGE_START_TAG) or tags.get(PARTITION_NAME_TAG)
    last = tags.get(ASSET_PARTITION_RANGE_END_TAG) or tags.get(PARTITION_NAME_TAG)
    if not stream.daily or run.job_name == WHOLE_STREAM_JOB or not (first and last):
        return None
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


def each_day(
    context: dg.AssetCheckExecutionContext | None, result: dg.AssetCheckResult
) -> dg.AssetCheckResult | Iterator:
    """What a check returns in a run: none where it compared nothing (`_skipped`); else
    `result` as it is, which Dagster records under the run's day, or without one in a run
    without days; in a run over days, `result` once for each of them (the module's docstring
    says why). Each day's names the day's newest materialization, as Dagster's own does, so
    the day shows it as its status. `context` is None for a check called outside a run (a
    test's): `result` as it is."""
    run = _run_of(context)
    if run is None:
        return result  # called outside a run
    if NOTHING_COMPARED in result.metadata:
        return _skipped(context, result)
    if PARTITION_NAME_TAG in run.tags:
        return result  # a run of one day
    if not context.instance.is_persistent:
        # A throwaway instance (a test's, a script's) shows no day to
        # anyone: its one evaluation says what the check found, at a fraction of the cost.
        return result
    [spec] = context.check_specs
    first = run.tags.get(ASSET_PARTITION_RANGE_START_TAG)
    last = run.tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if spec.partitions_def is None or not (first and last):
        return result  # a check without days, or a run without them
    days = spec.partitions_def.get_partition_keys_in_range(dg.PartitionKeyRange(first, last))
    return _recorded_each_day(context, spec, result, days)


def _skipped(context: dg.AssetCheckExecutionContext, result: dg.AssetCheckResult) -> Iterator:
    """A check that compared nothing records no result: the UI shows it "Skipped" (its
    planned evaluation ends without one), not as a warning beside the checks that found
    something. Why is the step's output's metadata, and a line of the run's log."""
    [spec] = context.check_specs
    reason = result.metadata[NOTHING_COMPARED].value
    context.log.info(f"{spec.key.to_user_string()} skipped: nothing compared: {reason}")
    [output] = context.op_execution_context.op_def.output_defs
    yield dg.Output(
        None,
        output_name=output.name,
        metadata={"check": spec.key.to_user_string(), **result.metadata},
    )


def _recorded_each_day(
    context: dg.AssetCheckExecutionContext,
    spec: dg.AssetCheckSpec,
    result: dg.AssetCheckResult,
    days: list[str],
) -> Iterator:
    targets = materialized(context.instance, spec.asset_key, days)
    for day in days:
        yield dg.AssetCheckEvaluation(
            asset_key=spec.asset_key,
            check_name=spec.name,
            passed=result.passed,
            metadata=result.metadata,
            severity=result.severity,
            description=result.description,
            blocking=spec.blocking,
            partition=day,
            target_materialization_data=targets.get(day),
        )
    # The check's output, as Dagster gives it for a result it records (nothing reads it).
    [output] = context.op_execution_context.op_def.output_defs
    yield dg.Output(None, output_name=output.name)


def by_day(check: Check) -> Check:
    """`check` (the function of a check of a stream's asset) with its result recorded by
    `each_day`, in the context Dagster runs it in. Dagster reads the wrapped
    function's parameters (`functools.wraps`), so it takes the same."""

    @functools.wraps(check)
    def recorded(*args, **kwargs):
        return each_day(_current_context(), check(*args, **kwargs))

    return recorded  # type: ignore[return-value]


def _current_context() -> dg.AssetCheckExecutionContext | None:
    try:
        return dg.AssetCheckExecutionContext.get()
    except dg.DagsterError:  # called directly, outside a run: there is none
        return None


def materialized(
    instance: dg.DagsterInstance, key: dg.AssetKey, days: list[str]
) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """Each day's newest materialization of `key`, as a check's evaluation names it. Read in
    one query where the newest are one per day (a run over days that just landed them),
    else a query per day it did not find."""
    found = {}
    newest = dg.AssetRecordsFilter(asset_key=key, asset_partitions=days)
    for record in instance.fetch_materializations(newest, limit=len(days)).records:
        found.setdefault(record.partition_key, record)
    for day in set(days) - found.keys():
        one = dg.AssetRecordsFilter(asset_key=key, asset_partitions=[day])
        records = instance.fetch_materializations(one, limit=1).records
        if records:
            found[day] = records[0]
    return {
        day: AssetCheckEvaluationTargetMaterializationData(
            storage_id=record.storage_id, run_id=record.run_id, timestamp=record.timestamp
        )
        for day, record in found.items()
    }


def scope(days: list[date] | None) -> dict[str, str]:
    """What a check looked at, as its metadata says."""
    return {"scope": f"days {days[0]} to {days[-1]}" if days else "the whole stream"}


#: The metadata key of a result that compared nothing, saying why.
NOTHING_COMPARED = "nothing_compared"


def nothing_compared(reason: str, metadata: dict | None = None) -> dg.AssetCheckResult:
    """The result of a check that found nothing to compare: not a pass (a green check must
    have looked at something), a warning where it is called outside a run; in a run it is
    recorded as skipped, with why (`each_day`)."""
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"nothing compared: {reason}",
        metadata={NOTHING_COMPARED: reason, **(metadata or {})},
    )


class Verdict(Protocol):
    """What a check of the core finds (`pipelines/streams/<service>/checks.py`)."""

    @property
    def passed(self) -> bool: ...

    @property
    def nothing_compared(self) -> str | None:
        """Why nothing was compared, or None."""


def result_of(verdict: Verdict, metadata: dict, **shown) -> dg.AssetCheckResult:
    """Dagster's result of a verdict of the core, with `metadata`: where it says why nothing
    was compared, that warning (`nothing_compared`); else passed or not, with what else the
    result shows (a description)."""
    if verdict.nothing_compared is not None:
        return nothing_compared(verdict.nothing_compared, metadata)
    return dg.AssetCheckResult(passed=verdict.passed, metadata=metadata, **shown)


def stream_check(
    stream: Stream, name: str, description: str
) -> Callable[[Callable], dg.AssetChecksDefinition]:
    """The decorator of a service's own check on `stream`'s asset: never blocking (a check
    reports, it does not hold back what comes after), on a day-partitioned stream
    partitioned like it, its result recorded by `by_day`."""
    partitions = partitions_of(stream)

    def define(check: Callable) -> dg.AssetChecksDefinition:
        return dg.asset_check(
            asset=asset_key(stream),
            name=name,
            blocking=False,
            partitions_def=partitions,
            description=description,
        )(by_day(check))

    return define


def unique_ids_check(stream: Stream, asset_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    """No key repeats within a connection (`stream.key` may include a daily stream's `date`)."""
    key = ", ".join(["connection", *stream.key])

    @dg.asset_check(
        asset=asset_key,
        name="ids_unique",
        blocking=False,
        partitions_def=partitions_of(stream),
        description=(
            f"No ({key}) repeats in {stream.relation}: within the days a run landed, and "
            f"across every landed file in the job {WHOLE_STREAM_JOB}."
        ),
    )
    @by_day
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
    `_extra`, `pipelines/lake/drift.py`)."""

    @dg.asset_check(
        asset=asset_key,
        name="schema_matches",
        blocking=False,
        partitions_def=partitions_of(stream),
        description=(
            f"Every landed row of {stream.relation} matches its declared columns: no field "
            "the service added, retyped or left out (what did is kept in `_extra`). The "
            f"rows of the days a run landed; every row in the job {WHOLE_STREAM_JOB}."
        ),
    )
    @by_day
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
    reader does (`pipelines/pull/damaged.py`); the next sync lands those days again. Warns,
    naming the files."""

    @dg.asset_check(
        asset=asset_key,
        name="files_readable",
        blocking=False,
        partitions_def=partitions_of(stream),
        description=(
            f"Every page of every file of {stream.relation} reads as Parquet, checksums "
            f"verified, and no damaged file lies in `{FOLDER}/` in the lake. One found damaged "
            "is moved there with its reason, and its day or snapshot lands again with the "
            f"next sync. The files of the days a run landed; every file in the job "
            f"{WHOLE_STREAM_JOB}."
        ),
    )
    @by_day
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
                "".join(f"found {f.what if f.foreign else 'damaged'}: {f}. " for f in found)
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
    return [check(stream, asset_key(stream)) for stream in streams for check in STREAM_CHECKS]
