"""The AI agent request the conversation service POSTs for each conversation turn, read and
checked (`parse_request`), and the key that makes a retry the same request (`request_key`).

Where the service's documentation says nothing, the choices (docs/agent.md lists them):
- required: `conversation_id`, `messages`, `org_uuid`, `participants.members` and
  `version` (as documented), and of each message `message_uuid`, `message_type`,
  `sender_type` and `timestamp`; `sender_id` and `text` may be missing (no text is "");
  of each participant `member_id` and `channel_id`;
- `version` is `1.0` or `1.1`; a 1.1 image message must carry `url` (its `text` is "");
- a `timestamp` without an offset is UTC;
- fields the documentation does not name are kept: the whole body is stored.

The request has no id of its own. Its key is the SHA-256 of its canonical JSON (keys sorted,
no spaces), so the service sending the same turn again, byte for byte or reformatted, is one
request; a turn that differs in anything is another.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Annotated, Literal

import pydantic

from pipelines.errors import DataRefused
from pipelines.inbox.body import Refusals, json_object

#: Ids as the lake stores them: a number beyond int64 is not an id of the service.
Id = Annotated[int, pydantic.Field(ge=-(2**63), lt=2**63)]


class _Read(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow", frozen=True)


class Message(_Read):
    message_uuid: str
    message_type: str
    sender_type: str
    sender_id: Id | None = None
    text: str = ""
    timestamp: datetime
    url: str | None = None
    mime_type: str | None = None

    @pydantic.field_validator("timestamp")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Participant(_Read):
    member_id: Id
    channel_id: Id
    channel_member_id: str | None = None
    channel_type: str | None = None
    external_member_id: str | None = None


class Participants(_Read):
    members: list[Participant]


class AgentRequest(_Read):
    """One conversation turn, as the reply function receives it."""

    conversation_id: Id
    messages: list[Message]
    org_uuid: str
    participants: Participants
    prompt: str | None = None
    version: Literal["1.0", "1.1"]

    @pydantic.model_validator(mode="after")
    def _images_carry_urls(self) -> AgentRequest:
        if self.version == "1.1":
            for number, message in enumerate(self.messages, 1):
                if message.message_type == "image" and not message.url:
                    raise ValueError(f"message {number} is an image of version 1.1 without url")
        return self

    @property
    def member(self) -> Participant | None:
        """The conversation's member: the first participant."""
        members = self.participants.members
        return members[0] if members else None

    @property
    def last_text(self) -> str:
        """What the member wrote last: the text the reply answers."""
        for message in reversed(self.messages):
            if message.sender_type == "member" and message.text:
                return message.text
        return ""


class NotARequest(DataRefused):
    """The body is not an AI agent request; the message says why, for the caller."""


REFUSALS = Refusals(
    malformed="the body is not JSON ({exc})",
    too_deep="the body nests too deep to read",
    unreadable="the body could not be read ({exc})",
    not_an_object="the body is not a JSON object",
)


def _first_problem(error: pydantic.ValidationError) -> str:
    problem = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in problem["loc"]) or "the body"
    return f"{where}: {problem['msg']}"


def parse_request(body: bytes) -> tuple[AgentRequest, str]:
    """The request and its key; `NotARequest` saying why when the body is not one."""
    value = json_object(body, REFUSALS, NotARequest)
    try:
        request = AgentRequest.model_validate(value)
    except pydantic.ValidationError as exc:
        raise NotARequest(_first_problem(exc)) from None
    return request, request_key(value)


def request_key(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
