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
from pipelines.clients.polling import wait_for_job
from pipelines.lake.schemas import Moment
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
    "manual_assignment": "/v1/assignments/manual",
    "close_conversation": "/v1/channels/{channel_id}/members/{member_id}/close",
    "list_teams": "/v2/teams",
    "list_users": "/v2/users",
}
#: The operation that writes each record type the push sends here (pipelines/push/plan.py).
SUBMIT_OPERATIONS = {
    "conversation_assignment": "manual_assignment",
    "conversation_close": "close_conversation",
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
    """The channel's id (a member's or a message's `channel_id`)."""
    uuid: str | None = None
    """The channel's uuid."""
    name: str | None = None
    """The channel's name."""
    type: str | None = None
    """The channel's type: `fb`, `ig`, `line`, `whatsapp` or `wccs` (the service documents
    only the sample `fb`)."""
    status: str | None = None
    """`connected` or `disconnected` (the service documents only the sample `connected`)."""
    language_code: str | None = None
    """The channel's language code (sample `en`)."""
    timezone: str | None = None
    """The channel's time zone, as the service sends it."""
    external_channel_id: str | None = None
    """The channel's external id, as the service sends it."""
    external_access_token_expired_at: Moment | None = None
    """When the channel's external access token expires (or expired), in UTC."""
    broadcast_enabled: bool | None = None
    """Whether broadcasts are enabled on the channel."""
    user_recognition_enabled: bool | None = None
    """Whether user recognition is enabled on the channel; the service documents no more."""
    created_at: Moment | None = None
    """When the channel was created, in UTC."""
    updated_at: Moment | None = None
    """When the channel was last updated, in UTC."""


class Channels(Model):
    channels: list[Channel]


class Team(Model):
    """The list form, which carries no `editable`."""

    id: int
    """The team's id (an assignment's `team_id`)."""
    name: str | None = None
    """The team's name."""
    description: str | None = None
    """The team's description."""
    category: str | None = None
    """The team's category, as the service sends it (no values are documented)."""
    external_team_id: str | None = None
    """The team's external id (what `get_team_by_external_team_id` looks up)."""
    routing_rule: str | None = None
    """The team's routing rule: `by-queue`, `round-robin` or `manual` (the service documents
    only the sample `by-queue`)."""


class TeamsPage(Model):
    teams: list[Team]
    cursor: Cursor


class User(Model):
    """The list form, which omits `email`, `org_id`, `role_id` and `inviter_id`."""

    id: int
    """The user's id (an assignment's `user_id`)."""
    name: str | None = None
    """The user's name."""
    chat_name: str | None = None
    """The user's chat name."""
    avatar: str | None = None
    """The user's avatar, as the service sends it."""
    external_user_id: str | None = None
    """The user's external id (what `get_user_by_external_user_id` looks up)."""
    created_at: Moment | None = None
    """When the user was created, in UTC."""
    role_name: str | None = None
    """The name of the user's role."""
    role_type: str | None = None
    """`owner`, `admin` or `agent` (the service documents only the sample `owner`)."""
    on_duty_status: str | None = None
    """`online`, `away` or `offline` (the service documents only the samples `away` and
    `online`)."""
    status: str | None = None
    """`active`, `invited` or `deactivated` (the service documents only the samples `active`
    and `invited`)."""
    type: str | None = None
    """`human` or `ai` (an AI agent; the service documents only the sample `ai`)."""
    is_internal_user: bool | None = None
    """Whether the user is an internal user; the service documents no more."""


class UsersPage(Model):
    users: list[User]
    cursor: Cursor


class Member(Model):
    """A member looked up by id; its fields are strings unless stated."""

    id: int
    """The member's id (a message's `member_id`)."""
    account_manager: str | None = None
    """The member's account manager, as the service sends it."""
    assign_type: str | None = None
    """`case-based`, `permanent` or `unassigned`."""
    avatar: str | None = None
    """The member's avatar, as the service sends it."""
    birthday: str | None = None
    """The member's birthday, as text as the service sends it (no format is documented)."""
    city: str | None = None
    """The member's city."""
    company: str | None = None
    """The member's company."""
    connect_id: str | None = None
    """The member's connect id, as the service sends it."""
    country: str | None = None
    """The member's country code (sample `ae`)."""
    created_at: Moment | None = None
    """When the member was created, in UTC."""
    custom_id: str | None = None
    """As the service sends it; the service does not document it."""
    display_name: str | None = None
    """The member's display name."""
    email: str | None = None
    """The member's email address."""
    engagement_level: str | None = None
    """`Lv1` to `Lv5` (the service documents only the sample `Lv1`)."""
    external_channel_id: str | None = None
    """The external id of the member's channel, as the service sends it."""
    external_member_id: str | None = None
    """The member's external id on the channel's platform."""
    gender: str | None = None
    """The member's gender (sample `female`; no list of values is documented)."""
    last_member_message_send: Moment | None = None
    """Undocumented by the service; by its name, when the member last sent a message. In
    UTC."""
    last_message_at: Moment | None = None
    """Undocumented by the service; by its name, when the member's last message was. In
    UTC."""
    location: str | None = None
    """As the service sends it; the service does not document it."""
    member_level: str | None = None
    """The member's level, as the service sends it (no values are documented)."""
    mobile: str | None = None
    """The member's mobile number."""
    name: str | None = None
    """The member's name."""
    note: str | None = None
    """The note on the member, as the service sends it."""
    original_email: str | None = None
    """As the service sends it; the service does not document it."""
    original_mobile: str | None = None
    """As the service sends it; the service does not document it."""
    original_name: str | None = None
    """As the service sends it; the service does not document it."""
    processing_state: str | None = None
    """The member's processing state: `new`, `open`, `pending`, `resolved` or
    `blocked` (the service documents only the samples `blocked` and `resolved`). Closing the
    conversation sets `resolved`."""
    star_mark: bool | None = None
    """Whether the member is star-marked; the service documents no more."""
    status: str | None = None
    """`active`, `inactive` or `unfollowed` (the service documents only the sample
    `active`)."""
    type: str | None = None
    """The type of the member's channel (sample `fb`), as in channels' `type`."""
    updated_at: Moment | None = None
    """When the member was last updated, in UTC."""


class AssignmentRelationship(Model):
    team_id: int | None = None
    """The team the member is assigned to (a team's `id`); null when unassigned or no
    team."""
    user_id: int | None = None
    """The user the member is assigned to (a user's `id`); null when unassigned."""


class Assignment(Model):
    assign_type: str
    """How the member is assigned: `case-based`, `permanent` or `unassigned`."""
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

    # -- write-back (the push) ----------------------------------------------------------------

    def manual_assignment(self, record: dict) -> Assignment:
        """Assign the member as `record` says (`case-based` or `permanent`, to its team and
        user), or clear its assignment (`unassigned`). Setting the same assignment again
        changes nothing, so a lost answer is retried."""
        body = {
            "assign_type": record["assign_type"],
            "channel_id": record["channel_id"],
            "member_id": record["member_id"],
        }
        if record["assign_type"] != "unassigned":
            relationship = {"team_id": record["team_id"], "user_id": record["user_id"]}
            body["assignment_relationship"] = relationship
        path = self._path("manual_assignment")
        answer = self.transport.request_json("POST", path, json_body=body, idempotent=True)
        return Assignment.model_validate(answer)

    def close_conversation(self, record: dict) -> None:
        """Close the member's conversation on behalf of `record`'s user (the member is then
        `resolved`); closing a closed one again leaves it so, so a lost answer is retried."""
        path = self._path(
            "close_conversation", channel_id=record["channel_id"], member_id=record["member_id"]
        )
        body = {"user_id": record["user_id"]}
        self.transport.request_json("POST", path, json_body=body, idempotent=True)

    def submit(self, record_type: str, record: dict, idempotent: bool = True) -> None:
        """Write one pushed record (`SUBMIT_OPERATIONS`); the service answers no event id.
        Both operations may be retried (`idempotent` is the data hub client's concern)."""
        getattr(self, SUBMIT_OPERATIONS[record_type])(record)

    def arrived(self, record_type: str, record: dict) -> bool:
        """Whether the service holds what `record` asked: the member's assignment is it, or
        its conversation is resolved. Asked of a row a killed push sent without its answer."""
        channel_id, member_id = record["channel_id"], record["member_id"]
        if record_type == "conversation_close":
            member = self.get_member_by_id(channel_id, member_id)
            return member.processing_state == "resolved"
        held = self.get_member_assignment(channel_id, member_id)
        relationship = held.assignment_relationship or AssignmentRelationship()
        if record["assign_type"] == "unassigned":
            return held.assign_type == "unassigned"
        return (held.assign_type, relationship.team_id, relationship.user_id) == (
            record["assign_type"],
            record["team_id"],
            record["user_id"],
        )

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
    #: Every known member is looked up again at least once in this many pulls: each pull
    #: also looks up the 1/N of them looked up longest ago, for what changes at the service
    #: without a message (an agent's reassignment). 24 is within a day at hourly syncs; 0 off.
    member_refresh_pulls: int = pydantic.Field(24, ge=0)

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
