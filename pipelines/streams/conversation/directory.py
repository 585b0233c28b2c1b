"""Channels, teams and users: each region's directory, listed whole on every pull."""

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from pipelines.clients.conversation import Channel, ConversationService, Team, User
from pipelines.lake.schemas import arrow_fields
from pipelines.pull.paging import cursor_pages
from pipelines.stream import connection_schema
from pipelines.streams.listed import listed_stream

#: A stream of one of the service's lists.
listed = partial(listed_stream, ConversationService.service)

CHANNELS = listed(
    "channels",
    connection_schema(arrow_fields(Channel)),
    # The full list, not the paginated one: only it carries the full record.
    lambda client: client.list_channels().channels,
    description="Channels of each region (`list_channels`, full records).",
)


def _cursor_listed(list_page: Callable[[str | None], Any], items: str) -> Iterator:
    """Every item of a cursor-paged list: `list_page(cursor)`, its items in `<items>`."""

    def fetch(cursor: str | None) -> tuple[list, str | None]:
        page = list_page(cursor)
        return getattr(page, items), page.cursor.after

    for listed_items in cursor_pages(fetch):
        yield from listed_items


TEAMS = listed(
    "teams",
    connection_schema(arrow_fields(Team)),
    lambda client: _cursor_listed(client.list_teams, "teams"),
    description="Teams of each region (`list_teams`, cursor pages).",
)

USERS = listed(
    "users",
    connection_schema(arrow_fields(User)),
    lambda client: _cursor_listed(client.list_users, "users"),
    description="Users of each region (`list_users`, cursor pages).",
)
