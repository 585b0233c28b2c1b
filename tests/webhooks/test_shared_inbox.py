"""The webhook inbox in the deployment's Postgres (`SYNC_STORE`,
`pipelines/webhooks/postgres_inbox.py`): it behaves as the SQLite inbox does, keeps the lakes
sharing a database apart, shows ids in id order, and lets two receivers behind one address
store each event once while one of them is killed (a Postgres server of the test session's
own, `pgserver`)."""

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime
from urllib.parse import urlsplit

import dagster as dg
import httpx
import psycopg
import pytest
from starlette.testclient import TestClient

from assets import webhooks
from assets.resources import LakeResource
from pipelines.lake import Lake
from pipelines.state.shared_store import StoreUnavailable
from pipelines.webhooks.compaction import compact
from pipelines.webhooks.envelope import parse_envelope
from pipelines.webhooks.events import Arrival
from pipelines.webhooks.inbox import Inbox, inbox_path, open_inbox
from pipelines.webhooks.postgres_inbox import EVENTS, PostgresInbox
from pipelines.webhooks.receiver import WEBHOOK_PATH, build_app
from tests.webhooks.conftest import ROOT, SECRET, envelope, free_port, signed
from tests.webhooks.test_compaction import DAYS, assert_lake_equals_inbox, store

#: The burst two receivers share: enough that the kill lands among deliveries in flight.
BURST = 2000
SENDERS = 8
#: Acknowledged events before one receiver is killed.
KILL_AFTER = 600


def arrival(key: str | None, body: bytes, at: datetime | None = None) -> Arrival:
    return Arrival(key, "DataHub-Webhooks/1.0 (test)", "application/json", body, at or now())


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def inbox(request, tmp_path):
    """Each kind of inbox the lake at `tmp_path/lake` may have."""
    shared = request.param == "postgres"
    env = {"SYNC_STORE": request.getfixturevalue("postgres_url")} if shared else {}
    with open_inbox(tmp_path / "lake", env) as opened:
        assert isinstance(opened, PostgresInbox if shared else Inbox)
        yield opened


def test_an_inbox_stores_once_keeps_refusals_and_reads_days_by_id(inbox):
    bodies = {
        "late": envelope(timestamp="2026-10-31T23:59:59.123456+00:00"),
        "sync": envelope("order.sync", source="caac", event_id="e-1"),
        # 02:00 on the first in UTC; `\u0000` is text to JSON and to the lake.
        "nul": envelope("odd\u0000name", source="s\u0000", timestamp="2026-11-01T00:00-02:00"),
    }
    at = datetime(2026, 11, 1, 12, 0, 1, 250, tzinfo=UTC)
    assert [inbox.store(arrival(k, b, at), parse_envelope(b)) for k, b in bodies.items()] == [
        True
    ] * 3
    assert not inbox.store(arrival("late", bodies["late"]), parse_envelope(bodies["late"]))
    inbox.reject(arrival("refused", b"[1]", at), "the body is not a JSON object")
    inbox.reject(arrival(None, b"{}", at), "Service-Idempotency-Key missing")

    assert inbox.counts() == {"events": 3, "rejected": 2}
    assert inbox.rejected() == [
        {
            "received_at": at.isoformat(),
            "idempotency_key": "refused",
            "reason": "the body is not a JSON object",
            "body": b"[1]",
        },
        {
            "received_at": at.isoformat(),
            "idempotency_key": None,
            "reason": "Service-Idempotency-Key missing",
            "body": b"{}",
        },
    ]
    tops = inbox.day_watermarks()
    assert sorted(tops) == [date(2026, 10, 31), date(2026, 11, 1)]
    read = {day: list(inbox.events_of(day, top)) for day, top in tops.items()}
    assert [e.idempotency_key for e in read[date(2026, 10, 31)]] == ["late"]
    first = read[date(2026, 11, 1)]
    assert [e.idempotency_key for e in first] == ["sync", "nul"]
    for day, events in read.items():
        assert events[-1].id == tops[day]
        for event in events:
            envelope_of = parse_envelope(bodies[event.idempotency_key])
            assert event.body == bodies[event.idempotency_key]
            assert (event.event, event.source, event.event_id, event.timestamp) == (
                envelope_of.event,
                envelope_of.source,
                envelope_of.event_id,
                envelope_of.timestamp,
            )
            assert event.received_at == at and event.received_at.tzinfo == UTC
    # Up to a watermark, and nothing past it.
    assert list(inbox.events_of(date(2026, 11, 1), first[0].id)) == first[:1]
    assert list(inbox.events_of(date(2026, 11, 2), 10**12)) == []


def test_the_inbox_is_the_one_the_settings_name(postgres_url, tmp_path):
    lake = tmp_path / "lake"
    shared = {"SYNC_STORE": postgres_url}
    with open_inbox(lake, shared) as inbox:
        assert isinstance(inbox, PostgresInbox) and inbox.scope == str(lake)
        assert "(SYNC_STORE)" in inbox.location
    assert not inbox_path(lake, {}).exists()  # the shared store made no file
    file = tmp_path / "own.sqlite3"
    with open_inbox(lake, shared | {"WEBHOOK_INBOX": str(file)}) as inbox:
        assert isinstance(inbox, Inbox) and inbox.path == file
    assert open_inbox(lake, {}, create=False) is None
    with open_inbox(lake, {}) as inbox:
        assert inbox.path == inbox_path(lake, {})
    open_inbox(lake, {}, create=False).close()


def test_a_session_set_to_commit_asynchronously_commits_durably(postgres_url, tmp_path):
    """A 200 follows a commit on disk even where the server or the role turned that off."""
    joined = "&" if "?" in postgres_url else "?"
    for setting, kept in [("off", "on"), ("remote_apply", "remote_apply")]:
        url = f"{postgres_url}{joined}options=-c%20synchronous_commit%3D{setting}"
        with open_inbox(tmp_path / "lake", {"SYNC_STORE": url}) as inbox:
            # The helper's own connection: the session the inserts run in.
            session = inbox._db._connection()
            assert session.execute("SHOW synchronous_commit").fetchone() == (kept,)


def test_two_lakes_sharing_one_postgres_keep_their_own_events(postgres_url, tmp_path):
    env = {"SYNC_STORE": postgres_url}
    body = envelope()
    with open_inbox(tmp_path / "one", env) as one, open_inbox(tmp_path / "two", env) as two:
        # The same key in both: each lake's event.
        assert one.store(arrival("same", body), parse_envelope(body))
        assert two.store(arrival("same", body), parse_envelope(body))
        assert one.store(arrival("only-one", body), parse_envelope(body))
        two.reject(arrival("bad", b"[]"), "the body is not a JSON object")
        assert one.counts() == {"events": 2, "rejected": 0}
        assert two.counts() == {"events": 1, "rejected": 1}
        assert one.rejected() == []
        assert one.uuid != two.uuid
        (day,) = one.day_watermarks()
        assert [e.idempotency_key for e in one.events_of(day, one.day_watermarks()[day])] == [
            "same",
            "only-one",
        ]
        assert [e.idempotency_key for e in two.events_of(day, 10**12)] == ["same"]
        uuid_of_one = one.uuid
    with open_inbox(tmp_path / "one", env) as again:
        assert again.uuid == uuid_of_one and again.counts()["events"] == 2


def test_a_store_that_cannot_be_reached_is_named_without_its_password(tmp_path):
    url = f"postgresql://sync:pw-s3cret@127.0.0.1:{free_port()}/sync"
    with pytest.raises(StoreUnavailable) as raised:
        open_inbox(tmp_path / "lake", {"SYNC_STORE": url})
    message = str(raised.value)
    assert "the webhook inbox" in message and "SYNC_STORE" in message
    assert "pw-s3cret" not in message and "sync:***@127.0.0.1" in message


def test_a_receiver_whose_store_cannot_be_reached_says_so_and_exits(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "WEBHOOK_INBOX"}
    env |= {"WEBHOOK_SECRET": SECRET, "LAKE_ROOT": str(tmp_path / "lake")}
    env["SYNC_STORE"] = f"postgresql://sync:pw-s3cret@127.0.0.1:{free_port()}/sync"
    finished = subprocess.run(
        [sys.executable, "-m", "pipelines.webhooks", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 1
    assert "SYNC_STORE" in finished.stderr and "Traceback" not in finished.stderr
    assert "pw-s3cret" not in finished.stderr + finished.stdout


def test_ids_become_visible_in_id_order_across_connections(postgres_url, tmp_path):
    """Writers on connections of their own (as receivers on several hosts) while a reader
    takes watermarks: the events up to a watermark, once seen, are the same ever after."""
    env = {"SYNC_STORE": postgres_url}
    writers = [open_inbox(tmp_path / "lake", env) for _ in range(3)]
    reader = open_inbox(tmp_path / "lake", env)
    seen: list[tuple[int, list[int]]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            top = reader.day_watermarks().get(DAYS[0])
            if top is not None:
                seen.append((top, [e.id for e in reader.events_of(DAYS[0], top)]))

    watcher = threading.Thread(target=read)
    watcher.start()
    try:
        with ThreadPoolExecutor(len(writers)) as pool:
            list(pool.map(lambda inbox: store(inbox, DAYS[0], 150), writers))
    finally:
        done.set()
        watcher.join(60)
        for inbox in [*writers, reader]:
            inbox.close()
    with open_inbox(tmp_path / "lake", env) as inbox:
        final = [e.id for e in inbox.events_of(DAYS[0], 10**12)]
    assert len(final) == 450 and len(seen) > 10
    for top, ids in seen:
        assert ids == [n for n in final if n <= top], f"an id under {top} appeared after it"


def test_a_store_that_fails_gets_500_with_one_line_of_log_and_the_resend_is_stored(
    postgres_url, tmp_path, caplog
):
    body = envelope()
    with (
        open_inbox(tmp_path / "lake", {"SYNC_STORE": postgres_url}) as inbox,
        TestClient(build_app(inbox, SECRET), raise_server_exceptions=False) as client,
    ):
        assert client.post(WEBHOOK_PATH, content=body, headers=signed(body, "k-1")).is_success
        # The server drops the receiver's connection (a restart, a failover): found through
        # the helper's own connection, which nothing outside it needs to reach.
        backend = inbox._db._connection().info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        caplog.clear()
        answer = client.post(WEBHOOK_PATH, content=body, headers=signed(body, "k-2"))
        assert answer.status_code == 500
        (logged,) = [r for r in caplog.records if r.levelname == "ERROR"]
        assert logged.exc_info is None and "SYNC_STORE" in logged.getMessage()
        # The hub resends; the receiver opens its connection again.
        again = client.post(WEBHOOK_PATH, content=body, headers=signed(body, "k-2"))
        assert again.status_code == 200 and again.json()["status"] == "stored"
        assert inbox.counts() == {"events": 2, "rejected": 0}


def test_the_sensor_and_the_asset_compact_the_shared_inbox(postgres_url, tmp_path, monkeypatch):
    monkeypatch.delenv("WEBHOOK_INBOX", raising=False)
    monkeypatch.setenv("SYNC_STORE", postgres_url)
    resource = LakeResource(
        lake_root=str(tmp_path / "lake"), warehouse_path=str(tmp_path / "warehouse.duckdb")
    )

    def evaluate():
        with dg.build_sensor_context(resources={"lake": resource}) as context:
            return webhooks.datahub_webhooks_sensor(context)

    with open_inbox(resource.lake_root) as inbox:
        keys = {k: DAYS[2] for k in store(inbox, DAYS[2], 2)}
        request = evaluate()
        assert request.run_key == f"{inbox.uuid}-{inbox.day_watermarks()[DAYS[2]]}"
        with dg.DagsterInstance.ephemeral() as instance:
            result = dg.materialize(
                webhooks.ASSETS, resources={"lake": resource}, instance=instance
            )
        assert result.success
        assert isinstance(evaluate(), dg.SkipReason)
    assert_lake_equals_inbox(Lake(resource.lake_root), keys)


# -- two receivers behind one address -------------------------------------------------------


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass  # a side reset: a killed receiver, a sender that gave up
    finally:
        writer.close()


class RoundRobinProxy:
    """A TCP forwarder on a free port, as a load balancer before replicas: each connection
    goes to the next backend in turn, or, where that one refuses, to the one after."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.served = [0] * len(ports)
        self.refused = 0
        self.port = 0
        self._turn = itertools.count()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._forward, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _forward(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter):
        first = next(self._turn)
        for n in range(len(self.ports)):
            backend = (first + n) % len(self.ports)
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.ports[backend])
            except OSError:
                self.refused += 1
                continue
            self.served[backend] += 1
            await asyncio.gather(_pipe(client, writer), _pipe(reader, to_client))
            return
        to_client.close()

    def __enter__(self) -> "RoundRobinProxy":
        self._thread.start()
        assert self._ready.wait(30), "the proxy did not start"
        return self

    def __exit__(self, *_) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def test_two_receivers_behind_one_address_store_each_event_once_through_a_kill(
    spawn_receiver, postgres_url, tmp_path, monkeypatch
):
    """A burst from concurrent senders through a round-robin proxy to two receivers sharing
    the Postgres inbox; one is killed part-way and each sender resends until it gets a 200,
    as the hub does. Every event is then stored once and, after compaction, in the lake
    once."""
    monkeypatch.delenv("WEBHOOK_INBOX", raising=False)
    lake_root = str(tmp_path / "lake")
    env = {"WEBHOOK_SECRET": SECRET, "SYNC_STORE": postgres_url, "LAKE_ROOT": lake_root}
    receivers = [spawn_receiver(env) for _ in range(2)]
    days = {str(uuid.uuid4()): DAYS[n % len(DAYS)] for n in range(BURST)}
    bodies = {
        k: envelope(timestamp=f"{day.isoformat()}T12:00:00+00:00", data={"key": k})
        for k, day in days.items()
    }
    answered: dict[str, str] = {}  # key -> the status of its 200

    with RoundRobinProxy([urlsplit(r.url).port for r in receivers]) as proxy:
        url = f"http://127.0.0.1:{proxy.port}{WEBHOOK_PATH}"

        def send(keys: list[str]) -> None:
            with httpx.Client(timeout=30) as client:
                for k in keys:
                    deadline = time.monotonic() + 120
                    while True:
                        try:
                            answer = client.post(
                                url, content=bodies[k], headers=signed(bodies[k], k)
                            )
                            if answer.status_code == 200:
                                answered[k] = answer.json()["status"]
                                break
                        except httpx.TransportError:
                            pass
                        assert time.monotonic() < deadline, f"{k} never got a 200"
                        time.sleep(0.02)

        keys = list(bodies)
        with ThreadPoolExecutor(SENDERS) as pool:
            sent = [pool.submit(send, keys[n::SENDERS]) for n in range(SENDERS)]
            deadline = time.monotonic() + 120
            while len(answered) < KILL_AFTER:
                assert time.monotonic() < deadline and not any(s.done() for s in sent)
                time.sleep(0.01)
            receivers[0].process.send_signal(signal.SIGKILL)
            assert receivers[0].process.wait(timeout=30) == -signal.SIGKILL
            acknowledged_at_kill = len(answered)
            for done in sent:
                done.result(timeout=300)

    assert acknowledged_at_kill < BURST and sorted(answered) == sorted(bodies)
    assert all(proxy.served) and proxy.refused > 0  # both served, then one was down
    with psycopg.connect(postgres_url) as db:
        stored = db.execute(
            f"SELECT idempotency_key, count(*) FROM {EVENTS} WHERE inbox = %s GROUP BY 1",
            (lake_root,),
        ).fetchall()
    assert len(stored) == BURST and {k for k, _ in stored} == set(bodies)
    assert {count for _, count in stored} == {1}, "an event stored twice"

    lake = Lake(lake_root)
    with open_inbox(lake_root, {"SYNC_STORE": postgres_url}) as inbox:
        compact(inbox, lake)
    assert_lake_equals_inbox(lake, days)
    for receiver in receivers:
        log = receiver.log.read_text()
        assert SECRET not in log and "Traceback" not in log
