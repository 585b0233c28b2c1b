"""Conversation service client, one region per connection.

The service documents its operations by name, with no method or path: `PATHS` is the one table
of the paths this client uses (the sandbox's choice, sandbox/README.md), and
`[paths.conversation]` in sync.toml overrides any entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import ClassVar, TypeVar

import pydantic

from pipelines.clients.base import Model, Service, check_path_overrides, fill_path
from pipelines.jobs import wait_for_job
from pipelines.schemas import Moment
from pipelines.transport import Rate, Transport

T = TypeVar("T")

#: operationId -> path template, relative to the connection's base address.
PATHS: dict[str, str] = {
    "trigger_messages_backup": "/v1/backups/messages",
    "get_backup_detail": "/v1/backups/{backup_id}",
    # Where a completed backup's file is served; not a documented operation.
    "download_backup": "/v1/backups/{backup_id}/download",
    "list_channels": "/v1/channels",
    "get_member_by_id": "/v1/channels/{channel_id}/members/{member_id}",
    "get_member_assignment": "/v1/channels/{channel_id}/members/{member_id}/assignment",
    "list_teams": "/v2/teams",
    "list_users": "/v2/users",
}
#: The service's documented maximum of `limit` on list operations.
PAGE_LIMIT = 1000
#: The service documents only `initiated`; the finished state is the sandbox's name.
BACKUP_COMPLETED = "completed"


class Cursor(Model):
    after: str | None = None
    before: str | None = None


class Channel(Model):
    """The full record of `list_channels` (the paginated list returns fewer fields)."""

    id: int
    uuid: str | None = None
    name: str | None = None
    type: str | None = None
    status: str | None = None
    language_code: str | None = None
    timezone: str | None = None
    external_channel_id: str | None = None
    external_access_token_expired_at: Moment | None = None
    broadcast_enabled: bool | None = None
    user_recognition_enabled: bool | None = None
    created_at: Moment | None = None
    updated_at: Moment | None = None


class Channels(Model):
    channels: list[Channel]


class Team(Model):
    """The list form, which carries no `editable`."""

    id: int
    name: str | None = None
    description: str | None = None
    category: str | None = None
    external_team_id: str | None = None
    routing_rule: str | None = None


class TeamsPage(Model):
    teams: list[Team]
    cursor: Cursor


class User(Model):
    """The list form, which omits `email`, `org_id`, `role_id` and `inviter_id`."""

    id: int
    name: str | None = None
    chat_name: str | None = None
    avatar: str | None = None
    external_user_id: str | None = None
    created_at: Moment | None = None
    role_name: str | None = None
    role_type: str | None = None
    on_duty_status: str | None = None
    status: str | None = None
    type: str | None = None
    is_internal_user: bool | None = None


class UsersPage(Model):
    users: list[User]
    cursor: Cursor


class Member(Model):
    """A member looked up by id; its fields are strings unless stated."""

    id: int
    account_manager: str | None = None
    assign_type: str | None = None
    avatar: str | None = None
    birthday: str | None = None
    city: str | None = None
    company: str | None = None
    connect_id: str | None = None
    country: str | None = None
    created_at: Moment | None = None
    custom_id: str | None = None
    display_name: str | None = None
    email: str | None = None
    engagement_level: str | None = None
    external_channel_id: str | None = None
    external_member_id: str | None = None
    gender: str | None = None
    last_member_message_send: Moment | None = None
    last_message_at: Moment | None = None
    location: str | None = None
    member_level: str | None = None
    mobile: str | None = None
    name: str | None = None
    note: str | None = None
    original_email: str | None = None
    original_mobile: str | None = None
    original_name: str | None = None
    processing_state: str | None = None
    star_mark: bool | None = None
    status: str | None = None
    type: str | None = None
    updated_at: Moment | None = None


class AssignmentRelationship(Model):
    team_id: int | None = None
    user_id: int | None = None
    """The user the member is assigned to."""


class Assignment(Model):
    assign_type: str
    """`case-based`, `permanent` or `unassigned`."""
    assignment_relationship: AssignmentRelationship | None = None


class BackupCreated(Model):
    backup_id: int


class Backup(Model):
    backup_id: int
    created_at: str | None = None
    download_url: str | None = None
    state: str


class ConversationClient:
    def __init__(
        self,
        transport: Transport,
        paths: dict[str, str],
        *,
        backup_deadline_seconds: float,
        backup_completed_state: str = BACKUP_COMPLETED,
    ) -> None:
        self.transport = transport
        self.paths = paths
        self.backup_deadline_seconds = backup_deadline_seconds
        self.backup_completed_state = backup_completed_state

    def _path(self, operation: str, **values: object) -> str:
        return fill_path(self.paths[operation], **values)

    # -- directory ----------------------------------------------------------------------------

    def list_channels(self) -> Channels:
        return self.transport.get(self._path("list_channels"), Channels)

    def list_teams(self, cursor: str | None, limit: int = PAGE_LIMIT) -> TeamsPage:
        return self.transport.get(self._path("list_teams"), TeamsPage, params=_page(cursor, limit))

    def list_users(self, cursor: str | None, limit: int = PAGE_LIMIT) -> UsersPage:
        return self.transport.get(self._path("list_users"), UsersPage, params=_page(cursor, limit))

    # -- members ------------------------------------------------------------------------------

    def get_member_by_id(self, channel_id: int, member_id: int) -> Member:
        path = self._path("get_member_by_id", channel_id=channel_id, member_id=member_id)
        return self.transport.get(path, Member)

    def get_member_assignment(self, channel_id: int, member_id: int) -> Assignment:
        path = self._path("get_member_assignment", channel_id=channel_id, member_id=member_id)
        return self.transport.get(path, Assignment)

    # -- message backups (an asynchronous job) ------------------------------------------------

    def trigger_messages_backup(self, started_at: datetime, ended_at: datetime) -> BackupCreated:
        body = {"started_at": started_at.isoformat(), "ended_at": ended_at.isoformat()}
        # Safe to retry: a second trigger only leaves an extra backup nobody downloads, while a
        # lost answer would otherwise fail the whole run.
        answer = self.transport.request_json(
            "POST", self._path("trigger_messages_backup"), json_body=body, idempotent=True
        )
        return BackupCreated.model_validate(answer)

    def get_backup_detail(self, backup_id: int) -> Backup:
        return self.transport.get(self._path("get_backup_detail", backup_id=backup_id), Backup)

    def wait_for_backup(self, backup_id: int) -> Backup:
        """Poll until completed or the deadline (raise backup_deadline_seconds under
        [service.conversation] for very large backups)."""
        completed = self.backup_completed_state
        return wait_for_job(
            lambda: self.get_backup_detail(backup_id),
            finished=lambda backup: backup.state == completed,
            deadline_seconds=self.backup_deadline_seconds,
            describe=lambda backup: (
                f"messages backup {backup_id} (state {backup.state!r}, waiting for "
                f"{completed!r}; raise backup_deadline_seconds under [service.conversation])"
            ),
        )

    def download_backup(self, backup_id: int, consume: Callable[[Iterator[bytes]], T]) -> T:
        """Stream the backup's CSV file into `consume`, from the start again if it is cut.

        Fetched through the path table rather than the detail's `download_url`: that URL is
        absolute, and the key must only ever go to the connection's own base address.
        """
        path = self._path("download_backup", backup_id=backup_id)
        return self.transport.download_with_retry(path, consume)


def _page(cursor: str | None, limit: int) -> dict[str, object]:
    return {"limit": limit} | ({"cursor": cursor} if cursor else {})


class ConversationService(Service):
    """Connections are regions (`default`, `jp`), each with its own base address and key."""

    service: ClassVar[str] = "conversation"
    #: The service documents no rate limits, so no pacing.
    rates: ClassVar[dict[str, Rate]] = {}

    #: Overrides of `PATHS`, by operationId (`[paths.conversation]` in sync.toml).
    paths: dict[str, str] = {}
    backup_deadline_seconds: float = 30 * 60.0
    backup_completed_state: str = BACKUP_COMPLETED
    #: Parallel member lookups over one connection's transport.
    member_workers: int = 8
    #: Look up every member seen in messages, not only those with new messages since the
    #: last snapshot (a periodic full refresh of attributes that change without messages).
    refresh_every_member: bool = False

    @pydantic.field_validator("paths")
    @classmethod
    def _known_operations(cls, value: dict[str, str]) -> dict[str, str]:
        return check_path_overrides("conversation", value, PATHS)

    def client(self, transport: Transport) -> ConversationClient:
        return ConversationClient(
            transport,
            {**PATHS, **self.paths},
            backup_deadline_seconds=self.backup_deadline_seconds,
            backup_completed_state=self.backup_completed_state,
        )
