"""Request and response models of the conversation service (spec sections 2 and 4).

Responses are built as plain dicts; these models make the OpenAPI document and fix each
form's exact field set (`pick`). Absent optional values are `null` (sandbox choice).
Request bodies refuse unknown fields, so a misspelt field is a 400 naming it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from sandbox.encoding import Text, bounded_text

AssignType = Literal["case-based", "permanent", "unassigned"]
RoutingRule = Literal["by-queue", "round-robin", "manual"]  # full list not shown: sandbox choice
BackupState = Literal["initiated", "processing", "completed"]  # only `initiated` is shown
ASSIGN_TYPES: tuple[str, ...] = get_args(AssignType)
ROUTING_RULES: tuple[str, ...] = get_args(RoutingRule)
BACKUP_STATES: tuple[str, ...] = get_args(BackupState)


def pick(record: dict, form: type[BaseModel]) -> dict:
    """The fields of one form of a record (the form's model lists them)."""
    return {name: record[name] for name in form.model_fields}


# --- requests


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _date_time_text(value: object) -> object:
    # "date-time" is RFC 3339 text; pydantic alone would also take epoch numbers.
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with a timezone")
    return value


DateTime = Annotated[AwareDatetime, BeforeValidator(_date_time_text)]


class TriggerBackupRequest(Body):
    started_at: DateTime
    ended_at: DateTime
    channel_id: int | None = None
    member_id: int | None = None


class ChannelMemberRequest(Body):
    # The external UID on the channel platform (LINE user ids are 33 characters).
    channel_member_id: Text = Field(min_length=1, max_length=128)


class IndividualRelationship(Body):
    member_id: int | None = None
    team_id: int | None = None
    user_id: int | None = None


class IndividualAssignmentRequest(Body):
    assignment_relationship: IndividualRelationship | None = None
    channel_id: int
    org_id: int | None = None
    # Sandbox addition: names the member when the relationship is null (it then carries none).
    member_id: int | None = None


class RelationshipRequest(Body):
    team_id: int | None = None
    user_id: int | None = None


class ManualAssignmentRequest(Body):
    assign_type: Literal["case-based", "permanent", "unassigned", "manual"] | None = None
    assignment_relationship: RelationshipRequest | None = None
    channel_id: int
    member_id: int
    org_id: int | None = None


class CloseConversationRequest(Body):
    user_id: int


class UpdateTeamRequest(Body):
    # Body not shown by the spec: the team's own text fields, each optional.
    name: Text = Field(None, min_length=1, max_length=100)
    description: Text = Field(None, max_length=500)
    category: Text = Field(None, min_length=1, max_length=50)
    routing_rule: RoutingRule = None
    external_team_id: Text = Field(None, min_length=1, max_length=128)


class UpdateUserRequest(Body):
    avatar: Text = Field(None, min_length=1, max_length=2048)
    chat_name: Text = Field(None, min_length=1, max_length=100)
    external_user_id: bounded_text(min_length=1, max_length=128) | None = None
    mobile: str = Field(None, pattern=r"^\+[1-9][0-9]{6,14}$")  # E.164
    name: Text = Field(None, min_length=1, max_length=100)


class AddUsersRequest(Body):
    user_ids: list[int] = Field(min_length=1, max_length=100)


# --- responses


class Cursor(BaseModel):
    after: str  # "" when no rows follow
    before: str  # "" when no rows precede


class ChannelSummary(BaseModel):
    id: int
    name: str
    type: str
    status: str
    language_code: str
    timezone: str
    external_channel_id: str
    created_at: str
    updated_at: str


class Channel(ChannelSummary):
    uuid: str
    external_access_token_expired_at: str
    broadcast_enabled: bool
    user_recognition_enabled: bool


class ChannelList(BaseModel):
    channels: list[Channel]


class ChannelPage(BaseModel):
    channels: list[ChannelSummary]
    cursor: Cursor


class _MemberCommon(BaseModel):
    id: int
    account_manager: str | None
    assign_type: AssignType
    avatar: str | None
    birthday: str | None
    city: str | None
    company: str | None
    connect_id: str | None
    country: str | None
    display_name: str | None
    engagement_level: str
    external_member_id: str
    gender: str | None
    location: str | None
    member_level: str | None
    name: str | None
    original_email: str | None
    original_mobile: str | None
    original_name: str | None
    processing_state: str
    star_mark: bool
    status: str
    type: str


class MemberByExternalId(_MemberCommon):
    channel_id: int
    customer_id: str | None
    display_email: str | None
    display_mobile: str | None


class MemberById(_MemberCommon):
    created_at: str
    custom_id: str | None
    email: str | None
    external_channel_id: str
    last_member_message_send: str | None
    last_message_at: str | None
    mobile: str | None
    note: str | None
    updated_at: str


class MemberSaved(BaseModel):
    member_id: int


class AssignmentRelationship(BaseModel):
    team_id: int | None
    user_id: int | None


class Assignment(BaseModel):
    assign_type: AssignType
    assignment_relationship: AssignmentRelationship


class ConversationClosed(BaseModel):
    member_id: int
    processing_state: Literal["resolved"]


class TeamSummary(BaseModel):
    id: int
    name: str
    description: str
    category: str
    external_team_id: str
    routing_rule: RoutingRule


class Team(TeamSummary):
    editable: bool


class TeamPage(BaseModel):
    teams: list[TeamSummary]
    cursor: Cursor


class UserSummary(BaseModel):
    id: int
    name: str
    chat_name: str
    avatar: str
    external_user_id: str | None
    created_at: str
    role_name: str
    role_type: str
    on_duty_status: str
    status: str
    type: str
    is_internal_user: bool


class User(UserSummary):
    org_id: int
    role_id: int
    inviter_id: int
    email: str


class UserPage(BaseModel):
    users: list[UserSummary]
    cursor: Cursor


class TeamUser(BaseModel):
    """The user record returned after adding users to a team."""

    id: int
    account_id: int
    org_id: int
    role_id: int
    inviter_id: int
    avatar: str
    chat_name: str
    external_user_id: str | None
    language_code: str
    mobile: str
    name: str
    on_duty_status: str
    status: str
    enable_popup_notification: bool
    enable_sound_notification: bool
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None


class BackupCreated(BaseModel):
    backup_id: int


class Backup(BaseModel):
    backup_id: int
    created_at: datetime
    download_url: str  # "" until the backup is completed
    state: BackupState
