"""The agent's turns in Dagster and the warehouse: the sensor asks for a compaction when the
inbox holds what the lake lacks, the asset lands it, the views show it."""

from datetime import UTC, datetime, timedelta

import dagster as dg
import duckdb
import pytest

from assets import agent
from assets.resources import LakeResource
from pipelines.agent.inbox import open_agent_inbox
from pipelines.agent.reply import HANDOVER, Answer
from pipelines.agent.request import request_key
from tests.agent.conftest import body_of, image, message, turn

NOON = datetime(2026, 11, 27, 12, tzinfo=UTC)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_the_sensor_and_the_asset_land_the_turns_and_the_views_show_them(
    request, tmp_path, monkeypatch, store
):
    monkeypatch.delenv("AGENT_INBOX", raising=False)
    if store == "postgres":
        monkeypatch.setenv("SYNC_STORE", request.getfixturevalue("shared_store"))
    else:
        monkeypatch.delenv("SYNC_STORE", raising=False)
    resource = LakeResource(
        lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "warehouse.duckdb")
    )

    def evaluate():
        with dg.build_sensor_context(resources={"lake": resource}) as context:
            return agent.conversation_agent_sensor(context)

    def materialize():
        with dg.DagsterInstance.ephemeral() as instance:
            assert dg.materialize(agent.ASSETS, resources={"lake": resource}, instance=instance)

    assert isinstance(evaluate(), dg.SkipReason)  # no inbox yet
    first = turn(1, [message(1, "Where is my order?")])
    # The next turn of the conversation carries its messages again, and an image.
    second = turn(1, [message(1, "Where is my order?"), message(2, "Hello?"), image(3)])
    with open_agent_inbox(resource.lake_root) as inbox:
        for n, document in enumerate([first, second]):
            key = request_key(document)
            inbox.store(key, NOON + timedelta(minutes=n), body_of(document))
        inbox.store_answer(request_key(first), Answer(HANDOVER, "default"), NOON)
        # One run per state of the inbox: its newest request, then its newest answer.
        assert evaluate().run_key == f"{inbox.uuid}-2-1"
        materialize()
        assert isinstance(evaluate(), dg.SkipReason)
        # An answer stored after the compaction makes its day stale again.
        inbox.store_answer(request_key(second), Answer("On its way.", "replied"), NOON)
        assert evaluate().run_key == f"{inbox.uuid}-2-2"
        materialize()

    with duckdb.connect(resource.warehouse_path, read_only=True) as con:
        requests = con.sql(
            "SELECT conversation_id, message_count, reply_text, handover, outcome "
            "FROM conversation.agent_requests ORDER BY received_at"
        ).fetchall()
        messages = con.sql(
            "SELECT message_uuid, message_type, turns FROM conversation.agent_messages "
            "ORDER BY message_uuid"
        ).fetchall()
    assert requests == [(1, 1, HANDOVER, True, "default"), (1, 3, "On its way.", False, "replied")]
    assert [(uuid[-1], kind, turns) for uuid, kind, turns in messages] == [
        ("1", "text", 2),
        ("2", "text", 1),
        ("3", "image", 1),
    ]
