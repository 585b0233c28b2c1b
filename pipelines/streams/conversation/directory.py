"""Channels, teams and users: each region's directory, listed whole on every pull."""

from collections.abc import Iterator

from pipelines.clients.conversation import Channel, ConversationService, Team, User
from pipelines.landing import PulledStream, Turn
from pipelines.paging import cursor_pages
from pipelines.schemas import arrow_fields, model_row
from pipelines.stream import connection_schema

SERVICE = ConversationService.service


def channel_rows(turn: Turn) -> Iterator[dict]:
    # The full list, not the paginated one: only it carries the full record.
    for channel in turn.client.list_channels().channels:
        yield model_row(channel, turn.stream.schema)


CHANNELS = PulledStream(
    SERVICE,
    "channels",
    connection_schema(arrow_fields(Channel)),
    rows=channel_rows,
    description="Channels of each region (`list_channels`, full records).",
)


def team_rows(turn: Turn) -> Iterator[dict]:
    client = turn.client

    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_teams(cursor)
        return page.teams, page.cursor.after

    for teams in cursor_pages(fetch):
        yield from (model_row(team, turn.stream.schema) for team in teams)


TEAMS = PulledStream(
    SERVICE,
    "teams",
    connection_schema(arrow_fields(Team)),
    rows=team_rows,
    description="Teams of each region (`list_teams`, cursor pages).",
)


def user_rows(turn: Turn) -> Iterator[dict]:
    client = turn.client

    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_users(cursor)
        return page.users, page.cursor.after

    for users in cursor_pages(fetch):
        yield from (model_row(user, turn.stream.schema) for user in users)


USERS = PulledStream(
    SERVICE,
    "users",
    connection_schema(arrow_fields(User)),
    rows=user_rows,
    description="Users of each region (`list_users`, cursor pages).",
)
