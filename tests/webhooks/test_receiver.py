"""The receiver over HTTP: signatures, duplicates, refusals (a signed body gets 200 or 400,
never 500), concurrency, and a receiver killed right after it answered."""

import asyncio
import hashlib
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import uuid

import httpx
import pytest
from starlette.testclient import TestClient

from pipelines.lake import Lake
from pipelines.webhooks.compaction import WEBHOOK_EVENTS, compact
from pipelines.webhooks.envelope import REQUIRED
from pipelines.webhooks.inbox import Inbox
from pipelines.webhooks.receiver import MAX_BODY_BYTES, WEBHOOK_PATH, build_app, signature_matches
from tests.faults.conftest import no_room
from tests.webhooks.conftest import ROOT, SECRET, envelope, signed

#: `openssl dgst -sha256 -hmac known-answer-secret` of KNOWN_BODY, computed outside Python.
KNOWN_SECRET = "known-answer-secret"
KNOWN_BODY = (
    b'{"event":"message.open","timestamp":"2026-11-01T12:00:00+00:00","source":"maac",'
    b'"data":{"campaign_id":1,"campaign_type":"broadcast","campaign_name":"Launch",'
    b'"customer_id":null,"line_uid":"U1"}}'
)
KNOWN_SIGNATURE = "5bc042d3f3ff45732e1b5273d2188fe43b731e24a71d09ec97bca2a5c771bd70"


def key() -> str:
    return str(uuid.uuid4())


def lake_keys(lake: Lake) -> list[str]:
    relation = lake.relation(WEBHOOK_EVENTS)
    return [row[0] for row in lake.query(f"SELECT idempotency_key FROM {relation}")]


# -- signature ------------------------------------------------------------------------------


def test_signature_known_answer_vectors():
    # RFC 4231, test case 2: HMAC-SHA256 with key "Jefe".
    rfc = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert signature_matches(b"what do ya want for nothing?", rfc, b"Jefe")
    assert signature_matches(b"what do ya want for nothing?", rfc.upper(), b"Jefe")
    assert signature_matches(KNOWN_BODY, KNOWN_SIGNATURE, KNOWN_SECRET.encode())
    assert envelope() == KNOWN_BODY


def test_a_delivery_signed_as_the_known_answer_is_stored(tmp_path):
    with (
        Inbox(tmp_path / "inbox.sqlite3") as inbox,
        TestClient(build_app(inbox, KNOWN_SECRET)) as client,
    ):
        headers = {"Service-Signature": KNOWN_SIGNATURE, "Service-Idempotency-Key": "k-1"}
        answer = client.post(WEBHOOK_PATH, content=KNOWN_BODY, headers=headers)
        assert answer.status_code == 200, answer.text
        assert inbox.counts() == {"events": 1, "rejected": 0}


def _one_byte_changed(body: bytes) -> tuple[bytes, str]:
    changed = body.replace(b'"U1"', b'"U2"')
    assert len(changed) == len(body) and changed != body
    return changed, signed(body, "k")["Service-Signature"]


SIGNATURE_CASES = {
    "one byte of the body changed": _one_byte_changed,
    "signed with another secret": lambda body: (
        body,
        hmac.new(b"another-secret", body, hashlib.sha256).hexdigest(),
    ),
    "header missing": lambda body: (body, None),
    "not hex": lambda body: (body, "z" * 64),
    "digest truncated": lambda body: (body, signed(body, "k")["Service-Signature"][:-1]),
    "digest halved": lambda body: (body, signed(body, "k")["Service-Signature"][:32]),
    "empty": lambda body: (body, ""),
}


@pytest.mark.parametrize("case", SIGNATURE_CASES)
def test_a_bad_signature_gets_401_and_nothing_is_stored(receiver, case):
    body, signature = SIGNATURE_CASES[case](envelope())
    headers = signed(body, key())
    if signature is None:
        del headers["Service-Signature"]
    else:
        headers["Service-Signature"] = signature
    answer = httpx.post(receiver.url, content=body, headers=headers, timeout=30)
    assert answer.status_code == 401, answer.text
    assert receiver.inbox.counts() == {"events": 0, "rejected": 0}


# -- duplicates -----------------------------------------------------------------------------


def test_the_same_event_four_times_in_a_row_and_at_once_is_stored_once(receiver):
    in_a_row, at_once = key(), key()
    body = envelope()
    answers = [receiver.deliver(body, in_a_row) for _ in range(4)]
    assert [a.status_code for a in answers] == [200] * 4
    assert [a.json()["status"] for a in answers] == ["stored"] + ["duplicate"] * 3

    async def four_at_once() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            send = [
                client.post(receiver.url, content=body, headers=signed(body, at_once))
                for _ in range(4)
            ]
            return await asyncio.gather(*send)

    answers = asyncio.run(four_at_once())
    assert [a.status_code for a in answers] == [200] * 4
    assert sorted(a.json()["status"] for a in answers) == ["duplicate"] * 3 + ["stored"]
    assert receiver.inbox.counts() == {"events": 2, "rejected": 0}


def test_fifty_concurrent_deliveries_are_all_stored_exactly_once(receiver, tmp_path):
    bodies = {key(): envelope(data={"line_uid": f"U{n}"}) for n in range(50)}

    async def deliver_all() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            send = [
                client.post(receiver.url, content=body, headers=signed(body, k))
                for k, body in bodies.items()
            ]
            return await asyncio.gather(*send)

    answers = asyncio.run(deliver_all())
    assert [a.status_code for a in answers] == [200] * 50
    assert {a.json()["status"] for a in answers} == {"stored"}
    lake = Lake(tmp_path / "lake")
    assert compact(receiver.inbox, lake).rows == 50
    assert sorted(lake_keys(lake)) == sorted(bodies)


# -- refusals -------------------------------------------------------------------------------


def without(name: str) -> bytes:
    document = json.loads(envelope())
    del document[name]
    return json.dumps(document).encode()


def lone_surrogate_in(name: str) -> bytes:
    """A body whose `name` holds `\ud800`: valid JSON, no valid Unicode text."""
    return envelope(**{name: "x-LONE"}).replace(b"x-LONE", b"x\\ud800")


#: An array nested 200,000 deep in `data`: JSON, under the body bound, too deep for Python.
NESTED = (
    b'{"event":"x","timestamp":"2026-11-01T12:00:00+00:00","source":"maac","data":{"a":'
    + b"[" * 200_000
    + b"]" * 200_000
    + b"}}"
)
REFUSED = {
    "malformed JSON": (b'{"event": "message.open",', "malformed JSON"),
    "nested 200,000 deep": (NESTED, "JSON nested too deep to read"),
    "an integer of 5,000 digits": (
        envelope(data={"n": "DIGITS"}).replace(b'"DIGITS"', b"7" * 5000),
        "JSON that Python cannot read",
    ),
    "not UTF-8": (envelope(source="caac").replace(b"caac", b"\xff\xfe"), "malformed JSON"),
    "not an object": (b"[1, 2]", "not a JSON object"),
    **{f"no {name}": (without(name), f"envelope misses {name}") for name in REQUIRED},
    "event not a string": (envelope(event=7), "event is not a non-empty string"),
    "data not an object": (envelope(data=[1]), "data is not an object"),
    "timestamp not ISO 8601": (envelope(timestamp="yesterday"), "not ISO 8601"),
    "timestamp without timezone": (envelope(timestamp="2026-11-01T12:00:00"), "no timezone"),
    # Both exist where they are written, not in UTC.
    "timestamp before year 1 in UTC": (
        envelope(timestamp="0001-01-01T00:00:00+05:00"),
        "outside years 1-9999 in UTC",
    ),
    "timestamp after year 9999 in UTC": (
        envelope(timestamp="9999-12-31T23:00:00-05:00"),
        "outside years 1-9999 in UTC",
    ),
    **{
        f"a lone surrogate in {name}": (
            lone_surrogate_in(name),
            f"{name} is not valid Unicode text (a lone surrogate)",
        )
        for name in ("event", "event_id", "source", "timestamp")
    },
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_signed_body_that_is_no_event_gets_400_and_is_kept_with_its_reason(receiver, case):
    body, reason = REFUSED[case]
    answer = receiver.deliver(body, key())
    assert answer.status_code == 400, answer.text
    assert reason in answer.json()["error"]
    assert receiver.inbox.counts() == {"events": 0, "rejected": 1}
    (kept,) = receiver.inbox.rejected()
    assert reason in kept["reason"] and kept["body"] == body
    assert len(kept["reason"]) < 300  # the reason names the problem, it does not quote it


def test_a_delivery_without_idempotency_key_gets_400_and_is_kept(receiver):
    body = envelope()
    headers = signed(body, "unused")
    del headers["Service-Idempotency-Key"]
    answer = httpx.post(receiver.url, content=body, headers=headers, timeout=30)
    assert answer.status_code == 400
    assert receiver.inbox.rejected()[0]["reason"] == "Service-Idempotency-Key missing"


def test_an_unknown_event_name_is_stored(receiver, tmp_path):
    body = envelope("loyalty.badge.earned", source="someday", data={"badge": "gold"})
    answer = receiver.deliver(body, "k-unknown")
    assert answer.status_code == 200 and answer.json()["status"] == "stored"
    lake = Lake(tmp_path / "lake")
    compact(receiver.inbox, lake)
    rows = lake.query(f"SELECT event, source, data FROM {lake.relation(WEBHOOK_EVENTS)}")
    assert rows == [("loyalty.badge.earned", "someday", '{"badge":"gold"}')]


def test_a_body_over_the_bound_gets_413_and_nothing_is_stored(receiver):
    body = envelope(data={"padding": "x" * MAX_BODY_BYTES})
    answer = receiver.deliver(body, key())
    assert answer.status_code == 413
    assert receiver.inbox.counts() == {"events": 0, "rejected": 0}


# -- the process ----------------------------------------------------------------------------


def start_receiver(env: dict, **options) -> subprocess.CompletedProcess:
    """`python -m pipelines.webhooks` run to its end (these tests' receivers never serve)."""
    return subprocess.run(
        [sys.executable, "-m", "pipelines.webhooks", "--port", "9"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        **options,
    )


def test_the_receiver_refuses_to_start_without_a_secret(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "WEBHOOK_SECRET"}
    env["WEBHOOK_INBOX"] = str(tmp_path / "inbox.sqlite3")
    finished = start_receiver(env)
    assert finished.returncode == 2
    assert "WEBHOOK_SECRET is not set" in finished.stderr
    assert not (tmp_path / "inbox.sqlite3").exists()


def test_the_receiver_refuses_a_lake_root_that_is_a_file(tmp_path):
    env = os.environ | {"WEBHOOK_SECRET": "s3cret", "LAKE_ROOT": str(tmp_path / "lake")}
    (tmp_path / "lake").write_text("not a folder")
    finished = start_receiver(env)
    assert finished.returncode == 2, finished.stderr
    [line] = finished.stderr.splitlines()
    assert line.startswith("webhook receiver: LAKE_ROOT=") and "is a file, not a folder" in line


def test_a_receiver_started_on_a_full_disk_says_so_in_one_line(tmp_path):
    """Regression: `sqlite3.OperationalError: database or disk is full` and a traceback."""
    env = os.environ | {"WEBHOOK_SECRET": SECRET, "WEBHOOK_INBOX": str(tmp_path / "in.sqlite3")}
    finished = start_receiver(env, preexec_fn=no_room)
    assert finished.returncode == 1
    [line] = finished.stderr.strip().splitlines()
    assert f"the webhook inbox at {tmp_path / 'in.sqlite3'} (WEBHOOK_INBOX)" in line
    assert "free space" in line and SECRET not in line


def test_events_answered_200_survive_a_kill_and_reach_the_lake(
    spawn_receiver, tmp_path, monkeypatch
):
    """SIGKILL right after the last 200: every answered event is in the lake after a restart
    and compaction, and the restarted receiver still knows their keys."""
    monkeypatch.delenv("WEBHOOK_INBOX", raising=False)  # the default: beside the lake
    env = {"WEBHOOK_SECRET": SECRET, "LAKE_ROOT": str(tmp_path / "lake")}
    first = spawn_receiver(env)
    bodies = {key(): envelope(data={"line_uid": f"U{n}"}) for n in range(20)}
    with httpx.Client(timeout=30) as client:
        for k, body in bodies.items():
            answer = client.post(first.url, content=body, headers=signed(body, k))
            assert answer.status_code == 200
    first.process.send_signal(signal.SIGKILL)
    assert first.process.wait(timeout=10) == -signal.SIGKILL

    second = spawn_receiver(env)
    last_key, last_body = list(bodies.items())[-1]
    again = httpx.post(second.url, content=last_body, headers=signed(last_body, last_key))
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    second.process.terminate()
    second.process.wait(timeout=10)

    lake = Lake(tmp_path / "lake")
    with Inbox(tmp_path / "webhooks" / "inbox.sqlite3") as inbox:
        compact(inbox, lake)
    assert sorted(lake_keys(lake)) == sorted(bodies)
    for log in (first.log, second.log):
        assert SECRET not in log.read_text()


def test_the_example_delivery_in_the_docs_answers_200_as_written(receiver, monkeypatch, capsys):
    """docs/webhooks.md's example, run as written against a receiver on its own port."""
    guide = (ROOT / "docs" / "webhooks.md").read_text()
    (example,) = re.findall(r"```python\n(.*?)```", guide, re.S)
    written = "http://127.0.0.1:9000/webhooks/datahub"
    assert written in example and receiver.url.endswith(WEBHOOK_PATH)
    monkeypatch.setenv("WEBHOOK_SECRET", SECRET)

    for _ in range(2):  # the same key twice: stored once
        exec(example.replace(written, receiver.url), {})

    said = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in said] == ["200", "200"], said
    assert receiver.inbox.counts() == {"events": 1, "rejected": 0}
