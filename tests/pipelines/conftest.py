"""Pipeline fixtures: a real sandbox server on a free port (in this process, so the test can
reach its ground truth and faults) and the environment a user would set."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn

from assets.resources import build_resources
from pipelines.settings import load_settings
from sandbox.app import SandboxApp, build_app
from sandbox.config import SandboxConfig
from tests.conftest import HISTORY_DAYS

COMMENT_KEY = "sa_live_demo_readonly"
APIKEY = "demo-apikey"


#: The tests' asks of the sandboxes' truth, on one client: one made per request costs 30 ms
#: of CPU or more. Idle connections are dropped after a second, before the sandbox's
#: server closes them (5 s), so none is reused as the server closes it.
TRUTH = httpx.Client(timeout=30, limits=httpx.Limits(keepalive_expiry=1))


@dataclass
class LiveSandbox:
    url: str
    app: SandboxApp

    def truth(self) -> dict:
        return TRUTH.get(f"{self.url}/_sandbox/truth").json()

    def truth_ids(self, service: str, scope: str, stream: str) -> list:
        answer = TRUTH.get(f"{self.url}/_sandbox/truth/{service}/{scope}/{stream}/ids")
        return answer.json()["ids"]

    def truth_days(self, service: str, scope: str, stream: str) -> dict[str, int]:
        """Rows per UTC day (`YYYY-MM-DD`) of a day stream."""
        answer = TRUTH.get(f"{self.url}/_sandbox/truth/{service}/{scope}/{stream}/days")
        return answer.json()["days"]

    def environment(self, lake: Path) -> dict[str, str]:
        """The variables `python -m cli sync` reads, pointed at this sandbox."""
        return {
            "COMMENT_AUTOMATION_URL": f"{self.url}/comment/api/v1",
            "COMMENT_AUTOMATION_API_KEY": COMMENT_KEY,
            "CONVERSATION_URL": f"{self.url}/conversation",
            "CONVERSATION_API_KEY": APIKEY,
            "CONVERSATION_JP_URL": f"{self.url}/conversation-jp",
            "CONVERSATION_JP_API_KEY": APIKEY,
            "DATAHUB_URL": f"{self.url}/datahub",
            "DATAHUB_API_KEY": APIKEY,
            "DATAHUB_JP_URL": f"{self.url}/datahub-jp",
            "DATAHUB_JP_API_KEY": APIKEY,
            "LAKE_ROOT": str(lake / "lake"),
            "WAREHOUSE_PATH": str(lake / "warehouse.duckdb"),
            "SYNC_CONFIG": str(lake / "sync.toml"),
        }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _clear_of_midnight() -> datetime:
    """The pipeline's 'today' is the wall clock's; a frozen sandbox anchored a minute before
    midnight would disagree with it a minute later, so start after the turn instead."""
    now = datetime.now(UTC)
    to_midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0) - now
    if to_midnight < timedelta(minutes=2):
        time.sleep(to_midnight.total_seconds() + 1)
    return datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(scope="session")
def start_sandbox() -> Iterator[Callable[..., LiveSandbox]]:
    """Start sandboxes served by uvicorn in threads; all stop at the end of the session."""
    servers: list[tuple[uvicorn.Server, threading.Thread, SandboxApp]] = []

    def start(keep_alive_seconds: float = 5, **overrides) -> LiveSandbox:
        """`keep_alive_seconds`: how long the server keeps an idle connection (uvicorn's 5 s
        unless a test pauses a client longer); `overrides`: the sandbox's settings."""
        settings = {
            "frozen": True,
            "now": _clear_of_midnight(),
            "task_phase_seconds": 0.05,
            "rate_limits": False,
            "history_days": HISTORY_DAYS,
        } | overrides
        app = build_app(SandboxConfig(**settings))
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=port,
                log_level="warning",
                timeout_keep_alive=keep_alive_seconds,
            )
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the sandbox server did not start")
            time.sleep(0.02)
        servers.append((server, thread, app))
        return LiveSandbox(f"http://127.0.0.1:{port}", app)

    yield start
    for server, thread, app in servers:
        server.should_exit = True
        thread.join(timeout=10)
        app.sandbox.webhooks.close()


@pytest.fixture(scope="session")
def _frozen_by_day() -> dict:
    return {}


@pytest.fixture
def frozen_sandbox(start_sandbox, _frozen_by_day) -> LiveSandbox:
    """One read-only sandbox per UTC day, shared by the tests that only read (never fault or
    mutate it). A frozen sandbox's data ends at its start while the pipeline's today is the
    wall clock's: a suite that runs across a midnight gets a sandbox of the new day, and no
    test starts in the last two minutes before one (`_clear_of_midnight`)."""
    day = _clear_of_midnight().date()
    if day not in _frozen_by_day:
        _frozen_by_day[day] = start_sandbox()
    return _frozen_by_day[day]


@pytest.fixture
def sync_env(tmp_path, monkeypatch) -> Callable[[LiveSandbox], dict]:
    """Point the environment at a sandbox, as a user would; returns the Dagster resources.
    Pacing is off unless a test turns it on: these sandboxes run without rate limits. The
    lake is a folder of the test's unless `lake_root` says otherwise."""

    def point(
        sandbox: LiveSandbox, pace: bool = False, sync_toml: str = "", lake_root: str = ""
    ) -> dict:
        for name, value in sandbox.environment(tmp_path).items():
            monkeypatch.setenv(name, value)
        if lake_root:
            monkeypatch.setenv("LAKE_ROOT", lake_root)
        if not pace:
            for service in ("comment", "conversation", "datahub"):
                header = f"[service.{service}]\n"
                if header in sync_toml:
                    sync_toml = sync_toml.replace(header, header + "pace = false\n")
                else:
                    sync_toml += header + "pace = false\n"
        (tmp_path / "sync.toml").write_text(sync_toml)
        return build_resources(load_settings())

    return point
