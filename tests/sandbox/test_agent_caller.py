"""The conversation service calling the brand's AI agent (sandbox/conversation/agent.py): a
turn per live member message, sent to a small agent served by uvicorn on a free port, which
records what it gets and answers as each test tells it.

The clock is live, anchored at ANCHOR, and advanced at once: at one arrival per minute, twelve
hours bring 720 messages per region, whose turns are compared with a full-year backup CSV,
and the wall clock brings no other during a test.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from sandbox.__main__ import parse_args
from sandbox.app import SandboxApp, build_app
from sandbox.config import AGENT_PROMPT, SandboxConfig
from sandbox.conversation.agent import HANDOVER, TURN_MESSAGES
from tests.conftest import ANCHOR
from tests.constants import APIKEY

TOKEN = "agent-token-for-tests"
BASES = {"default": "/conversation", "jp": "/conversation-jp"}
HOUR = 3600
# (status, seconds before answering) for a request body, given how often it came before.
Answer = Callable[[dict, int], tuple[int, float]]


def replies(body: dict, seen: int) -> tuple[int, float]:
    return 200, 0.0


def reply_text(body: dict) -> str:
    """A quarter of the members, by their message's uuid, are handed to a person."""
    last = body["messages"][-1]["message_uuid"]
    return f"Noted. {HANDOVER}" if last[-1] in "0123" else f"Thanks for {last}!"


@dataclass
class Agent:
    """The brand's agent: every request it got, in order of arrival, and its answers."""

    url: str
    answer: Answer
    requests: list[tuple[dict, bytes]] = field(default_factory=list)  # headers, body
    answered: list[bytes] = field(default_factory=list)  # bodies, in order of answering

    async def reply(self, request: Request) -> JSONResponse:
        content = await request.body()
        seen = sum(body == content for _, body in self.requests)
        self.requests.append((dict(request.headers), content))
        body = json.loads(content)
        status, delay = self.answer(body, seen)
        await asyncio.sleep(delay)
        self.answered.append(content)
        if status != 200:
            return JSONResponse({"error": "no"}, status)
        return JSONResponse({"reply_text": reply_text(body)})

    def bodies(self) -> list[dict]:
        return [json.loads(body) for _, body in self.requests]


@contextmanager
def serving(answer: Answer = replies) -> Iterator[Agent]:
    """An agent on a free port at `/agent/reply`, stopped on exit."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    agent = Agent(f"http://127.0.0.1:{listening.getsockname()[1]}/agent/reply", answer)
    app = Starlette(routes=[Route("/agent/reply", agent.reply, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the agent did not start"
        time.sleep(0.01)
    try:
        yield agent
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listening.close()


@contextmanager
def sandbox(agent_url: str | None, **overrides) -> Iterator[tuple[SandboxApp, TestClient]]:
    """A live sandbox (the clock moves) calling `agent_url`; its agent caller closed on exit."""
    settings = {
        "now": ANCHOR,
        "arrivals_per_minute": 1.0,
        "rate_limits": False,
        "task_phase_seconds": 0.05,
        "agent_url": agent_url,
        "agent_token": TOKEN if agent_url else None,
        "agent_retry_delay": 0.1,
    } | overrides
    app = build_app(SandboxConfig(**settings))
    try:
        with TestClient(app, base_url="http://sandbox") as http:
            yield app, http
    finally:
        if app.agent is not None:
            app.agent.close()
        app.sandbox.webhooks.close()


def advance(http: TestClient, seconds: float) -> None:
    assert http.post("/_sandbox/clock/advance", params={"seconds": seconds}).status_code == 200


def agent_calls(http: TestClient, wait: float = 20) -> list[dict]:
    answer = http.get("/_sandbox/agent", params={"wait": wait}).json()
    assert answer["idle"]
    return answer["calls"]


def backup(http: TestClient, region: str) -> list[dict]:
    """The region's message backup CSV of the year up to now."""
    base = BASES[region]
    window = {
        "started_at": (ANCHOR - timedelta(days=366)).isoformat(),
        "ended_at": (ANCHOR + timedelta(days=1)).isoformat(),
    }
    created = http.post(f"{base}/v1/backups/messages", headers=APIKEY, json=window)
    backup_id = created.json()["backup_id"]
    deadline = time.monotonic() + 10
    while http.get(f"{base}/v1/backups/{backup_id}", headers=APIKEY).json()["state"] != "completed":
        assert time.monotonic() < deadline, "the backup did not complete"
        time.sleep(0.02)
    download = http.get(f"{base}/v1/backups/{backup_id}/download", headers=APIKEY)
    return list(csv.DictReader(io.StringIO(download.content.decode("utf-8"), newline="")))


def as_sent(row: dict) -> dict:
    """A backup CSV row as a message object of the request (spec section 2)."""
    message = {
        "message_type": row["message_type"],
        "message_uuid": row["message_uuid"],
        "sender_id": int(row["sender_id"]),
        "sender_type": row["sender_type"],
        "text": row["text"],
        "timestamp": row["timestamp"],
    }
    if row["message_type"] == "image":
        message |= {"url": row["url"], "mime_type": row["mime_type"]}
    return message


@dataclass
class Run:
    """Twelve hours of a live sandbox, both regions, an agent answering every turn."""

    calls: dict[str, list[dict]]  # the sandbox's records, per region
    headers: list[dict]  # of every request the agent got
    handovers: dict[str, int]  # replies the agent gave with HANDOVER, per region
    rows: dict[str, list[dict]]  # the backup CSV, per region
    truth: dict[str, dict]  # /_sandbox/truth conversation.<region>
    members: dict[str, dict[int, dict]]  # per region, by member id: the first 30 members


@pytest.fixture(scope="module")
def run() -> Run:
    with serving() as agent, sandbox(agent.url) as (_, http):
        advance(http, 12 * HOUR)
        calls = defaultdict(list)
        for call in agent_calls(http):
            calls[call["region"]].append(call)
        truth = http.get("/_sandbox/truth").json()["conversation"]
        regions = {made[0]["request"]["org_uuid"]: region for region, made in calls.items()}
        handovers = defaultdict(int)
        for body in agent.bodies():
            handovers[regions[body["org_uuid"]]] += HANDOVER in reply_text(body)
        members = {region: members_of(http, region, made) for region, made in calls.items()}
        return Run(
            calls=dict(calls),
            headers=[headers for headers, _ in agent.requests],
            handovers=dict(handovers),
            rows={region: backup(http, region) for region in BASES},
            truth=truth,
            members=members,
        )


def members_of(http: TestClient, region: str, calls: list[dict], count: int = 30) -> dict:
    """The first `count` members of the calls, as get_member_by_id shows them."""
    found: dict[int, dict] = {}
    for call in calls:
        member = call["request"]["participants"]["members"][0]
        if len(found) == count:
            break
        if member["member_id"] not in found:
            path = f"/v1/channels/{member['channel_id']}/members/{member['member_id']}"
            found[member["member_id"]] = http.get(BASES[region] + path, headers=APIKEY).json()
    return found


def live_member_rows(run: Run, region: str) -> list[dict]:
    anchor = ANCHOR.isoformat()
    return [r for r in run.rows[region] if r["timestamp"] > anchor and r["sender_type"] == "member"]


# -- what a turn carries ----------------------------------------------------------------


def test_every_turn_is_json_with_the_bearer_token(run):
    assert len(run.headers) == sum(len(calls) for calls in run.calls.values()) > 300
    assert {h["authorization"] for h in run.headers} == {f"Bearer {TOKEN}"}
    assert {h["content-type"] for h in run.headers} == {"application/json"}


def test_each_region_sends_its_version_prompt_and_organization(run):
    default, jp = ([call["request"] for call in run.calls[region]] for region in ("default", "jp"))
    assert {body["version"] for body in default} == {"1.1"}
    assert {body["version"] for body in jp} == {"1.0"}
    assert {body["prompt"] for body in default} == {AGENT_PROMPT}
    assert not any("prompt" in body for body in jp)
    orgs = [{body["org_uuid"] for body in bodies} for bodies in (default, jp)]
    assert all(len(org) == 1 for org in orgs) and orgs[0] != orgs[1]


def test_one_turn_per_live_member_message_that_its_agent_can_read(run):
    for region, readable in (("default", {"text", "image"}), ("jp", {"text"})):
        written = [r for r in live_member_rows(run, region) if r["message_type"] in readable]
        last = [call["request"]["messages"][-1] for call in run.calls[region]]
        assert [m["message_uuid"] for m in last] == [r["message_uuid"] for r in written]
        assert {m["sender_type"] for m in last} == {"member"}
    assert any(r["message_type"] == "image" for r in live_member_rows(run, "jp"))


def test_a_turn_holds_its_conversation_as_the_backup_holds_it(run):
    """Oldest first, up to and including the new message, the last 20 the agent can read."""
    longest = 0
    for region, calls in run.calls.items():
        by_conversation = defaultdict(list)
        for row in run.rows[region]:
            if region == "default" or row["message_type"] == "text":
                by_conversation[int(row["conversation_id"])].append(row)
        for call in calls:
            body = call["request"]
            rows = by_conversation[body["conversation_id"]]
            uuids = [row["message_uuid"] for row in rows]
            upto = rows[: uuids.index(body["messages"][-1]["message_uuid"]) + 1]
            assert body["messages"] == [as_sent(row) for row in upto[-TURN_MESSAGES:]]
            longest = max(longest, len(upto))
    assert longest > TURN_MESSAGES  # the limit was met


def test_a_turn_reaches_back_to_the_start_of_a_conversation_days_long():
    """No gap over a day splits a conversation, so one may run for days: a turn's messages
    start where it starts (history is frozen; `turn` is what a live message would send)."""
    spans = []
    with sandbox("http://127.0.0.1:9/agent/reply", frozen=True) as (app, http):
        for region, readable in (("default", {"text", "image"}), ("jp", {"text"})):
            conversations = defaultdict(list)
            for row in backup(http, region):
                if row["message_type"] in readable:
                    conversations[row["conversation_id"]].append(row)
            rows = max(conversations.values(), key=days_spanned)
            service = app.services["conversation", region]
            uuids = service.messages.uuids(0, service.messages.table.size)
            body = service.agent_turns.turn(uuids.index(rows[-1]["message_uuid"]))
            assert body["messages"] == [as_sent(row) for row in rows[-TURN_MESSAGES:]]
            spans.append(days_spanned(rows))
    assert max(spans) > 2  # beyond the first window searched


def days_spanned(rows: list[dict]) -> float:
    first, last = (datetime.fromisoformat(rows[i]["timestamp"]) for i in (0, -1))
    return (last - first) / timedelta(days=1)


def test_participants_are_the_conversations_member(run):
    """Channel and member of the backup's row; platform id and channel type as
    get_member_by_id shows them (the first 30 members of each region looked up)."""
    looked_up = 0
    for region, calls in run.calls.items():
        rows = {row["message_uuid"]: row for row in run.rows[region]}
        for call in calls:
            (member,) = call["request"]["participants"]["members"]
            row = rows[call["request"]["messages"][-1]["message_uuid"]]
            assert (member["channel_id"], member["member_id"]) == (
                int(row["channel_id"]),
                int(row["member_id"]),
            )
            found = run.members[region].get(member["member_id"])
            if found is not None:
                looked_up += 1
                assert member["channel_type"] == found["type"]
                assert member["external_member_id"] == member["channel_member_id"]
                assert member["external_member_id"] == found["external_member_id"]
    assert looked_up >= 60


def test_images_reach_1_1_agents_only_with_url_and_mime_type(run):
    sent = {
        region: [m for call in calls for m in call["request"]["messages"]]
        for region, calls in run.calls.items()
    }
    images = [m for m in sent["default"] if m["message_type"] == "image"]
    assert images and all(
        m["text"] == "" and m["url"].startswith("https://") and m["mime_type"].startswith("image/")
        for m in images
    )
    assert not any("url" in m or "mime_type" in m for m in sent["default"] if m not in images)
    assert {m["message_type"] for m in sent["jp"]} == {"text"}
    assert not any("url" in m or "mime_type" in m for m in sent["jp"])


def test_the_truth_counts_turns_answers_and_handovers(run):
    for region, calls in run.calls.items():
        assert all(call["attempts"] == [200] and call["answered"] for call in calls)
        assert sum(call["handover"] for call in calls) == run.handovers[region] > 0
        assert {k: v for k, v in run.truth[region].items() if k.startswith("agent_")} == {
            "agent_calls": len(calls),
            "agent_answered": len(calls),
            "agent_handovers": run.handovers[region],
        }


# -- how calls are made -----------------------------------------------------------------


def fail_once(body: dict, seen: int) -> tuple[int, float]:
    return (500 if seen == 0 else 200), 0.0


def refuse(body: dict, seen: int) -> tuple[int, float]:
    return 404, 0.0


@pytest.mark.parametrize(
    ("answer", "attempts", "answered"),
    [(fail_once, [500, 200], True), (refuse, [404], False)],
    ids=["5xx-retried", "4xx-final"],
)
def test_a_5xx_is_retried_with_the_same_body_and_a_4xx_is_final(answer, attempts, answered):
    with serving(answer) as agent, sandbox(agent.url) as (_, http):
        advance(http, HOUR / 2)
        calls = agent_calls(http)
    assert calls and all(
        (call["attempts"], call["answered"]) == (attempts, answered) for call in calls
    )
    sent = [body for _, body in agent.requests]
    assert sorted(sent) == sorted(body for body in set(sent) for _ in attempts)
    assert len(set(sent)) == len(calls)


def test_an_agent_nobody_answers_for_is_tried_three_times():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/agent/reply"
    with sandbox(url) as (_, http):
        advance(http, HOUR / 2)
        calls = agent_calls(http)
        truth = http.get("/_sandbox/truth").json()["conversation"]["default"]
    assert calls and all(call["attempts"] == ["ConnectError"] * 3 for call in calls)
    assert truth["agent_calls"] > 0 == truth["agent_answered"]


def test_a_slow_agent_delays_its_own_turn_only():
    """The first turn is answered after 2 s; the others, and the API, meanwhile."""

    def first_slow(body: dict, seen: int) -> tuple[int, float]:
        return 200, (2.0 if len(agent.requests) == 1 else 0.0)

    with serving(first_slow) as agent, sandbox(agent.url) as (_, http):
        advance(http, HOUR)
        started = time.monotonic()
        channels = http.get("/conversation/v1/channels", headers=APIKEY)
        assert channels.status_code == 200 and time.monotonic() - started < 0.5
        assert not http.get("/_sandbox/agent").json()["idle"]
        calls = agent_calls(http)
    slow_body = agent.requests[0][1]
    (slow,) = [call for call in calls if call["request"] == json.loads(slow_body)]
    others = [call["seconds"] for call in calls if call is not slow]
    assert slow["seconds"] >= 2.0 and len(others) > 20
    assert max(others) < 1.0  # none waited for the slow one
    assert agent.answered[-1] == slow_body  # answered last, though sent first


def test_a_live_clock_calls_the_agent_unasked():
    """No request reaches the sandbox: its clock alone makes members write and be answered."""
    with serving() as agent, sandbox(agent.url, arrivals_per_minute=120.0) as (app, _):
        deadline = time.monotonic() + 5
        while not agent.answered:
            assert time.monotonic() < deadline, "no turn was sent"
            time.sleep(0.05)
        assert app.agent.calls


@pytest.mark.parametrize(
    ("with_agent", "frozen"), [(False, False), (True, True)], ids=["no-agent", "frozen"]
)
def test_without_an_agent_or_a_moving_clock_nothing_is_called(with_agent, frozen):
    before = set(threading.enumerate())  # other tests' live sandboxes may tick meanwhile
    with serving() as agent:
        url = agent.url if with_agent else None
        with sandbox(url, frozen=frozen) as (app, http):
            advance(http, HOUR)
            answer = http.get("/_sandbox/agent", params={"wait": 1}).json()
            truth = http.get("/_sandbox/truth").json()["conversation"]["default"]
            names = {thread.name for thread in set(threading.enumerate()) - before}
    assert answer == {"idle": True, "calls": []} and agent.requests == []
    assert (app.agent is not None) == with_agent and "agent-clock" not in names
    expected = {"agent_calls": 0, "agent_answered": 0, "agent_handovers": 0} if with_agent else {}
    assert {k: v for k, v in truth.items() if k.startswith("agent_")} == expected


def test_a_frozen_sandbox_replays_the_turns_of_its_last_member_messages():
    with serving() as agent, sandbox(agent.url, frozen=True) as (app, http):
        sent = {
            region: http.post(f"/_sandbox/conversation/{region}/agent/replay", params={"count": 5})
            for region in ("default", "jp")
        }
        calls = agent_calls(http)
    assert {region: answer.json()["sent"] for region, answer in sent.items()} == {
        region: sum(call["region"] == region for call in calls) for region in ("default", "jp")
    }
    assert sent["default"].json()["sent"] == 5 and 0 < sent["jp"].json()["sent"] <= 5
    assert all(call["answered"] for call in calls) and len(agent.requests) == len(calls)
    for call in calls:
        [member] = call["request"]["participants"]["members"]
        assert call["request"]["messages"][-1]["sender_type"] == "member"
        assert call["request"]["messages"][-1]["sender_id"] == member["member_id"]


def test_a_replay_without_an_agent_is_refused():
    with sandbox(None, frozen=True) as (_, http):
        answer = http.post("/_sandbox/conversation/default/agent/replay")
    assert answer.status_code == 409 and "--agent-url" in answer.text


# -- configuration ----------------------------------------------------------------------


def test_the_agent_url_and_token_go_together(monkeypatch, capsys):
    monkeypatch.delenv("AGENT_TOKEN", raising=False)
    with pytest.raises(SystemExit):
        parse_args(["--agent-url", "http://127.0.0.1:9/agent/reply"])
    assert "--agent-url and a token" in capsys.readouterr().err
    assert parse_args(["--agent-url", "http://a/r", "--agent-token", "t"]).agent_token == "t"
    monkeypatch.setenv("AGENT_TOKEN", TOKEN)
    assert parse_args(["--agent-url", "http://a/r"]).agent_token == TOKEN
    assert TOKEN not in repr(SandboxConfig(agent_url="http://a/r", agent_token=TOKEN))
    with pytest.raises(ValueError, match="go together"):
        build_app(SandboxConfig(agent_url="http://a/r"))
