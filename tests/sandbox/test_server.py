"""`python -m sandbox` as users start it: a real port, every operation in its OpenAPI document."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from sandbox.process import running_sandbox

OPERATIONS = {
    "/comment/api/v1": {
        "get_me",
        "list_accounts",
        "list_account_posts",
        "list_activities",
        "create_activity",
        "get_activity",
        "update_activity",
        "delete_activity",
        "list_logs",
        "get_stats",
    },
    "/conversation": {
        "get_backup_detail",
        "trigger_messages_backup",
        "list_channels",
        "list_channels_paginated",
        "get_member_by_channel_id_and_external_id",
        "get_member_by_id",
        "create_or_update_channel_member",
        "get_member_assignment",
        "assign_member_to_an_individual_user",
        "manual_assignment",
        "close_conversation",
        "get_team_by_external_team_id",
        "get_team_by_id",
        "update_team",
        "add_users_to_team",
        "list_teams",
        "get_team_by_team_id",
        "get_user_by_external_user_id",
        "get_user_by_id",
        "update_user",
        "list_users",
        "get_user_by_user_id",
    },
    "/datahub": {
        "update_channel_contact_profile",
        "import_members",
        "get_task_status",
        "export_members",
        "submit_behavior_event",
        "submit_coupon_record",
        "submit_order_record",
        "submit_order_fulfillment_record",
        "submit_membership_tier_record",
        "submit_point_record",
        "submit_reservation_record",
        "get_broadcast_report",
        "list_broadcasts",
        "list_custom_fields",
    },
}
OPERATIONS["/conversation-jp"] = OPERATIONS["/conversation"]
OPERATIONS["/datahub-jp"] = OPERATIONS["/datahub"]
# Routes the sandbox adds beside the documented operations: the files that async jobs hand out.
DOWNLOADS = {"download_member_export", "download_messages_backup"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    with running_sandbox(_free_port(), "--frozen", "--seed", "11") as base:
        yield base


@pytest.mark.parametrize("base", sorted(OPERATIONS))
def test_every_operation_is_listed_under_its_operation_id(server, base):
    document = httpx.get(f"{server}{base}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    listed = {
        operation["operationId"]
        for methods in document["paths"].values()
        for operation in methods.values()
    }
    assert listed - DOWNLOADS == OPERATIONS[base]


@pytest.mark.parametrize("base", sorted(OPERATIONS))
def test_no_input_makes_an_operation_answer_500(server, base):
    """Every operation, called with missing, empty and nonsense input, answers below 500."""
    document = httpx.get(f"{server}{base}/openapi.json").json()
    headers = (
        {"Authorization": "Bearer sa_live_demo_readwrite"}
        if base.startswith("/comment")
        else {"apikey": "demo-apikey"}
    )
    bodies = [None, b"", b"{", b"[]", b'{"x": 1}', b'"\\u0000"', b"null"]
    with httpx.Client(base_url=server, headers=headers, timeout=30) as http:
        for path, methods in document["paths"].items():
            for segment in ("0", "-1", "x", "00000000-0000-0000-0000-000000000000", "9" * 30):
                url = base + re.sub(r"\{[^}]+\}", segment, path)
                for method in methods:
                    for body in bodies if method in ("post", "put", "patch") else [None]:
                        answer = http.request(
                            method.upper(),
                            url,
                            content=body,
                            params={"limit": "abc", "days": "-5", "page": "x"},
                            headers={"Content-Type": "application/json"},
                        )
                        assert answer.status_code < 500, (method, url, body, answer.text)


def test_a_dropped_connection_reaches_a_real_client_as_a_transport_error(server):
    with httpx.Client(base_url=server) as http:
        http.put("/_sandbox/faults", json={"drop": 1.0}).raise_for_status()
        try:
            with pytest.raises(httpx.TransportError):
                http.get(
                    "/conversation/openapi.json".replace("openapi.json", "x"),
                    headers={"apikey": "demo-apikey"},
                )
        finally:
            http.put("/_sandbox/faults", json={}).raise_for_status()


def test_ground_truth_covers_every_service_and_region(server):
    truth = httpx.get(f"{server}/_sandbox/truth").json()
    assert set(truth) == {"comment", "conversation", "datahub"}
    assert set(truth["conversation"]) == set(truth["datahub"]) == {"default", "jp"}
    assert len(truth["comment"]) == 2  # two workspaces: demo and agency
    assert truth["comment"] and all(
        scope["trigger_logs"] > 0 for scope in truth["comment"].values()
    )


@pytest.mark.parametrize("limits", [[], ["--no-rate-limits"]], ids=["limited", "unlimited"])
def test_the_comment_limit_binds_unless_rate_limits_are_off(limits):
    """`--rate-window 5` applies the 120-per-minute limit to 5 s; `--no-rate-limits` lifts
    it (the benchmarks' setting). A burst of 130 calls meets 429s only in the first."""
    args = ["--frozen", "--rate-window", "5", *limits]
    with running_sandbox(_free_port(), *args) as base, httpx.Client(timeout=30) as client:
        answers = [
            client.get(
                f"{base}/comment/api/v1/me",
                headers={"Authorization": "Bearer sa_live_demo_readonly"},
            ).status_code
            for _ in range(130)
        ]
    assert set(answers) == ({200} if limits else {200, 429})
