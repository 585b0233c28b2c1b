"""Webhook fixtures: the live sandbox of the pipeline tests, a receiver served by uvicorn in a
thread (its inbox reachable from the test), and receivers as child processes (to be killed)."""

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn

from pipelines.webhooks.inbox import Inbox
from pipelines.webhooks.receiver import WEBHOOK_PATH, build_app
from tests.pipelines.conftest import frozen_sandbox, start_sandbox, sync_env  # noqa: F401
from tests.servers import ROOT, ServerProcess, free_port, spawner  # noqa: F401

SECRET = "whsec-test-3f1c9a"


def envelope(event: str = "message.open", **fields) -> bytes:
    """A body as the hub sends it (compact JSON, UTF-8); `fields` replace envelope fields."""
    document = {
        "event": event,
        "timestamp": "2026-11-01T12:00:00+00:00",
        "source": "maac",
        "data": {
            "campaign_id": 1,
            "campaign_type": "broadcast",
            "campaign_name": "Launch",
            "customer_id": None,
            "line_uid": "U1",
        },
    } | fields
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def signed(body: bytes, key: str, secret: str = SECRET) -> dict[str, str]:
    """The headers of a delivery: signature, idempotency key, user agent."""
    return {
        "Content-Type": "application/json",
        "Service-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
        "Service-Idempotency-Key": key,
        "User-Agent": "DataHub-Webhooks/1.0 (test)",
    }


@dataclass
class LiveReceiver:
    url: str  # the webhook endpoint
    inbox: Inbox

    def deliver(self, body: bytes, key: str, **headers) -> httpx.Response:
        return httpx.post(self.url, content=body, headers=signed(body, key) | headers, timeout=30)


@pytest.fixture
def receiver(tmp_path) -> Iterator[LiveReceiver]:
    """A receiver on a free port, its inbox where the default would put it beside
    `tmp_path/lake`."""
    inbox = Inbox(tmp_path / "webhooks" / "inbox.sqlite3")
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(inbox, SECRET), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the receiver did not start")
        time.sleep(0.02)
    yield LiveReceiver(f"http://127.0.0.1:{port}{WEBHOOK_PATH}", inbox)
    server.should_exit = True
    thread.join(timeout=10)
    inbox.close()


@pytest.fixture
def spawn_receiver(tmp_path) -> Iterator[Callable[[dict[str, str]], ServerProcess]]:
    """Start `python -m pipelines.webhooks` as a user would; every one is stopped at the end."""
    with spawner("pipelines.webhooks", WEBHOOK_PATH, tmp_path) as spawn:
        yield spawn
