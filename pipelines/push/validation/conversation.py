"""What the push writes back to the conversation service: member assignments (the service's
manual assignment) and conversation closes, checked against the rules of the conversation spec
(section 3, "States and transitions"; section 4, "Manual assignment" and "Close conversation")
before any request. The service itself refuses what only it knows (an unknown member, team or
user, a deactivated user); those refusals are kept by pipelines/push/send.py.

Choices where the spec is silent:
- `case-based` and `permanent` need a team or a user (the spec: "valid user or team"); either
  alone is enough;
- `unassigned` clears the assignment, so a team or a user beside it is refused rather than
  ignored: the view says two things at once;
- `manual` (the spec's "omit or pass `manual` to assign") is not taken: the view says which
  of the two kinds it means.
"""

from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainValidator

from pipelines.push.validation.fields import ROW, DateTime, Problem, validated, whole_number

#: An id of the service: a whole number from 1.
Id = Annotated[int, PlainValidator(partial(whole_number, 1), json_schema_input_type=int)]


class ConversationAssignment(BaseModel):
    model_config = ROW

    channel_id: Id = Field(description="The member's channel (`conversation.members`).")
    member_id: Id = Field(description="The member to assign (`conversation.members.id`).")
    assign_type: Literal["case-based", "permanent", "unassigned"] = Field(
        description="How the member is assigned; `unassigned` clears the assignment."
    )
    team_id: Id | None = Field(
        None,
        description="The team to assign to (`conversation.teams.id`); with `user_id` or "
        "alone; null when unassigned.",
    )
    user_id: Id | None = Field(
        None,
        description="The user to assign to (`conversation.users.id`, not deactivated); with "
        "`team_id` or alone; null when unassigned.",
    )
    updated_at: DateTime = Field(
        description="When the assignment was decided, with its time zone: per member the "
        "newest is sent, once."
    )


class ConversationClose(BaseModel):
    model_config = ROW

    channel_id: Id = Field(description="The member's channel (`conversation.members`).")
    member_id: Id = Field(description="The member whose conversation is closed.")
    user_id: Id = Field(
        description="The user the conversation is closed on behalf of (`conversation.users.id`)."
    )
    closed_at: DateTime = Field(
        description="When the case was resolved, with its time zone: each close is sent once."
    )


def assignment_body(row: Mapping[str, Any]) -> tuple[dict | None, list[Problem]]:
    """The assignment as the ledger keeps it (the client makes the request of it), or None
    with every problem: the fields, then whom its `assign_type` needs."""
    body, problems = validated(ConversationAssignment, row)
    if body is None:
        return None, problems
    body = {"team_id": None, "user_id": None} | body
    assignee = body["team_id"] is not None or body["user_id"] is not None
    kind = body["assign_type"]
    if kind == "unassigned" and assignee:
        named = "team_id" if body["team_id"] is not None else "user_id"
        return None, [Problem(named, "must be null when assign_type is unassigned")]
    if kind != "unassigned" and not assignee:
        reason = f"a user_id or a team_id is required when assign_type is {kind}"
        return None, [Problem("user_id", reason)]
    return body, []


def close_body(row: Mapping[str, Any]) -> tuple[dict | None, list[Problem]]:
    return validated(ConversationClose, row)
