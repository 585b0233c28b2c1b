"""An example reply function for the AI agent callback: `AGENT_REPLY=demo.agent:reply`
(pipelines/agent/reply.py calls it with the turn and a read-only warehouse session). It
answers a member's question about an order's status from the demo shop
(`shop.orders` and `shop.customers`, demo/sql/shop/) and hands every other turn to a person.

The rules:
- An order-status question is a last member text that names an order and asks where it is:
  it holds a word of both lists of one `LANGUAGES` entry (English: "order" and one of
  status, shipped, delivered, arrive(d), track(ing), where is, where's, check; Japanese: 注文
  and one of 状況, 確認, 発送, 届, どこに, どこです). The answer is in that language.
- The member is the shop's customer whose `external_member_id` is the conversation
  member's: both are the member's id on the channel (a LINE uid, a page-scoped id), the
  shop's copied from the data hub's member export (demo/shop.py).
- The order is the one the text names by number (`ORDER_NUMBER`, e.g. O100123) among the
  customer's orders, else the customer's latest (placed last).
- The answer is one sentence: the order's status now (its newest version) and the day it
  took effect, in the shop's time zone.
- A member who asks to return something or for a refund (`RETURN_WORDS`: return, refund,
  返品, 返金) is handed over to the team `RETURNS_TEAM` of the member's region, as
  `conversation.members` and `conversation.teams` show them: a routed handover, which the
  next push assigns (docs/agent.md, "Routed handovers").
- Anything else is the handover: another question, a member the shop does not know, a
  customer without orders, a number that is not one of theirs.

The sandbox draws its conversation members apart from its data hub's, so no member of
`make demo`'s conversations is a shop customer: there, every turn is handed over, the
returns to their team.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from pipelines.agent.reply import HANDOVER, WarehouseSession
from pipelines.agent.request import AgentRequest

#: The demo shop's stores are in Taiwan (demo/shop.py, `STORES`): its days are Taipei's.
SHOP_TIME_ZONE = "Asia/Taipei"
#: An order number as a member writes it: letters, maybe a hyphen, then 4 digits or more.
ORDER_NUMBER = re.compile(r"[A-Z]*-?[0-9]{4,}", re.IGNORECASE)
#: The customer's orders, placed last first, each with its status now and since which day.
#: A member asking to send something back, or for their money back.
RETURN_WORDS = re.compile(r"\b(return|refund)|返品|返金", re.IGNORECASE)
#: The team returns go to, in each region (the sandbox's teams: sandbox/conversation/directory.py).
RETURNS_TEAM = "Customer Support"
#: The team of that name in the region the member was pulled from.
TEAM_SQL = """
SELECT teams.id, teams.connection
FROM conversation.teams
JOIN conversation.members ON members.connection = teams.connection
WHERE members.id = $member AND members.channel_id = $channel AND teams.name = $team
ORDER BY teams.connection, teams.id
LIMIT 1
"""
ORDERS_SQL = """
SELECT
    orders.id,
    -- Two states at one time (the shop's planted conflict): either.
    arg_max(orders.status, orders.timestamp) AS status,
    CAST(timezone($zone, max(orders.timestamp)) AS DATE) AS since
FROM shop.orders
JOIN shop.customers ON customers.customer_id = orders.source_platform_customer_id
WHERE customers.external_member_id = $member
GROUP BY orders.id
ORDER BY min(orders.timestamp) DESC, orders.id
"""


@dataclass(frozen=True)
class Order:
    id: str
    status: str
    since: date


@dataclass(frozen=True)
class Language:
    """How a language asks about an order, and how the answer tells its status."""

    order_word: re.Pattern[str]
    status_word: re.Pattern[str]
    sentence: str  # with {order} and {state}
    states: dict[str, str]  # per status, with {day}
    other_state: str  # a status `states` lacks, with {status} and {day}
    day: Callable[[date], str]

    def asks(self, text: str) -> bool:
        return bool(self.order_word.search(text) and self.status_word.search(text))

    def answer(self, order: Order) -> str:
        state = self.states.get(order.status, self.other_state)
        state = state.format(status=order.status, day=self.day(order.since))
        return self.sentence.format(order=order.id, state=state)


ENGLISH = Language(
    order_word=re.compile(r"\border", re.IGNORECASE),
    # Not "delivery" nor a bare "where": "change the delivery address of my order" and
    # "where can I order" ask no status.
    status_word=re.compile(
        r"\b(status|shipped|delivered|arrived?|track(ing)?|where is|where's|check)\b",
        re.IGNORECASE,
    ),
    sentence="Your order {order} {state}.",
    states={
        "created": "was placed on {day} and awaits payment",
        "confirmed": "was confirmed on {day}",
        "processing": "has been in preparation since {day}",
        "completed": "was completed on {day}",
        "cancelled": "was cancelled on {day}",
        "returned": "was returned on {day}",
    },
    other_state='has been "{status}" since {day}',
    day=lambda day: f"{day.day} {day:%B %Y}",
)
JAPANESE = Language(
    order_word=re.compile("注文"),
    # Not 配送 (delivery) nor どこで (where to order), as in English.
    status_word=re.compile("状況|確認|発送|届|どこに|どこです"),
    sentence="ご注文{order}は{state}。",
    states={
        "created": "{day}に承り、お支払いをお待ちしています",
        "confirmed": "{day}に確定しました",
        "processing": "{day}から準備中です",
        "completed": "{day}に完了しました",
        "cancelled": "{day}にキャンセルされました",
        "returned": "{day}に返品されました",
    },
    other_state="{day}から「{status}」です",
    day=lambda day: f"{day.year}年{day.month}月{day.day}日",
)
LANGUAGES = (ENGLISH, JAPANESE)


def reply(request: AgentRequest, warehouse: WarehouseSession) -> str | dict:
    """The status of the order a known member asks about, a return to its team, else the
    handover."""
    text = request.last_text
    member = request.member
    if member is not None and RETURN_WORDS.search(text):
        return returns_team(warehouse, member.member_id, member.channel_id)
    language = next((language for language in LANGUAGES if language.asks(text)), None)
    if language is None or member is None or not member.external_member_id:
        return HANDOVER
    order = asked_order(warehouse, member.external_member_id, text)
    return HANDOVER if order is None else language.answer(order)


def returns_team(warehouse: WarehouseSession, member_id: int, channel_id: int) -> str | dict:
    """The handover to `RETURNS_TEAM` of the member's region; the plain handover when the
    warehouse knows neither."""
    parameters = {"member": member_id, "channel": channel_id, "team": RETURNS_TEAM}
    found = warehouse.execute(TEAM_SQL, parameters).fetchall()
    if not found:
        return HANDOVER
    [(team_id, connection)] = found
    return {"handover": {"team_id": team_id, "connection": connection}}


def asked_order(warehouse: WarehouseSession, external_member_id: str, text: str) -> Order | None:
    """The customer's order that `text` names by number, else their latest; None when the
    text names none of theirs or they have no order."""
    rows = warehouse.execute(ORDERS_SQL, {"zone": SHOP_TIME_ZONE, "member": external_member_id})
    orders = [Order(*row) for row in rows.fetchall()]
    named = {number.upper() for number in ORDER_NUMBER.findall(text)}
    if named:
        # A number that is not one of theirs is a question for a person, not their latest.
        orders = [order for order in orders if order.id.upper() in named]
    return orders[0] if orders else None
