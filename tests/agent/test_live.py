"""An hour of a live sandbox's conversations: the service calls the agent for every member
message, every call is answered, and the warehouse holds each turn once with its answer, as
the sandbox recorded them."""

import dagster as dg
import duckdb
import httpx

from assets import agent
from assets.resources import LakeResource
from pipelines.agent.reply import HANDOVER
from pipelines.agent.request import request_key
from tests.agent.conftest import TOKEN


def test_an_hour_of_live_calls_is_answered_and_lands_equal_to_the_truth(
    start_sandbox, spawn_agent, tmp_path, monkeypatch
):
    monkeypatch.delenv("AGENT_INBOX", raising=False)
    monkeypatch.delenv("SYNC_STORE", raising=False)
    lake = LakeResource(
        lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "warehouse.duckdb")
    )
    receiver = spawn_agent(
        {
            "AGENT_TOKEN": TOKEN,
            "AGENT_REPLY": "tests.agent.replies:thank_or_hand_over",
            "LAKE_ROOT": lake.lake_root,
            "WAREHOUSE_PATH": lake.warehouse_path,
        }
    )
    sandbox = start_sandbox(
        frozen=False, arrivals_per_minute=2, agent_url=receiver.url, agent_token=TOKEN
    )
    httpx.post(f"{sandbox.url}/_sandbox/clock/advance", params={"seconds": 3600}, timeout=60)
    seen = httpx.get(f"{sandbox.url}/_sandbox/agent", params={"wait": 120}, timeout=180).json()
    sandbox.app.agent.close()  # the sandbox outlives the test; its members stop asking
    assert seen["idle"]
    calls = seen["calls"]
    truth = sandbox.truth()["conversation"]
    assert {region: truth[region]["agent_calls"] for region in ("default", "jp")} == {
        region: sum(call["region"] == region for call in calls) for region in ("default", "jp")
    }
    assert len(calls) >= 100 and {call["request"]["version"] for call in calls} == {"1.0", "1.1"}
    assert all(call["answered"] and call["seconds"] < 45 for call in calls)
    expected = {
        request_key(call["request"]): (call["reply_text"], call["handover"]) for call in calls
    }
    assert {handover for _, handover in expected.values()} == {True, False}
    assert all(
        (text == HANDOVER) == ("?" in _last_member_text(call["request"]))
        for call, (text, _) in zip(calls, expected.values(), strict=True)
    )

    with dg.DagsterInstance.ephemeral() as instance:
        assert dg.materialize(agent.ASSETS, resources={"lake": lake}, instance=instance).success
    with duckdb.connect(lake.warehouse_path, read_only=True) as con:
        landed = con.sql(
            "SELECT request_key, reply_text, handover, count(*) OVER (PARTITION BY request_key) "
            "FROM conversation.agent_requests"
        ).fetchall()
        shown = {
            uuid
            for (uuid,) in con.sql(
                "SELECT message_uuid FROM conversation.agent_messages"
            ).fetchall()
        }
    assert {key: (text, handover) for key, text, handover, _ in landed} == expected
    assert {copies for *_, copies in landed} == {1}
    messages = {
        uuid
        for region in ("default", "jp")
        for uuid in sandbox.truth_ids("conversation", region, "messages")
    }
    assert shown and shown <= messages  # every message the agent saw joins conversation.messages


def _last_member_text(request: dict) -> str:
    texts = [m["text"] for m in request["messages"] if m["sender_type"] == "member" and m["text"]]
    return texts[-1] if texts else ""
