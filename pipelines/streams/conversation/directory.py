"""Channels, teams and users: each region's directory, listed whole on every pull."""

from collections.abc import Iterator

from pipelines.clients.base import Model
from pipelines.clients.conversation import ConversationClient
from pipelines.lake import Stream
from pipelines.landing import parse_moment
from pipelines.paging import cursor_pages
from pipelines.streams.conversation import CHANNELS, TEAMS, TIMESTAMP, USERS


def record_row(record: Model, stream: Stream) -> dict:
    """The stream's columns from a response record; timestamp columns parsed."""
    row = {}
    for column in stream.schema:
        if column.name == "connection":
            continue
        value = getattr(record, column.name, None)
        row[column.name] = parse_moment(value) if column.type == TIMESTAMP else value
    return row


def channel_rows(client: ConversationClient) -> Iterator[dict]:
    # The full list, not the paginated one: only it carries the full record (spec section 2).
    for channel in client.list_channels().channels:
        yield record_row(channel, CHANNELS)


def team_rows(client: ConversationClient) -> Iterator[dict]:
    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_teams(cursor)
        return page.teams, page.cursor.after

    for teams in cursor_pages(fetch):
        yield from (record_row(team, TEAMS) for team in teams)


def user_rows(client: ConversationClient) -> Iterator[dict]:
    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_users(cursor)
        return page.users, page.cursor.after

    for users in cursor_pages(fetch):
        yield from (record_row(user, USERS) for user in users)
