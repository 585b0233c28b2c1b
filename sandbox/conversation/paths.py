"""Method and path of every operation, written down once.

The spec names operations but shows no method or path (section 4): these are the sandbox's
choice, REST-like and versioned. Where the spec has two forms of one resource (team by id with
`editable`, team by team id without; user by id v1, user by user id reduced) the reduced forms
live under /v2, next to the paginated lists that return the same reduced records.
"""

from __future__ import annotations

OPERATIONS: dict[str, tuple[str, str]] = {
    "trigger_messages_backup": ("POST", "/v1/backups/messages"),
    "get_backup_detail": ("GET", "/v1/backups/{backup_id}"),
    "list_channels": ("GET", "/v1/channels"),
    "list_channels_paginated": ("GET", "/v2/channels"),
    "get_member_by_channel_id_and_external_id": (
        "GET",
        "/v1/channels/{channel_id}/external-members/{external_member_id}",
    ),
    "get_member_by_id": ("GET", "/v1/channels/{channel_id}/members/{member_id}"),
    "create_or_update_channel_member": ("POST", "/v1/channels/{channel_id}/members"),
    "get_member_assignment": ("GET", "/v1/channels/{channel_id}/members/{member_id}/assignment"),
    "assign_member_to_an_individual_user": ("POST", "/v1/assignments/individual"),
    "manual_assignment": ("POST", "/v1/assignments/manual"),
    "close_conversation": ("POST", "/v1/channels/{channel_id}/members/{member_id}/close"),
    "get_team_by_external_team_id": ("GET", "/v1/external-teams/{external_team_id}"),
    "get_team_by_id": ("GET", "/v1/teams/{team_id}"),
    "update_team": ("PATCH", "/v1/teams/{team_id}"),
    "add_users_to_team": ("POST", "/v1/teams/{team_id}/users"),
    "list_teams": ("GET", "/v2/teams"),
    "get_team_by_team_id": ("GET", "/v2/teams/{team_id}"),
    "get_user_by_external_user_id": ("GET", "/v1/external-users/{external_user_id}"),
    "get_user_by_id": ("GET", "/v1/users/{user_id}"),
    "update_user": ("PATCH", "/v1/users/{user_id}"),
    "list_users": ("GET", "/v2/users"),
    "get_user_by_user_id": ("GET", "/v2/users/{user_id}"),
}

# Where `download_url` of a completed backup points (the spec: "the backup output is a CSV
# file"). Not an operation of the spec, so it stays out of the OpenAPI document.
BACKUP_DOWNLOAD = ("GET", "/v1/backups/{backup_id}/download")
