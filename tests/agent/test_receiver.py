"""The agent endpoint: who may call it, what it keeps, and what it answers whatever the
reply function does."""

import json
import logging
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import pytest

from pipelines.agent.compaction import AGENT_MESSAGES, AGENT_REQUESTS, FILE_NAME, compact
from pipelines.agent.receiver import build_app
from pipelines.agent.reply import HANDOVER, Replier
from pipelines.lake import Lake
from pipelines.state.shared_store import StoreUnavailable
from tests.agent.conftest import AUTHORIZED, TOKEN, body_of, image, message, turn
from tests.servers import ROOT


def lake_rows(tmp_path, stream=AGENT_REQUESTS) -> list[dict]:
    lake = Lake(tmp_path / "lake")
    return [
        row
        for day in lake.days(stream, FILE_NAME)
        for row in lake.read_table(lake.path(stream, FILE_NAME, day)).to_pylist()
    ]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": "Bearer"},
    ],
    ids=["missing", "wrong", "other scheme", "longer", "empty"],
)
def test_no_or_a_wrong_token_gets_401_and_nothing_is_stored(serve_agent, headers):
    agent = serve_agent()
    answer = agent.send(turn(), headers)
    assert answer.status_code == 401
    assert agent.inbox.counts() == {"requests": 0, "answers": 0, "rejected": 0}


def test_both_versions_are_kept_and_answered(serve_agent, tmp_path):
    def reply(request, _warehouse):
        return f"v{request.version}: {len(request.messages)} message(s)"

    agent = serve_agent(reply)
    old = turn(70001, [message(1), message(2, "And when?")], version="1.0", prompt=None)
    new = turn(70002, [message(3), image(4)])
    assert agent.send(old).json() == {"reply_text": "v1.0: 2 message(s)"}
    assert agent.send(new).json() == {"reply_text": "v1.1: 2 message(s)"}

    compact(agent.inbox, Lake(tmp_path / "lake"))
    requests = {row["conversation_id"]: row for row in lake_rows(tmp_path)}
    assert {n: row["version"] for n, row in requests.items()} == {70001: "1.0", 70002: "1.1"}
    assert requests[70001]["prompt"] is None
    assert requests[70002]["prompt"] == "You are the shop's assistant."
    assert {row["outcome"] for row in requests.values()} == {"replied"}
    assert requests[70002]["external_member_id"] == "C-1001"
    messages = sorted(lake_rows(tmp_path, AGENT_MESSAGES), key=lambda m: m["message_uuid"])
    assert [(m["message_type"], m["text"], m["url"], m["mime_type"]) for m in messages] == [
        ("text", "Where is my order?", None, None),
        ("text", "And when?", None, None),
        ("text", "Where is my order?", None, None),
        ("image", "", "https://media.test/4.png", "image/png"),
    ]


def test_the_same_request_sent_again_is_kept_once_and_answered_alike(serve_agent, tmp_path):
    calls = []

    def reply(request, _warehouse):
        calls.append(request.conversation_id)
        time.sleep(0.2)  # the copies arrive while the first is being answered
        return f"reply {len(calls)}"

    agent = serve_agent(reply)
    document = turn()
    # The same turn reformatted (keys in another order, spaces) is the same request.
    reformatted = json.dumps(dict(reversed(document.items())), indent=2).encode()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(agent.send, [document] * 6 + [reformatted] * 2))
    assert {a.status_code for a in answers} == {200}
    assert len({a.json()["reply_text"] for a in answers}) == 1
    assert agent.send(document).json() == answers[0].json()
    counts = agent.inbox.counts()
    assert (counts["requests"], counts["answers"]) == (1, 1)

    compact(agent.inbox, Lake(tmp_path / "lake"))
    [row] = lake_rows(tmp_path)
    assert row["reply_text"] == answers[0].json()["reply_text"]


@pytest.mark.parametrize(
    "behaviour, outcome, error",
    [
        ("slow", "late", "no reply within 0.5 s"),
        ("raises", "failed", "LookupError: no such order"),
        ("returns a number", "not text", "the function returned int"),
    ],
)
def test_a_reply_function_that_fails_is_answered_with_the_handover_in_time(
    serve_agent, tmp_path, behaviour, outcome, error
):
    def reply(_request, _warehouse):
        if behaviour == "slow":
            time.sleep(3)
        if behaviour == "raises":
            raise LookupError("no such order")
        return 42

    agent = serve_agent(reply, deadline=0.5)
    started = time.monotonic()
    answer = agent.send(turn())
    took = time.monotonic() - started
    assert answer.status_code == 200 and answer.json() == {"reply_text": HANDOVER}
    assert took < 2.5  # the deadline, not the function, decides

    compact(agent.inbox, Lake(tmp_path / "lake"))
    [row] = lake_rows(tmp_path)
    assert (row["outcome"], row["error"], row["handover"]) == (outcome, error, True)
    assert row["latency_ms"] < 2500


def test_the_default_reply_hands_over(serve_agent, tmp_path):
    agent = serve_agent()
    assert agent.send(turn()).json() == {"reply_text": HANDOVER}
    compact(agent.inbox, Lake(tmp_path / "lake"))
    [row] = lake_rows(tmp_path)
    assert (row["outcome"], row["handover"], row["error"]) == ("default", True, None)


def _deep(levels: int) -> bytes:
    return b'{"conversation_id":' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"not json", "the body is not JSON"),
        (b"\xff\xfe{}", "the body is not JSON"),
        (b"[1, 2]", "the body is not a JSON object"),
        (_deep(100_000), "the body nests too deep to read"),
        (body_of(turn(version="2.0")), "version: Input should be '1.0' or '1.1'"),
        (body_of(turn(messages=[message(1, timestamp="yesterday")])), "messages.0.timestamp"),
        (body_of(turn(conversation_id=2**70)), "conversation_id"),
        (body_of({k: v for k, v in turn().items() if k != "org_uuid"}), "org_uuid: Field required"),
        (body_of(turn(messages=[image(1) | {"url": None}])), "image of version 1.1 without url"),
        (b'{"conversation_id": 1' + b"0" * 5000 + b"}", "the body could not be read"),
    ],
    ids=[
        "not json", "not utf-8", "a list", "deep", "version", "timestamp", "huge id",
        "no org", "image without url", "integer too long",
    ],
)  # fmt: skip
def test_a_body_that_is_not_a_request_gets_400_and_is_kept_with_its_reason(
    serve_agent, body, reason
):
    agent = serve_agent()
    answer = agent.send(body)
    assert answer.status_code == 400 and reason in answer.json()["error"]
    [kept] = agent.inbox.rejected()
    assert reason in kept["reason"] and kept["body"] == body
    assert agent.inbox.counts()["requests"] == 0


def test_a_body_over_the_bound_gets_413_and_nothing_is_stored(serve_agent):
    agent = serve_agent()
    big = turn(messages=[message(n, "x" * 1000) for n in range(1100)])
    assert agent.send(big).status_code == 413
    assert agent.inbox.counts() == {"requests": 0, "answers": 0, "rejected": 0}


class FailingInbox:
    uuid = "failing"
    location = "/nowhere/inbox.sqlite3"

    def store(self, *_):
        raise StoreUnavailable("the agent inbox at /nowhere/inbox.sqlite3 cannot be used: full")


def test_a_store_that_fails_gets_503_in_one_line_of_log(caplog):
    from starlette.testclient import TestClient

    replier = Replier(None, HANDOVER, 5.0, lambda: None)
    with caplog.at_level(logging.ERROR, "pipelines.agent"):
        answer = TestClient(build_app(FailingInbox(), TOKEN, replier)).post(
            "/agent/reply", content=body_of(turn()), headers=AUTHORIZED
        )
    assert answer.status_code == 503
    [record] = caplog.records
    assert "/nowhere/inbox.sqlite3" in record.getMessage() and record.exc_info is None


def test_the_token_is_in_no_log_and_no_file(serve_agent, tmp_path, caplog):
    agent = serve_agent(lambda *_: "fine")
    with caplog.at_level(logging.DEBUG):
        agent.send(turn(), {"Authorization": f"Bearer {TOKEN}-wrong"})
        agent.send(turn())
        agent.send(b"[]")
    compact(agent.inbox, Lake(tmp_path / "lake"))
    assert TOKEN not in caplog.text
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 3  # the inbox, its WAL and the lake's files
    assert not [p for p in files if TOKEN.encode() in p.read_bytes()]


def start(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.agent", "--port", "1"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("AGENT_")} | env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "env, code, said",
    [
        ({}, 2, "AGENT_TOKEN is not set"),
        ({"AGENT_TOKEN": TOKEN, "AGENT_REPLY": "demo.agent"}, 2, "is not `module:function`"),
        ({"AGENT_TOKEN": TOKEN, "AGENT_REPLY": "no_such_module:reply"}, 2, "cannot be loaded"),
        ({"AGENT_TOKEN": TOKEN, "AGENT_REPLY_SECONDS": "45"}, 2, "under 45"),
        ({"AGENT_TOKEN": TOKEN, "AGENT_REPLY_SECONDS": "soon"}, 2, "AGENT_REPLY_SECONDS='soon'"),
    ],
    ids=["no token", "no function", "no module", "deadline too long", "deadline not a number"],
)
def test_the_receiver_refuses_to_start_on_a_wrong_setting_in_one_line(tmp_path, env, code, said):
    finished = start(env | {"LAKE_ROOT": str(tmp_path / "lake")})
    assert finished.returncode == code
    assert said in finished.stderr and "Traceback" not in finished.stderr
    assert TOKEN not in finished.stderr + finished.stdout


def test_a_receiver_whose_inbox_cannot_be_made_says_so_in_one_line(tmp_path):
    (tmp_path / "taken").write_text("a file where the inbox's folder should be")
    inbox = tmp_path / "taken" / "inbox.sqlite3"
    finished = start({"AGENT_TOKEN": TOKEN, "AGENT_INBOX": str(inbox)})
    assert finished.returncode == 2
    [line] = finished.stderr.strip().splitlines()
    assert f"the agent inbox at {inbox} (AGENT_INBOX) cannot be used" in line
    assert TOKEN not in line


def test_the_example_call_in_the_docs_answers_200_as_written(serve_agent):
    """docs/agent.md's curl example, its body and headers as written."""
    guide = (ROOT / "docs" / "agent.md").read_text()
    (example,) = re.findall(r"```sh\n(curl .*?)\n```", guide, re.S)
    (url,) = re.findall(r"curl -s (\S+)", example)
    (body,) = re.findall(r"-d '(.*)'$", example, re.S)
    agent = serve_agent(lambda request, _warehouse: f"about {request.messages[0].text!r}")
    assert url.endswith(urlsplit(agent.url).path)
    headers = dict(re.findall(r'-H "([^:]+): ([^"]+)"', example))
    headers["Authorization"] = headers["Authorization"].replace("$AGENT_TOKEN", TOKEN)

    answer = httpx.post(agent.url, content=body.encode(), headers=headers, timeout=30)
    again = httpx.post(agent.url, content=body.encode(), headers=headers, timeout=30)

    assert answer.status_code == 200, answer.text
    assert answer.json() == again.json() == {"reply_text": "about 'Where is my order?'"}
    assert agent.inbox.counts() == {"requests": 1, "answers": 1, "rejected": 0}
