"""Alert fixtures: a webhook receiver of the test's own (an `http.server` thread on
127.0.0.1 that keeps every POST body), `ALERT_URLS` pointing at it through apprise's
`json://`, with a recognizable token in the URL's path and query and in the services' key
variables, a Dagster instance of the test's own, and everything the test's process said."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest

#: In the alert URL and in every key: it must appear in no message and no log line.
TOKEN = "CANARY7f3e9a21"
KEY_VARIABLES = ("COMMENT_AUTOMATION_API_KEY", "CONVERSATION_API_KEY", "DATAHUB_API_KEY")


@dataclass
class Receiver:
    """What the webhook destination received, and the status it answers with."""

    port: int
    bodies: list[dict] = field(default_factory=list)
    status: int = 200

    @property
    def url(self) -> str:
        """An apprise URL to this receiver, the token in its path and its query."""
        return f"json://127.0.0.1:{self.port}/hooks/{TOKEN}?token={TOKEN}"

    def texts(self) -> list[str]:
        return [json.dumps(body) for body in self.bodies]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    kept = Receiver(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            kept.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
            self.send_response(kept.status)
            self.end_headers()

        def log_message(self, *args) -> None:  # the test's output stays its own
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    kept.port = server.server_address[1]
    # A short poll: shutdown() waits for the loop's next poll.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield kept
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def alert_env(monkeypatch, receiver) -> Receiver:
    """Alerts on, to the receiver; the services' keys hold the token too."""
    monkeypatch.setenv("ALERT_URLS", receiver.url)
    monkeypatch.delenv("ALERT_REJECTED_ROWS", raising=False)
    for variable in KEY_VARIABLES:
        monkeypatch.setenv(variable, f"key-{TOKEN}")
    return receiver


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as made:
        yield made


class Said:
    """Everything the process said since the test began (or since `forget`): every log
    record, at any level and from any logger (apprise's and urllib3's included), and what
    reached stdout and stderr."""

    def __init__(self, caplog, capfd) -> None:
        self.caplog, self.capfd = caplog, capfd
        self.printed: list[str] = []

    def __call__(self) -> str:
        out, err = self.capfd.readouterr()
        self.printed += [out, err]
        records = [f"{r.name} {r.levelname} {r.getMessage()}" for r in self.caplog.records]
        return "\n".join([*records, *self.printed])

    def forget(self) -> None:
        self.capfd.readouterr()
        self.caplog.clear()
        self.printed.clear()


@pytest.fixture
def said(caplog, capfd) -> Said:
    caplog.set_level(logging.DEBUG)
    return Said(caplog, capfd)
