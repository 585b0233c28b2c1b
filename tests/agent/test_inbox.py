"""The agent inbox, in a SQLite file or the deployment's Postgres, and its compaction into
the lake: every request once, with its answer, whenever that came."""

import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from pipelines.agent.compaction import AGENT_MESSAGES, compact, stale_days
from pipelines.agent.inbox import AgentInbox, open_agent_inbox
from pipelines.agent.reply import Answer
from pipelines.agent.request import request_key
from pipelines.inbox.compaction import ForeignInbox
from pipelines.lake import Lake
from tests.agent.conftest import AUTHORIZED, TOKEN, body_of, message, turn
from tests.agent.test_receiver import lake_rows

NOON = datetime(2026, 11, 27, 12, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def inbox(request, tmp_path):
    if request.param == "sqlite":
        opened = AgentInbox(tmp_path / "agent.sqlite3")
    else:
        env = {"SYNC_STORE": request.getfixturevalue("shared_store")}
        opened = open_agent_inbox(str(tmp_path / "lake"), env)
    yield opened
    opened.close()


def store(inbox, document: dict, when: datetime = NOON) -> str:
    key = request_key(document)
    inbox.store(key, when, body_of(document))
    return key


def test_requests_are_stored_once_and_answered_once_first_answer_kept(inbox):
    document = turn()
    key = store(inbox, document)
    assert not inbox.store(key, NOON + timedelta(minutes=1), body_of(document))
    assert inbox.answer_of(key) is None
    first = inbox.store_answer(key, Answer("yes", "replied"), NOON + timedelta(seconds=1))
    second = inbox.store_answer(key, Answer("no", "replied"), NOON + timedelta(seconds=2))
    assert first == second and second.answer.reply_text == "yes"
    assert inbox.counts() == {"requests": 1, "answers": 1, "rejected": 0}
    inbox.reject(NOON, "the body is not JSON", b"\x00oops")
    assert [(r["reason"], r["body"]) for r in inbox.rejected()] == [
        ("the body is not JSON", b"\x00oops")
    ]


def test_a_reply_holding_a_nul_character_is_kept(inbox):
    key = store(inbox, turn())
    stored = inbox.store_answer(key, Answer("a\x00b", "replied", "e\x00"), NOON)
    assert (stored.answer.reply_text, stored.answer.error) == ("a\x00b", "e\x00")


def test_the_lake_holds_every_request_once_and_a_late_answer_lands_on_the_next_run(inbox, tmp_path):
    lake = Lake(tmp_path / "lake")
    yesterday, today = NOON - timedelta(days=1), NOON
    keys = [store(inbox, turn(n), when) for n, when in enumerate([yesterday, today, today], 1)]
    for key in keys[:2]:
        inbox.store_answer(key, Answer("ok", "replied"), NOON + timedelta(seconds=1))

    done = compact(inbox, lake)
    assert (len(done.days), done.requests, done.messages) == (2, 3, 3)
    rows = {row["request_key"]: row for row in lake_rows(tmp_path)}
    assert set(rows) == set(keys)
    assert rows[keys[2]]["answered_at"] is None and rows[keys[2]]["outcome"] is None
    assert compact(inbox, lake).days == []  # nothing new: nothing rewritten

    inbox.store_answer(keys[2], Answer("later", "replied"), NOON + timedelta(minutes=5))
    assert list(stale_days(inbox, lake)) == [today.date()]
    compact(inbox, lake)
    rows = {row["request_key"]: row for row in lake_rows(tmp_path)}
    assert rows[keys[2]]["reply_text"] == "later"
    assert rows[keys[2]]["latency_ms"] == 5 * 60 * 1000
    assert len(lake_rows(tmp_path, AGENT_MESSAGES)) == 3


def test_text_the_lake_cannot_hold_is_kept_escaped(inbox, tmp_path):
    document = turn(messages=[message(1, "order \ud800 please")])
    store(inbox, document)
    compact(inbox, Lake(tmp_path / "lake"))
    [row] = lake_rows(tmp_path, AGENT_MESSAGES)
    assert row["text"] == "order \\ud800 please"


def test_a_lake_compacted_from_another_inbox_is_refused(tmp_path):
    lake = Lake(tmp_path / "lake")
    with AgentInbox(tmp_path / "first.sqlite3") as first:
        store(first, turn())
        compact(first, lake)
    with AgentInbox(tmp_path / "second.sqlite3") as second:
        store(second, turn(2))
        with pytest.raises(ForeignInbox, match="AGENT_INBOX"):
            compact(second, lake)


def test_requests_answered_200_survive_a_kill_mid_burst_and_reach_the_lake_once(
    spawn_agent, tmp_path, monkeypatch
):
    """500 turns from 20 senders at once; the receiver is killed (SIGKILL) halfway. Every turn
    answered 200 is in the lake once, with the reply it was given and, for the half its
    function routes to a team, that team, after a restart answers the rest (the service
    sends again what got no answer)."""
    monkeypatch.delenv("AGENT_INBOX", raising=False)  # the default: beside the lake
    env = {
        "AGENT_TOKEN": TOKEN,
        "LAKE_ROOT": str(tmp_path / "lake"),
        "AGENT_REPLY": "tests.agent.replies:route_even_conversations",
    }
    first = spawn_agent(env)
    documents = [turn(100_000 + n, [message(n)]) for n in range(500)]
    answered: dict[str, str] = {}
    lock = threading.Lock()

    # One client for the burst, as a service keeps its connections: a client made per
    # request costs more CPU than the receiver spends answering it.
    senders = httpx.Client(timeout=30, limits=httpx.Limits(max_connections=20))

    def send(document: dict, url: str) -> None:
        try:
            response = senders.post(url, content=body_of(document), headers=AUTHORIZED)
        except httpx.TransportError:
            return
        if response.status_code == 200:
            with lock:
                answered[request_key(document)] = response.json()["reply_text"]
                if len(answered) == 250:
                    first.process.send_signal(signal.SIGKILL)

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(lambda d: send(d, first.url), documents))
    assert first.process.wait(timeout=10) == -signal.SIGKILL
    assert 250 <= len(answered) < 500

    second = spawn_agent(env)
    missing = [d for d in documents if request_key(d) not in answered]
    with ThreadPoolExecutor(20) as pool:
        list(pool.map(lambda d: send(d, second.url), missing))
    assert len(answered) == 500
    senders.close()
    second.process.terminate()
    second.process.wait(timeout=10)

    with AgentInbox(tmp_path / "agent" / "inbox.sqlite3") as stored:
        compact(stored, Lake(tmp_path / "lake"))
    rows = lake_rows(tmp_path)
    assert sorted(row["request_key"] for row in rows) == sorted(answered)
    assert {row["request_key"]: row["reply_text"] for row in rows} == answered
    routed = {row["conversation_id"]: row["handover_team_id"] for row in rows}
    assert routed == {c: None if c % 2 else c % 7 + 1 for c in routed}
    for process in (first, second):
        assert TOKEN not in process.log.read_text()
