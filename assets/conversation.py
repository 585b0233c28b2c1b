"""The conversation service's streams as Dagster assets and checks, one asset each.

Connections are regions (`default`, `jp`); every row carries its `connection`. What each
stream's rows are, how they are fetched and what a check compares live in
`pipelines/streams/conversation/`; this module says when they run and what Dagster shows.
"""

from datetime import date

import dagster as dg

from assets.checks import nothing_compared, result_of, stream_check, stream_checks
from assets.factory import asset_key, stream_assets
from assets.resources import ConversationResource, LakeResource
from pipelines.stream import Stream
from pipelines.streams.conversation import (
    ASSIGNMENTS,
    MEMBERS,
    MESSAGES,
    STREAMS,
    checks,
)

ASSETS = stream_assets(STREAMS)


@stream_check(
    MESSAGES,
    "rows_match_backup",
    "The lake still holds, for the days of the last materialization, the row count of the "
    "backup file they were landed from; a region whose files of those days were landed "
    "again since is left out.",
)
def rows_match_backup(
    context: dg.AssetCheckExecutionContext, conversation: ConversationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    # The range and the backup file's counts are the run's figures: one observation per run.
    records = context.instance.fetch_observations(asset_key(MESSAGES), limit=1).records
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
    return result_of(verdict, verdict.figures)


def _matches_members_seen(stream: Stream) -> dg.AssetChecksDefinition:
    @stream_check(
        stream,
        "matches_members_in_messages",
        f"{stream.relation} holds a row for every member of the messages landed before it, "
        "and none for a member of no landed message; members of messages landed since are "
        "looked up by the next pull.",
    )
    def matches_members_in_messages(
        conversation: ConversationResource, lake: LakeResource
    ) -> dg.AssetCheckResult:
        names = [connection.name for connection in conversation.connections]
        verdict = checks.members_match_messages(lake.lake(), stream, names)
        return result_of(verdict, verdict.figures)

    return matches_members_in_messages


CHECKS = [
    *stream_checks(STREAMS),
    rows_match_backup,
    _matches_members_seen(MEMBERS),
    _matches_members_seen(ASSIGNMENTS),
]
