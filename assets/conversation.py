"""The conversation service's streams as Dagster assets and checks, one asset each.

Connections are regions (`default`, `jp`); every row carries its `connection`. What each
stream's rows are, how they are fetched and what a check compares live in
`pipelines/streams/conversation/`; this module says when they run and what Dagster shows.
"""

from datetime import date

import dagster as dg

from assets.checks import by_day, nothing_compared, stream_checks
from assets.factory import stream_assets
from assets.partitions import partitions_of
from assets.resources import ConversationResource, LakeResource
from pipelines.stream import Stream
from pipelines.streams.conversation import (
    ASSIGNMENTS,
    MEMBERS,
    MESSAGES,
    SERVICE,
    STREAMS,
    checks,
)


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


def _result(verdict: checks.Verdict) -> dg.AssetCheckResult:
    if verdict.nothing_compared is not None:
        return nothing_compared(verdict.nothing_compared, verdict.figures)
    return dg.AssetCheckResult(passed=verdict.passed, metadata=verdict.figures)


ASSETS = stream_assets(STREAMS)


@dg.asset_check(
    asset=_key("messages"),
    name="rows_match_backup",
    blocking=False,
    partitions_def=partitions_of(MESSAGES),
    description=(
        "The lake still holds, for the days of the last materialization, the row count of "
        "the backup file they were landed from; a region whose files of those days were "
        "landed again since is left out."
    ),
)
@by_day
def rows_match_backup(
    context: dg.AssetCheckExecutionContext, conversation: ConversationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    # The range and the backup file's counts are the run's figures: one observation per run.
    records = context.instance.fetch_observations(_key("messages"), limit=1).records
    if not records or records[0].asset_observation is None:
        return nothing_compared("messages were never materialized")
    event = records[0].event_log_entry
    metadata = records[0].asset_observation.metadata
    verdict = checks.rows_match_backup(
        lake.lake(),
        [connection.name for connection in conversation.connections],
        date.fromisoformat(metadata["first_day"].value),
        date.fromisoformat(metadata["last_day"].value),
        metadata["backup_rows_per_connection"].value,
        materialized_ns=int(event.timestamp * 1e9),
    )
    return _result(verdict)


def _matches_members_seen(stream: Stream) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=_key(stream.name),
        name="matches_members_in_messages",
        blocking=False,
        description=(
            f"{stream.relation} holds a row for every member of the messages landed before "
            "it, and none for a member of no landed message; members of messages landed since "
            "are looked up by the next pull."
        ),
    )
    def matches_members_in_messages(
        conversation: ConversationResource, lake: LakeResource
    ) -> dg.AssetCheckResult:
        names = [connection.name for connection in conversation.connections]
        return _result(checks.members_match_messages(lake.lake(), stream, names))

    return matches_members_in_messages


CHECKS = [
    *stream_checks(STREAMS),
    rows_match_backup,
    _matches_members_seen(MEMBERS),
    _matches_members_seen(ASSIGNMENTS),
]
