"""Channels, teams and users: each region's directory, listed whole on every pull."""

from collections.abc import Callable, Iterator

from pipelines.clients.conversation import ConversationClient
from pipelines.landing import Land, Landed, Pull
from pipelines.paging import cursor_pages
from pipelines.schemas import model_row
from pipelines.streams.conversation import CHANNELS, TEAMS, USERS


def channel_rows(client: ConversationClient) -> Iterator[dict]:
    # The full list, not the paginated one: only it carries the full record.
    for channel in client.list_channels().channels:
        yield model_row(channel, CHANNELS.schema)


def team_rows(client: ConversationClient) -> Iterator[dict]:
    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_teams(cursor)
        return page.teams, page.cursor.after

    for teams in cursor_pages(fetch):
        yield from (model_row(team, TEAMS.schema) for team in teams)


def user_rows(client: ConversationClient) -> Iterator[dict]:
    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = client.list_users(cursor)
        return page.users, page.cursor.after

    for users in cursor_pages(fetch):
        yield from (model_row(user, USERS.schema) for user in users)


def listed_whole(rows: Callable[[ConversationClient], Iterator[dict]]) -> Land:
    """The landing of a directory stream: each region's list, as `rows` reads it."""

    def land(pull: Pull) -> Landed:
        return pull.snapshot(lambda transport, connection: rows(pull.service.client(transport)))

    return land
