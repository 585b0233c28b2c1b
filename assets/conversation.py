"""The conversation service's streams as Dagster assets and checks, one asset each.

Connections are regions (`default`, `jp`); every row carries its `connection`. What each
stream's rows are, how they are fetched and what a check compares live in
`pipelines/streams/conversation/`; this module says when they run and what Dagster shows.
"""

from collections.abc import Callable, Iterable
from datetime import date

import dagster as dg

from assets.checks import unique_ids_check
from assets.landing import land_snapshot, partition_days
from assets.partitions import daily, single_run
from assets.resources import ConversationResource, LakeResource
from pipelines.clients.conversation import ConversationClient
from pipelines.lake import Stream
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
from pipelines.streams.conversation.backups import pull_backups
from pipelines.streams.conversation.directory import channel_rows, team_rows, user_rows
from pipelines.streams.conversation.members import (
    MemberLookups,
    RowOf,
    assignment_row,
    member_row,
)

POOL = "conversation_api"
KINDS = {"python", "parquet"}


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey([SERVICE, name])


def _result(verdict: checks.Verdict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=verdict.passed, metadata=verdict.figures)


# -- channels, teams, users ------------------------------------------------------------------


def _directory_asset(
    stream: Stream, rows: Callable[[ConversationClient], Iterable[dict]], doc: str
):
    @dg.asset(
        key=_key(stream.name),
        group_name=SERVICE,
        kinds=KINDS,
        pool=POOL,
        description=doc,
    )
    def directory_asset(
        context: dg.AssetExecutionContext, conversation: ConversationResource, lake: LakeResource
    ) -> dg.MaterializeResult:
        return land_snapshot(
            context,
            conversation,
            lake.lake(),
            stream,
            lambda transport, connection: rows(conversation.client(transport)),
        )

    return directory_asset


channels = _directory_asset(
    CHANNELS, channel_rows, "Channels of each region (`list_channels`, full records)."
)
teams = _directory_asset(TEAMS, team_rows, "Teams of each region (`list_teams`, cursor pages).")
users = _directory_asset(USERS, user_rows, "Users of each region (`list_users`, cursor pages).")


# -- messages: one backup per connection for the run's range ---------------------------------


@dg.asset(
    key=_key("messages"),
    group_name=SERVICE,
    kinds=KINDS,
    pool=POOL,
    partitions_def=daily,
    backfill_policy=single_run,
    description="Messages by UTC day, through one message backup per region for the whole "
    "range of a run (a backfill is one backup, not one per day).",
)
def messages(
    context: dg.AssetExecutionContext, conversation: ConversationResource, lake: LakeResource
) -> dg.MaterializeResult:
    pulled = pull_backups(conversation, lake.lake(), partition_days(context), context.log.info)
    metadata = pulled.figures()
    if pulled.differ:
        raise dg.Failure(
            description=f"{MESSAGES.relation}: rows landed differ from the backup file's rows "
            f"for {pulled.differ}",
            metadata=metadata,
        )
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(asset=_key("messages"), name="rows_match_backup", blocking=False)
def rows_match_backup(
    context: dg.AssetCheckExecutionContext, conversation: ConversationResource, lake: LakeResource
) -> dg.AssetCheckResult:
    """The lake still holds, for the last materialized range, the backup file's row count."""
    event = context.instance.get_latest_materialization_event(_key("messages"))
    if event is None or event.asset_materialization is None:
        return dg.AssetCheckResult(passed=False, description="messages were never materialized")
    metadata = event.asset_materialization.metadata
    verdict = checks.rows_match_backup(
        lake.lake(),
        [connection.name for connection in conversation.connections],
        date.fromisoformat(metadata["first_day"].value),
        date.fromisoformat(metadata["last_day"].value),
        metadata["backup_rows_per_connection"].value,
    )
    return _result(verdict)


# -- members and assignments: by id, for the members seen in messages ------------------------


def _per_member_asset(stream: Stream, row_of: RowOf, doc: str):
    @dg.asset(
        key=_key(stream.name),
        group_name=SERVICE,
        kinds=KINDS,
        pool=POOL,
        deps=[_key("messages")],
        description=doc,
    )
    def per_member_asset(
        context: dg.AssetExecutionContext, conversation: ConversationResource, lake: LakeResource
    ) -> dg.MaterializeResult:
        store = lake.lake()
        lookups = MemberLookups(conversation, store, stream, row_of)
        result = land_snapshot(
            context,
            conversation,
            store,
            stream,
            lookups.rows,
            extra_metadata=lookups.figures,
            file_metadata=lookups.messages_through,
        )
        if sum(lookups.not_found.values()):
            context.log.warning(
                f"{stream.relation}: members seen in messages but unknown to the service "
                f"(404), skipped: {dict(lookups.not_found)}"
            )
        return result

    return per_member_asset


REFRESH_NOTE = (
    " A member is looked up again when they appear in newly landed messages; the others keep "
    "their row (`refresh_every_member` under [service.conversation] looks up all)."
)
members = _per_member_asset(
    MEMBERS,
    member_row,
    "Members seen in the landed messages, each looked up by id (`get_member_by_id`)."
    + REFRESH_NOTE,
)
assignments = _per_member_asset(
    ASSIGNMENTS,
    assignment_row,
    "The assignment of each member seen in the landed messages (`get_member_assignment`)."
    + REFRESH_NOTE,
)


def _matches_members_seen(stream: Stream) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=_key(stream.name), name="matches_members_in_messages", blocking=False)
    def matches_members_in_messages(
        conversation: ConversationResource, lake: LakeResource
    ) -> dg.AssetCheckResult:
        """One row per distinct member of the connection's landed messages."""
        names = [connection.name for connection in conversation.connections]
        return _result(checks.members_match_messages(lake.lake(), stream, names))

    return matches_members_in_messages


ASSETS = [channels, teams, users, messages, members, assignments]
CHECKS = [
    *(unique_ids_check(stream, _key(stream.name)) for stream in STREAMS),
    rows_match_backup,
    _matches_members_seen(MEMBERS),
    _matches_members_seen(ASSIGNMENTS),
]
