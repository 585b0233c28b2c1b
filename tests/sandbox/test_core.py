"""The sandbox's shared machinery: faults, rate limits, clock, webhook delivery, command line."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest
from starlette.testclient import TestClient

from sandbox.__main__ import parse_args
from sandbox.clock import Clock
from sandbox.config import SandboxConfig
from sandbox.faults import ConnectionDropped, FaultInjector, FaultSpec
from sandbox.ratelimit import RateLimiter
from sandbox.webhooks import WebhookDispatcher, sign
from tests.constants import COMMENT, READONLY


def test_fault_spec_parses_every_fault():
    spec = FaultSpec.parse(
        "error=0.1, rate=0.2,burst=4,retry_after=2,slow=0.3,delay=0.5,"
        "drop=0.01,truncate=0.02,posts_502=1,webhook_dup=0.5,webhook_reorder=0"
    )
    assert (spec.error, spec.rate, spec.burst, spec.retry_after) == (0.1, 0.2, 4, 2)
    assert (spec.slow, spec.delay, spec.drop, spec.truncate) == (0.3, 0.5, 0.01, 0.02)
    assert (spec.posts_502, spec.webhook_dup, spec.webhook_reorder) == (1.0, 0.5, 0.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("errors=0.1", "unknown fault 'errors'"),
        ("error=1.5", "within 0..1"),
        ("slow=x", "needs a number"),
        ("delay=-1", "must not be negative"),
    ],
)
def test_fault_spec_refuses_bad_input_by_name(text, message):
    with pytest.raises(ValueError, match=message):
        FaultSpec.parse(text)


def _faulty_client(make_sandbox, **faults) -> TestClient:
    app = make_sandbox(faults=FaultSpec.from_dict(faults))
    return TestClient(app, base_url="http://sandbox")


def test_error_fault_answers_5xx_with_the_error_body(make_sandbox):
    client = _faulty_client(make_sandbox, error=1.0)
    answer = client.get(f"{COMMENT}/me", headers=READONLY)
    assert answer.status_code in (500, 502, 503)
    assert answer.json()["error"]["code"] == "server_error"


def test_rate_fault_answers_429_with_retry_after_in_body_and_header(make_sandbox):
    client = _faulty_client(make_sandbox, rate=1.0, retry_after=3)
    answer = client.get(f"{COMMENT}/me", headers=READONLY)
    assert answer.status_code == 429
    assert answer.json()["error"] == {
        "code": "rate_limited",
        "message": "too many requests (injected)",
        "retry_after": 3,
    }
    assert answer.headers["Retry-After"] == "3"


def test_a_429_burst_continues_for_the_same_key_after_the_share_drops(make_sandbox):
    app = make_sandbox(faults=FaultSpec.from_dict({"rate": 1.0, "burst": 3}))
    client = TestClient(app, base_url="http://sandbox")
    assert client.get(f"{COMMENT}/me", headers=READONLY).status_code == 429
    app.faults.spec.rate = 0.0
    statuses = [client.get(f"{COMMENT}/me", headers=READONLY).status_code for _ in range(3)]
    assert statuses == [429, 429, 200]


@pytest.mark.parametrize("fault", ["drop", "truncate"])
def test_dropped_and_truncated_answers_are_transport_errors(make_sandbox, fault):
    client = _faulty_client(make_sandbox, **{fault: 1.0})
    with pytest.raises(httpx.RemoteProtocolError):
        client.get(f"{COMMENT}/me", headers=READONLY)
    assert issubclass(ConnectionDropped, httpx.TransportError)


def test_faults_never_touch_the_ground_truth(make_sandbox):
    client = _faulty_client(make_sandbox, error=1.0, drop=1.0)
    assert client.get("/_sandbox/truth").status_code == 200


def test_faults_can_be_changed_and_read_at_run_time(http):
    assert http.put("/_sandbox/faults", json={"error": 1.0}).status_code == 200
    assert http.get(f"{COMMENT}/me", headers=READONLY).status_code >= 500
    state = http.get("/_sandbox/faults").json()
    assert state["spec"]["error"] == 1.0 and sum(state["injected"].values()) == 1
    refused = http.put("/_sandbox/faults", json={"error": 2})
    assert refused.status_code == 400 and "within 0..1" in refused.text


def test_slow_fault_delays_the_answer(make_sandbox):
    client = _faulty_client(make_sandbox, slow=1.0, delay=0.3)
    started = time.monotonic()
    assert client.get(f"{COMMENT}/me", headers=READONLY).status_code == 200
    assert time.monotonic() - started >= 0.3


def test_requests_are_counted_per_path_with_the_refusals_of_the_limit(make_sandbox):
    client = TestClient(make_sandbox(rate_window_seconds=60), base_url="http://sandbox")
    answers = [client.get(f"{COMMENT}/me", headers=READONLY).status_code for _ in range(125)]
    client.get(f"{COMMENT}/stats", headers=READONLY, params={"days": 3})
    client.get("/_sandbox/truth")  # the sandbox's own routes are not traffic
    seen = client.get("/_sandbox/requests").json()
    counts = {(p["method"], p["path"]): p["count"] for p in seen["paths"]}
    assert counts == {("GET", f"{COMMENT}/me"): 125, ("GET", f"{COMMENT}/stats"): 1}
    # 120 a minute: the 121st to 125th /me and the /stats after them are refused
    assert answers.count(429) == 5 and seen["refused"] == 6
    me = next(p for p in seen["paths"] if p["path"].endswith("/me"))
    assert me["first"] <= me["last"]
    assert client.delete("/_sandbox/requests").json() == {"paths": [], "refused": 0}
    assert client.get("/_sandbox/requests").json() == {"paths": [], "refused": 0}


def test_rate_limiter_refuses_past_the_limit_and_says_when_to_come_back():
    limiter = RateLimiter(window_seconds=60)
    assert all(limiter.hit(("k",), 3) is None for _ in range(3))
    wait = limiter.hit(("k",), 3)
    assert wait is not None and 1 <= wait <= 60
    assert limiter.hit(("other",), 3) is None  # buckets are independent


def test_rate_limiter_window_slides():
    limiter = RateLimiter(window_seconds=0.2)
    assert limiter.hit(("k",), 1) is None
    assert limiter.hit(("k",), 1) is not None
    time.sleep(0.25)
    assert limiter.hit(("k",), 1) is None


def test_clock_frozen_stays_and_advances_on_request():
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    clock = Clock(anchor, frozen=True)
    time.sleep(0.01)
    assert clock.now() == anchor
    clock.advance(90)
    assert (clock.now() - anchor).total_seconds() == 90


def test_clock_refuses_a_naive_anchor():
    with pytest.raises(ValueError, match="timezone-aware"):
        Clock(datetime(2026, 1, 1))


def test_signature_known_answer():
    # RFC 4231-style check with the well-known HMAC-SHA256 "quick brown fox" vector.
    body = b"The quick brown fox jumps over the lazy dog"
    expected = "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    assert sign(body, "key") == expected


class Receiver:
    """A webhook endpoint that answers from a script of status codes, then 200."""

    def __init__(self, *statuses: int) -> None:
        self.script = list(statuses)
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        return httpx.Response(self.script.pop(0) if self.script else 200)


def _dispatcher(receiver: Receiver, **faults) -> WebhookDispatcher:
    injector = FaultInjector(app=None, spec=FaultSpec.from_dict(faults), seed=1)
    return WebhookDispatcher(
        "http://receiver/hook",
        "s3cret",
        faults=injector,
        retry_delay=0.01,
        transport=httpx.MockTransport(receiver),
        concurrency=1,  # strictly in order
    )


def _emit(dispatcher: WebhookDispatcher, n: int) -> None:
    for i in range(n):
        dispatcher.emit(
            "message.send", "maac", {"campaign_id": i}, datetime(2026, 1, 1, tzinfo=UTC)
        )


def test_webhook_is_signed_with_the_idempotency_key_and_user_agent():
    receiver = Receiver()
    dispatcher = _dispatcher(receiver)
    _emit(dispatcher, 1)
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    (request,) = receiver.calls
    body = request.content
    assert (
        request.headers["Service-Signature"]
        == hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    )
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"] and request.headers["Service-Idempotency-Key"]
    envelope = json.loads(body)
    assert envelope == {
        "event": "message.send",
        "timestamp": "2026-01-01T00:00:00+00:00",
        "source": "maac",
        "data": {"campaign_id": 0},
    }


def test_webhook_retries_up_to_three_times_with_the_same_key():
    receiver = Receiver(500, 503, 404, 500)  # four failures: first try plus 3 retries
    dispatcher = _dispatcher(receiver)
    _emit(dispatcher, 1)
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    assert len(receiver.calls) == 4
    assert len({r.headers["Service-Idempotency-Key"] for r in receiver.calls}) == 1
    assert dispatcher.deliveries[0].attempts == [500, 503, 404, 500]
    assert not dispatcher.deliveries[0].delivered


def test_webhook_stops_retrying_once_answered_200():
    receiver = Receiver(500)
    dispatcher = _dispatcher(receiver)
    _emit(dispatcher, 1)
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    assert dispatcher.deliveries[0].attempts == [500, 200]


def test_webhook_duplicate_fault_sends_the_same_event_twice():
    receiver = Receiver()
    dispatcher = _dispatcher(receiver, webhook_dup=1.0)
    _emit(dispatcher, 3)
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    keys = [r.headers["Service-Idempotency-Key"] for r in receiver.calls]
    assert len(keys) == 6 and len(set(keys)) == 3


def test_webhook_reorder_fault_delivers_every_event_out_of_order(monkeypatch):
    """A held event goes as soon as nothing follows it, so the delivery thread starts only
    once all four are queued: on a busy machine it could otherwise find each one alone and
    keep the order, which made this test fail now and then."""
    receiver = Receiver()
    dispatcher = _dispatcher(receiver, webhook_reorder=1.0)
    queued = threading.Event()
    deliver = dispatcher._run
    monkeypatch.setattr(dispatcher, "_run", lambda: queued.wait(5) and deliver())
    _emit(dispatcher, 4)
    queued.set()
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    sent = [json.loads(r.content)["data"]["campaign_id"] for r in receiver.calls]
    assert sorted(sent) == [0, 1, 2, 3] and sent != [0, 1, 2, 3]


def test_a_retried_webhook_holds_only_its_own_slot():
    """The first event is refused once and waits 0.5 s for its retry; with two deliveries in
    flight the three events after it arrive meanwhile, in the order they happened."""
    receiver = Receiver(500)
    dispatcher = WebhookDispatcher(
        "http://receiver/hook",
        "s3cret",
        retry_delay=0.5,
        transport=httpx.MockTransport(receiver),
        concurrency=2,
    )
    _emit(dispatcher, 4)
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    sent = [json.loads(r.content)["data"]["campaign_id"] for r in receiver.calls]
    assert sent == [0, 1, 2, 3, 0]
    assert [d.attempts for d in dispatcher.deliveries] == [[500, 200], [200], [200], [200]]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_webhooks_in_flight_never_exceed_the_concurrency(concurrency):
    in_flight, most = 0, 0

    async def slow_receiver(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return httpx.Response(200)

    dispatcher = WebhookDispatcher(
        "http://receiver/hook",
        "s3cret",
        transport=httpx.MockTransport(slow_receiver),
        concurrency=concurrency,
    )
    _emit(dispatcher, 12)
    assert dispatcher.wait_idle(5)
    dispatcher.close()
    assert most == concurrency
    assert all(d.delivered for d in dispatcher.deliveries)


def test_without_url_nothing_is_queued():
    dispatcher = WebhookDispatcher(None, None, concurrency=1)
    _emit(dispatcher, 1)
    assert dispatcher.deliveries == [] and dispatcher.wait_idle(0.1)


@pytest.mark.parametrize(
    "argv",
    [
        ["--now", "2026-01-01T00:00:00"],
        ["--faults", "error=7"],
        ["--webhook-url", "http://127.0.0.1:9/hook"],
        ["--scale", "huge"],
        ["--webhook-concurrency", "0"],
    ],
)
def test_command_line_refuses_bad_options(argv, monkeypatch, capsys):
    monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err


def test_command_line_takes_every_documented_option():
    args = parse_args(
        [
            "--port",
            "9",
            "--seed",
            "3",
            "--scale",
            "large",
            "--frozen",
            "--now",
            "2026-01-01T00:00:00+09:00",
            "--faults",
            "error=0.1",
            "--webhook-url",
            "http://127.0.0.1:9/h",
            "--webhook-secret",
            "x",
            "--campaign-minutes",
            "360",
            "--webhook-concurrency",
            "1",
        ]
    )
    assert (args.port, args.seed, args.scale, args.frozen) == (9, 3, "large", True)
    assert args.campaign_minutes == 360 and args.webhook_concurrency == 1
    assert parse_args([]).webhook_concurrency == SandboxConfig.webhook_concurrency
    assert args.now.utcoffset().total_seconds() == 9 * 3600 and args.faults.error == 0.1


def test_history_days_puts_the_history_on_the_last_days_and_keeps_the_windows(make_sandbox):
    """`--history-days` (bench/soak.py's short soak): the scale's trigger logs, messages and
    broadcasts on the last N days; the services still serve their whole windows, older days
    empty, and the truth counts the same rows."""
    assert parse_args(["--history-days", "14"]).history_days == 14
    assert parse_args([]).history_days == 365
    for beyond_the_windows in (1, 366):
        with pytest.raises(ValueError, match="history_days must be 2 to 365"):
            SandboxConfig(history_days=beyond_the_windows)
    client = TestClient(make_sandbox(history_days=14), base_url="http://sandbox")
    workspace = client.get("/comment/api/v1/me", headers=READONLY).json()["workspace"]["id"]
    for path, span in (
        (f"comment/{workspace}/trigger_logs", 14),
        ("conversation/default/messages", 15),  # the first day partly
        ("conversation/jp/messages", 15),
    ):
        days = client.get(f"/_sandbox/truth/{path}/days").json()["days"]
        assert len(days) >= 365, path
        held = sorted(day for day, rows in days.items() if rows)
        assert len(held) == span and held[-1] == max(days), (path, held)
    logs = client.get("/comment/api/v1/logs", params={"limit": 1}, headers=READONLY).json()
    assert logs["total"] == sum(
        client.get(f"/_sandbox/truth/comment/{workspace}/trigger_logs/days").json()["days"].values()
    )
