"""Channels, teams and users: each region's directory, listed whole on every pull."""

from collections.abc import Iterator

from pipelines.clients.conversation import Channel, ConversationService, Team, User
from pipelines.lake.schemas import arrow_fields, model_row
from pipelines.pull.landing import PulledStream, Turn
from pipelines.pull.paging import cursor_pages
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


def _cursor_listed(turn: Turn, listing: str, items: str) -> Iterator[dict]:
    """Every row of a cursor-paged list: `client.<listing>(cursor)`, its rows in `<items>`."""
    list_page = getattr(turn.client, listing)

    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = list_page(cursor)
        return getattr(page, items), page.cursor.after

    for listed in cursor_pages(fetch):
        yield from (model_row(item, turn.stream.schema) for item in listed)


def team_rows(turn: Turn) -> Iterator[dict]:
    return _cursor_listed(turn, "list_teams", "teams")


TEAMS = PulledStream(
    SERVICE,
    "teams",
    connection_schema(arrow_fields(Team)),
    rows=team_rows,
    description="Teams of each region (`list_teams`, cursor pages).",
)


def user_rows(turn: Turn) -> Iterator[dict]:
    return _cursor_listed(turn, "list_users", "users")


USERS = PulledStream(
    SERVICE,
    "users",
    connection_schema(arrow_fields(User)),
    rows=user_rows,
    description="Users of each region (`list_users`, cursor pages).",
)
