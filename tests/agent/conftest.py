"""Agent fixtures: turns as the conversation service sends them, a receiver served by uvicorn
in a thread (its inbox and reply function the test's), and receivers as child processes."""

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from pipelines.agent.inbox import AgentInbox
from pipelines.agent.receiver import AGENT_PATH, build_app
from pipelines.agent.reply import HANDOVER, Replier, ReplyFunction, WarehouseSession
from tests.pipelines.conftest import start_sandbox, sync_env  # noqa: F401
from tests.servers import ServerProcess, free_port, spawner

TOKEN = "agent-token-7d41c0e9"
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}


def message(n: int, text: str = "Where is my order?", **fields) -> dict:
    return {
        "message_type": "text",
        "message_uuid": f"00000000-0000-4000-8000-{n:012d}",
        "sender_id": 900 + n,
        "sender_type": "member",
        "text": text,
        "timestamp": f"2026-11-27T09:{n % 60:02d}:00+00:00",
    } | fields


def image(n: int) -> dict:
    return message(
        n, "", message_type="image", url=f"https://media.test/{n}.png", mime_type="image/png"
    )


def turn(conversation_id: int = 70001, messages: list[dict] | None = None, **fields) -> dict:
    """An AI agent request as the service sends it (version 1.1 unless `version=`)."""
    return {
        "conversation_id": conversation_id,
        "messages": messages if messages is not None else [message(1)],
        "org_uuid": "5b1c9a52-4e2f-4b8e-9a51-0c7d2f3e8a11",
        "participants": {
            "members": [
                {
                    "channel_id": 11,
                    "channel_member_id": "U-line-1",
                    "channel_type": "line",
                    "external_member_id": "C-1001",
                    "member_id": 5001,
                }
            ]
        },
        "prompt": "You are the shop's assistant.",
        "version": "1.1",
    } | fields


def body_of(document: dict) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass
class LiveAgent:
    url: str
    inbox: AgentInbox

    def send(self, document: dict | bytes, headers: dict | None = None) -> httpx.Response:
        content = document if isinstance(document, bytes) else body_of(document)
        return httpx.post(
            self.url,
            content=content,
            headers=AUTHORIZED if headers is None else headers,
            timeout=30,
        )


@pytest.fixture
def serve_agent(tmp_path) -> Iterator[Callable[..., LiveAgent]]:
    """`serve_agent(function=None, deadline=5.0)`: a receiver on a free port, its inbox
    where the default would put it beside `tmp_path/lake`."""
    servers = []

    def serve(function: ReplyFunction | None = None, deadline: float = 5.0) -> LiveAgent:
        inbox = AgentInbox(tmp_path / "agent" / "inbox.sqlite3")
        session = lambda: WarehouseSession(str(tmp_path / "lake"), tmp_path / "wh.duckdb")  # noqa: E731
        replier = Replier(function, HANDOVER, deadline, session)
        port = free_port()
        config = uvicorn.Config(
            build_app(inbox, TOKEN, replier), host="127.0.0.1", port=port, log_level="warning"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread, inbox, replier))
        deadline_at = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline_at or not thread.is_alive():
                raise RuntimeError("the agent receiver did not start")
            time.sleep(0.02)
        return LiveAgent(f"http://127.0.0.1:{port}{AGENT_PATH}", inbox)

    yield serve
    for server, thread, inbox, replier in servers:
        server.should_exit = True
        thread.join(timeout=10)
        replier.close()
        inbox.close()


@pytest.fixture
def spawn_agent(tmp_path) -> Iterator[Callable[[dict[str, str]], ServerProcess]]:
    """Start `python -m pipelines.agent` as a user would; every one is stopped at the end."""
    with spawner("pipelines.agent", AGENT_PATH, tmp_path) as spawn:
        yield spawn
