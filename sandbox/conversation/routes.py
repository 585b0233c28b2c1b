"""The 22 operations of spec section 4, registered from `paths.OPERATIONS`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from sandbox.conversation import models as m
from sandbox.conversation.models import pick
from sandbox.conversation.pages import PageRequest, page_request, paginate
from sandbox.conversation.paths import BACKUP_DOWNLOAD, OPERATIONS
from sandbox.encoding import JSONResponse
from sandbox.errors import ApiError, invalid

if TYPE_CHECKING:
    from sandbox.conversation import ConversationService


def conversation_router(service: ConversationService) -> APIRouter:
    router = APIRouter()
    directory, members, messages, backups = (
        service.directory,
        service.members,
        service.messages,
        service.backups,
    )

    def operation(operation_id: str, response_model, status_code: int = 200) -> Callable:
        method, path = OPERATIONS[operation_id]

        def register(handler: Callable) -> Callable:
            router.add_api_route(
                path,
                handler,
                methods=[method],
                operation_id=operation_id,
                response_model=response_model,
                status_code=status_code,
            )
            return handler

        return register

    # --- backups

    @operation("trigger_messages_backup", m.BackupCreated, 202)
    def trigger_messages_backup(body: m.TriggerBackupRequest) -> JSONResponse:
        if body.ended_at <= body.started_at:
            raise invalid("ended_at", "must be after started_at")
        channel = None
        if body.channel_id is not None:
            channel = directory.channel_index(body.channel_id, "channel_id")
        member = None
        if body.member_id is not None:
            member = members.row(body.channel_id, body.member_id, "member_id")
        backup_id = backups.trigger(
            body.started_at.timestamp(), body.ended_at.timestamp(), channel, member
        )
        return JSONResponse({"backup_id": backup_id}, status_code=202)

    @operation("get_backup_detail", m.Backup)
    def get_backup_detail(backup_id: int) -> JSONResponse:
        return JSONResponse(backups.detail(backup_id))

    method, path = BACKUP_DOWNLOAD

    @router.api_route(path, methods=[method], include_in_schema=False)
    def download_backup(backup_id: int) -> StreamingResponse:
        backup, rows = backups.completed(backup_id)
        return StreamingResponse(
            backups.csv_chunks(backup, rows),
            media_type="text/csv; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="messages-backup-{backup_id}.csv"'
            },
        )

    # --- channels

    @operation("list_channels", m.ChannelList)
    def list_channels() -> JSONResponse:
        return JSONResponse({"channels": [pick(c, m.Channel) for c in directory.channels]})

    @operation("list_channels_paginated", m.ChannelPage)
    def list_channels_paginated(page: PageRequest = Depends(page_request)) -> JSONResponse:  # noqa: B008
        rows, cursor = paginate(directory.channels, page)
        return JSONResponse(
            {"channels": [pick(c, m.ChannelSummary) for c in rows], "cursor": cursor}
        )

    # --- members

    @operation("get_member_by_channel_id_and_external_id", m.MemberByExternalId)
    def get_member_by_channel_id_and_external_id(
        channel_id: int, external_member_id: str
    ) -> JSONResponse:
        row = members.row_by_external(channel_id, external_member_id)
        return JSONResponse(members.by_external_form(row))

    @operation("get_member_by_id", m.MemberById)
    def get_member_by_id(channel_id: int, member_id: int) -> JSONResponse:
        row = members.row(channel_id, member_id)
        return JSONResponse(members.by_id_form(row, *messages.last_times(row)))

    @operation("create_or_update_channel_member", m.MemberSaved)
    def create_or_update_channel_member(
        channel_id: int, body: m.ChannelMemberRequest
    ) -> JSONResponse:
        channel = directory.channel_index(channel_id)
        kind = directory.channels[channel]["type"]
        if kind != "line":  # spec section 4: LINE channel type only
            raise ApiError(
                400,
                "unsupported_channel_type",
                f"channel {channel_id} is a {kind} channel; only line channels "
                "accept members through the API",
                field="channel_id",
            )
        row, created = members.upsert_external(channel, body.channel_member_id)
        return JSONResponse(
            {"member_id": members.member_id(row)}, status_code=201 if created else 200
        )

    # --- assignments (spec section 3)

    @operation("get_member_assignment", m.Assignment)
    def get_member_assignment(channel_id: int, member_id: int) -> JSONResponse:
        return JSONResponse(members.assignment(members.row(channel_id, member_id)))

    @operation("assign_member_to_an_individual_user", m.Assignment)
    def assign_member_to_an_individual_user(body: m.IndividualAssignmentRequest) -> JSONResponse:
        directory.check_org(body.org_id)
        relation = body.assignment_relationship or m.IndividualRelationship()
        if (
            None not in (relation.member_id, body.member_id)
            and relation.member_id != body.member_id
        ):
            raise invalid("member_id", "differs from assignment_relationship.member_id")
        member_id = relation.member_id if relation.member_id is not None else body.member_id
        if member_id is None:
            raise invalid("assignment_relationship.member_id", "names the member to assign")
        row = members.row(body.channel_id, member_id, "assignment_relationship.member_id")
        if relation.user_id is None and relation.team_id is None:  # empty or null: unassign
            members.assign(row, "unassigned", None, None)
        elif relation.user_id is None:
            raise invalid(
                "assignment_relationship.user_id",
                "the individual assignment needs a user (or no team and no user, to unassign)",
            )
        else:
            _check_assignee(relation.team_id, relation.user_id)
            members.assign(row, "case-based", relation.team_id, relation.user_id)
        return JSONResponse(members.assignment(row))

    @operation("manual_assignment", m.Assignment)
    def manual_assignment(body: m.ManualAssignmentRequest) -> JSONResponse:
        directory.check_org(body.org_id)
        row = members.row(body.channel_id, body.member_id, "member_id")
        if body.assign_type == "unassigned":
            members.assign(row, "unassigned", None, None)
            return JSONResponse(members.assignment(row))
        relation = body.assignment_relationship or m.RelationshipRequest()
        if relation.user_id is None and relation.team_id is None:
            raise invalid("assignment_relationship", "a user or a team to assign to is required")
        _check_assignee(relation.team_id, relation.user_id)
        # Omitted or `manual` assigns; the stored kind is then `case-based` (sandbox choice).
        kind = body.assign_type if body.assign_type in ("case-based", "permanent") else "case-based"
        members.assign(row, kind, relation.team_id, relation.user_id)
        return JSONResponse(members.assignment(row))

    def _check_assignee(team_id: int | None, user_id: int | None) -> None:
        """Spec section 3: a valid user or team; a deactivated user is not valid."""
        if team_id is not None:
            directory.team(team_id, "assignment_relationship.team_id")
        if user_id is not None:
            user = directory.user(user_id, "assignment_relationship.user_id")
            if user["status"] == "deactivated":
                raise invalid("assignment_relationship.user_id", f"user {user_id} is deactivated")

    @operation("close_conversation", m.ConversationClosed)
    def close_conversation(
        channel_id: int, member_id: int, body: m.CloseConversationRequest
    ) -> JSONResponse:
        row = members.row(channel_id, member_id)
        directory.user(body.user_id, "user_id")
        members.close(row)
        return JSONResponse({"member_id": member_id, "processing_state": "resolved"})

    # --- teams

    @operation("get_team_by_external_team_id", m.Team)
    def get_team_by_external_team_id(external_team_id: str) -> JSONResponse:
        return JSONResponse(pick(directory.team_by_external(external_team_id), m.Team))

    @operation("get_team_by_id", m.Team)
    def get_team_by_id(team_id: int) -> JSONResponse:
        return JSONResponse(pick(directory.team(team_id), m.Team))

    @operation("update_team", m.Team)
    def update_team(team_id: int, body: m.UpdateTeamRequest) -> JSONResponse:
        team = directory.update_team(team_id, body.model_dump(exclude_unset=True))
        return JSONResponse(pick(team, m.Team))

    @operation("add_users_to_team", list[m.TeamUser])
    def add_users_to_team(team_id: int, body: m.AddUsersRequest) -> JSONResponse:
        users = directory.add_users_to_team(team_id, body.user_ids)
        return JSONResponse([pick(u, m.TeamUser) for u in users])

    @operation("list_teams", m.TeamPage)
    def list_teams(page: PageRequest = Depends(page_request)) -> JSONResponse:  # noqa: B008
        rows, cursor = paginate(directory.teams, page)
        return JSONResponse({"teams": [pick(t, m.TeamSummary) for t in rows], "cursor": cursor})

    @operation("get_team_by_team_id", m.TeamSummary)
    def get_team_by_team_id(team_id: int) -> JSONResponse:
        return JSONResponse(pick(directory.team(team_id), m.TeamSummary))

    # --- users

    @operation("get_user_by_external_user_id", m.User)
    def get_user_by_external_user_id(external_user_id: str) -> JSONResponse:
        return JSONResponse(pick(directory.user_by_external(external_user_id), m.User))

    @operation("get_user_by_id", m.User)
    def get_user_by_id(user_id: int) -> JSONResponse:
        return JSONResponse(pick(directory.user(user_id), m.User))

    @operation("update_user", m.User)
    def update_user(user_id: int, body: m.UpdateUserRequest) -> JSONResponse:
        user = directory.update_user(user_id, body.model_dump(exclude_unset=True))
        return JSONResponse(pick(user, m.User))

    @operation("list_users", m.UserPage)
    def list_users(page: PageRequest = Depends(page_request)) -> JSONResponse:  # noqa: B008
        rows, cursor = paginate(directory.users, page)
        return JSONResponse({"users": [pick(u, m.UserSummary) for u in rows], "cursor": cursor})

    @operation("get_user_by_user_id", m.UserSummary)
    def get_user_by_user_id(user_id: int) -> JSONResponse:
        return JSONResponse(pick(directory.user(user_id), m.UserSummary))

    return router
