"""The demo's reply function (demo/agent.py) on a small warehouse built as the demo builds
it: the shop's tables in the lake (demo/shop.py's streams), the views from `sql/` and
demo/sql (pipelines/warehouse/__init__.py), read through the agent's `WarehouseSession`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from demo import SQL_DIR as DEMO_SQL
from demo.agent import RETURNS_TEAM, reply
from demo.shop import CUSTOMERS, FILE, ORDERS, declare_shop
from pipelines.agent.reply import HANDOVER, WarehouseSession
from pipelines.agent.request import AgentRequest
from pipelines.lake import Lake
from pipelines.registry import WAREHOUSE_STREAMS
from pipelines.streams.conversation import MEMBERS, TEAMS
from pipelines.warehouse import SQL_DIR, Warehouse

LINE_UID = "U4af4980629a1b2c3d4e5f60718293a4b"
NO_ORDERS_UID = "U0000000000000000000000000000000a"
STRANGER_UID = "U9999999999999999999999999999999c"
#: A member text of the sandbox's (sandbox/conversation/messages.py): a number not theirs.
SANDBOX_ORDER_TEXT = 'Hi, I ordered 2 items, but only 1 arrived.\nOrder "A-1182", can you check?'


def at(day: int, hour: int = 3) -> datetime:
    return datetime(2026, 10, day, hour, tzinfo=UTC)


def customer(customer_id: str, external_member_id: str) -> dict:
    return {
        "customer_id": customer_id,
        "channel_type": "line",
        "external_member_id": external_member_id,
    }


def version(order_id: str, customer_id: str, status: str, when: datetime) -> dict:
    return {
        "timestamp": when,
        "source_platform_customer_id": customer_id,
        "id": order_id,
        "status": status,
    }


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Iterator[WarehouseSession]:
    """Two orders of one customer, an order of another, a customer without orders."""
    root = tmp_path_factory.mktemp("agent")
    lake = Lake(root / "lake")
    lake.write(
        CUSTOMERS,
        FILE,
        [
            customer("C00100001", LINE_UID),
            customer("C00100002", "U1111111111111111111111111111111b"),
            customer("C00100003", NO_ORDERS_UID),
        ],
    )
    lake.write(
        ORDERS,
        FILE,
        [
            version("O100001", "C00100001", "created", at(1)),
            version("O100001", "C00100001", "confirmed", at(1, 4)),
            # Changed last, but placed first. 20:00 UTC on the 13th: the 14th in Taipei.
            version("O100001", "C00100001", "completed", at(13, 20)),
            # Placed last: the latest order. Its versions arrive newest first, as some do.
            version("O100002", "C00100001", "processing", at(12)),
            version("O100002", "C00100001", "confirmed", at(10, 5)),
            version("O100002", "C00100001", "created", at(10)),
            version("O100003", "C00100002", "cancelled", at(20)),
        ],
    )
    # The conversation member of the turns, and the teams of their region and another's.
    lake.write(MEMBERS, "default", [{"id": 2000123, "channel_id": 11, "connection": "default"}])
    for region, team_id in (("default", 41), ("jp", 42)):
        lake.write(TEAMS, region, [{"id": team_id, "name": RETURNS_TEAM, "connection": region}])
    declare_shop(lake)  # the shop's other tables, empty, as the demo's views need them
    path = root / "warehouse.duckdb"
    Warehouse(path, lake, WAREHOUSE_STREAMS, SQL_DIR, extra_sql=[DEMO_SQL]).refresh()
    session = WarehouseSession(str(lake.root), path)
    yield session
    session.close()


def turn(
    text: str, external_member_id: str | None = LINE_UID, member_id: int = 2000123
) -> AgentRequest:
    """A turn as the sandbox sends one (sandbox/conversation/agent.py): the conversation so
    far, the member's new text last."""
    return AgentRequest.model_validate(
        {
            "conversation_id": 7001,
            "messages": [
                message(1, "member", "Hello"),
                message(2, "bot", "Our agent will reply shortly."),
                message(3, "member", text),
            ],
            "org_uuid": "5f0c6a52-8d63-4f1e-9d7a-2b8f3c1d4e5a",
            "participants": {
                "members": [
                    {
                        "member_id": member_id,
                        "channel_id": 11,
                        "channel_type": "line",
                        "channel_member_id": external_member_id,
                        "external_member_id": external_member_id,
                    }
                ]
            },
            "version": "1.1",
        }
    )


def message(number: int, sender_type: str, text: str) -> dict:
    return {
        "message_uuid": f"00000000-0000-4000-8000-{number:012d}",
        "message_type": "text",
        "sender_type": sender_type,
        "sender_id": 2000123 if sender_type == "member" else None,
        "text": text,
        "timestamp": f"2026-10-20T09:0{number}:00Z",
    }


def test_an_order_question_gets_the_status_of_the_latest_order(warehouse) -> None:
    """The order placed last, though the other one changed since."""
    answer = reply(turn("Hi, is my order shipped yet?"), warehouse)
    assert answer == "Your order O100002 has been in preparation since 12 October 2026."


def test_a_named_order_number_gets_that_order(warehouse) -> None:
    answer = reply(turn("Where's order o100001?"), warehouse)
    assert answer == "Your order O100001 was completed on 14 October 2026."


def test_a_japanese_question_gets_a_japanese_answer(warehouse) -> None:
    assert reply(turn("注文の確認をお願いします"), warehouse) == (
        "ご注文O100002は2026年10月12日から準備中です。"
    )


def test_a_number_in_japanese_text_is_found_and_the_day_is_the_shops(warehouse) -> None:
    """O100001 was completed at 20:00 UTC on the 13th: the 14th in Taipei."""
    answer = reply(turn("注文O100001の状況は？"), warehouse)
    assert answer == "ご注文O100001は2026年10月14日に完了しました。"


@pytest.mark.parametrize(
    ("text", "member"),
    [
        pytest.param("Hi, is my order shipped yet?", NO_ORDERS_UID, id="no orders"),
        pytest.param("Where is my order?", STRANGER_UID, id="not a customer"),
        pytest.param("Where is my order?", None, id="no external id"),
        pytest.param(SANDBOX_ORDER_TEXT, LINE_UID, id="not theirs"),
        pytest.param("Where is order O100003?", LINE_UID, id="another customer's"),
        pytest.param("Thanks for the quick reply!", LINE_UID, id="small talk"),
        pytest.param("ありがとうございます", LINE_UID, id="japanese small talk"),
        pytest.param("Can I change the delivery address of my order?", LINE_UID, id="a change"),
        pytest.param("Where can I order the serum?", LINE_UID, id="where to order"),
        pytest.param("どこで注文できますか？", LINE_UID, id="where to order, japanese"),
    ],
)
def test_anything_else_is_handed_over(warehouse, text, member) -> None:
    assert reply(turn(text, member), warehouse) == HANDOVER


@pytest.mark.parametrize(
    "text", ["I'd like to return an item", "返品したいのですが、\n手続きを教えてください。"]
)
def test_a_return_is_handed_over_to_the_returns_team_of_the_members_region(warehouse, text) -> None:
    routed = {"handover": {"team_id": 41, "connection": "default"}}
    assert reply(turn(text), warehouse) == routed


def test_a_return_of_a_member_the_warehouse_lacks_is_handed_over_unrouted(warehouse) -> None:
    assert reply(turn("I'd like a refund", member_id=999), warehouse) == HANDOVER
