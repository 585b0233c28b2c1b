"""Shared fixtures: the sandbox mounted in-process, with a fixed anchor for exact answers."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from starlette.testclient import TestClient

from sandbox.app import SandboxApp, build_app
from sandbox.config import SandboxConfig

ANCHOR = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
#: The days of history the pull's sandboxes hold (`SandboxConfig.history_days`, set by
#: `start_sandbox`) and the days the code location's partitions span (SYNC_START_DATE, read
#: when it loads, here before any test imports it; the commands the tests start inherit it):
#: a sync of everything lands a season rather than a year, every day landed the same way,
#: and still reaches past the 90 days the comment service serves its daily stats for. A test
#: of the defaults a user gets sets its own.
HISTORY_DAYS = 95
os.environ["SYNC_START_DATE"] = (datetime.now(UTC).date() - timedelta(HISTORY_DAYS)).isoformat()
#: Tests of minutes, run first: with `make test`'s workers (`--dist worksteal`) each then runs
#: beside the others instead of alone at the end (the soak was the suite's last 5 minutes).
LONGEST = ("tests/test_soak.py::",)


#: Each run's temporary folders, in a folder of the clone's own (git ignores it): pytest's
#: shared one (`/tmp/pytest-of-<user>`) keeps the last three runs' folders and deletes older
#: ones, so a second run beside a long one could take away its Postgres data.
TEMPORARY = Path(__file__).resolve().parent.parent / ".pytest-tmp"
RUN_FOLDER = pytest.StashKey[Path]()


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        pass
    return True


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """A base folder for this run, `.pytest-tmp/<pid>-<random>`, unless `--basetemp` names
    one. Only the run that started decides: xdist gives its workers folders inside it. The
    folders of runs that were killed are removed here, since they could not remove their own."""
    if config.option.basetemp is not None or hasattr(config, "workerinput"):
        return
    TEMPORARY.mkdir(exist_ok=True)
    for left in TEMPORARY.iterdir():
        pid = left.name.partition("-")[0]
        if not pid.isdigit() or not running(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    folder = TEMPORARY / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    config.option.basetemp = str(folder)
    config.stash[RUN_FOLDER] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's folder goes with it (its workers and their Postgres have stopped by now)."""
    folder = config.stash.get(RUN_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))  # stable: the rest in order


@pytest.fixture(scope="session", autouse=True)
def host_state(tmp_path_factory) -> Iterator[None]:
    """This host's state folder (the key budgets, `pipelines/state/local_data.py`) for the test
    session, not the home of whoever runs the tests; its commands inherit it."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory) -> Iterator[str]:
    """A Postgres server of the test session's own, from the `pgserver` wheel: the
    deployment's shared store (`SYNC_STORE`) in the tests that need one."""
    import pgserver  # the dev group's: a test session always has it

    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield server.get_uri()
    server.cleanup()


@pytest.fixture
def shared_store(postgres_url) -> str:
    """A database of its own in the session's Postgres: the deployment's `SYNC_STORE`."""
    import psycopg  # only where a test needs the store

    name = f"push_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))


def build_hooked(received: list[httpx.Request], secret: str) -> SandboxApp:
    """A frozen sandbox (rate limits off) whose signed webhooks land in `received`, each
    answered 200 (MockTransport)."""

    def receive(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(200)

    config = SandboxConfig(
        frozen=True,
        now=ANCHOR,
        webhook_url="http://hooks.test/in",
        webhook_secret=secret,
        task_phase_seconds=0.05,
        rate_limits=False,
    )
    return build_app(config, webhook_transport=httpx.MockTransport(receive))


@pytest.fixture
def make_sandbox() -> Iterator[Callable[..., SandboxApp]]:
    """Build a fresh sandbox; keyword arguments override SandboxConfig fields."""
    built: list[SandboxApp] = []

    def make(**overrides) -> SandboxApp:
        settings = {"frozen": True, "now": ANCHOR, "task_phase_seconds": 0.05} | overrides
        app = build_app(SandboxConfig(**settings))
        built.append(app)
        return app

    yield make
    for app in built:
        app.sandbox.webhooks.close()


@pytest.fixture
def sandbox_app(make_sandbox) -> SandboxApp:
    """Frozen, small, seed 7, rate limits on (the services' documented ones)."""
    return make_sandbox()


@pytest.fixture
def http(sandbox_app) -> Iterator[TestClient]:
    """A synchronous client on the in-process sandbox; app exceptions surface in the test."""
    with TestClient(sandbox_app, base_url="http://sandbox") as client:
        yield client
