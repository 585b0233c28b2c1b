"""The conversation service's streams as Dagster assets and checks, one asset each.

Connections are regions (`default`, `jp`); every row carries its `connection`. What each
stream's rows are, how they are fetched and what a check compares live in
`pipelines/streams/conversation/`; this module says when they run and what Dagster shows.
"""

from datetime import date

import dagster as dg

from assets.checks import STREAM_CHECKS, nothing_compared
from assets.factory import StreamAsset, stream_asset
from assets.resources import ConversationResource, LakeResource
from pipelines.stream import Stream
from pipelines.streams.conversation import (
    ASSIGNMENTS,
    CHANNELS,
    MEMBERS,
    MESSAGES,
    SERVICE,
    STREAMS,
    TEAMS,
    USERS,
    checks,
)
from pipelines.streams.conversation.backups import land_messages
from pipelines.streams.conversation.directory import (
    channel_rows,
    listed_whole,
    team_rows,
    user_rows,
)
from pipelines.streams.conversation.members import (
    assignment_row,
    looked_up,
    member_row,
)


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


def _result(verdict: checks.Verdict) -> dg.AssetCheckResult:
    if verdict.nothing_compared is not None:
        return nothing_compared(verdict.nothing_compared, verdict.figures)
    return dg.AssetCheckResult(passed=verdict.passed, metadata=verdict.figures)


REFRESH_NOTE = (
    " A member is looked up again when they appear in newly landed messages; the others keep "
    "their row (`refresh_every_member` under [service.conversation] looks up all)."
)
PULLED = [
    StreamAsset(
        CHANNELS,
        listed_whole(channel_rows),
        "Channels of each region (`list_channels`, full records).",
    ),
    StreamAsset(
        TEAMS, listed_whole(team_rows), "Teams of each region (`list_teams`, cursor pages)."
    ),
    StreamAsset(
        USERS, listed_whole(user_rows), "Users of each region (`list_users`, cursor pages)."
    ),
    StreamAsset(
        MESSAGES,
        land_messages,
        "Messages by UTC day, through one message backup per region for the whole "
        "range of a run (a backfill is one backup, not one per day).",
    ),
    StreamAsset(
        MEMBERS,
        looked_up(member_row),
        "Members seen in the landed messages, each looked up by id (`get_member_by_id`)."
        + REFRESH_NOTE,
        deps=(MESSAGES,),
    ),
    StreamAsset(
        ASSIGNMENTS,
        looked_up(assignment_row),
        "The assignment of each member seen in the landed messages (`get_member_assignment`)."
        + REFRESH_NOTE,
        deps=(MESSAGES,),
    ),
]
ASSETS = [stream_asset(declared) for declared in PULLED]
channels, teams, users, messages, members, assignments = ASSETS


@dg.asset_check(
    asset=_key("messages"),
    name="rows_match_backup",
    blocking=False,
    description=(
        "The lake still holds, for the days of the last materialization, the row count of "
        "the backup file they were landed from; a region whose files of those days were "
        "landed again since is left out."
    ),
)
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
    *(check(stream, _key(stream.name)) for stream in STREAMS for check in STREAM_CHECKS),
    rows_match_backup,
    _matches_members_seen(MEMBERS),
    _matches_members_seen(ASSIGNMENTS),
]
