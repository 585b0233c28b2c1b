"""The shared transport: what is retried, how long it waits, what it never leaks."""

import http.server
import json
import ssl
import threading
import time

import httpx
import pydantic
import pytest
import trustme

from pipelines.clients.base import Connection
from pipelines.clients.comment import CommentAutomation, CommentClient
from pipelines.clients.failures import explain
from pipelines.transport import MIN_WAIT, Pacer, Rate, RetryPolicy, ServiceError, Transport
from pipelines.transport.connections import KEEPALIVE_SECONDS

SECRET = "sa_live_CANARY_never_print_me"


def scripted(*answers):
    """An httpx transport answering from a list; each item a Response or an exception."""
    calls: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handle), calls


def client(http_transport, sleeps: list[float] | None = None, **kwargs) -> Transport:
    sleeps = [] if sleeps is None else sleeps
    return Transport(
        "http://service/api/v1",
        {"Authorization": f"Bearer {SECRET}"},
        api_key=SECRET,
        retry=RetryPolicy(attempts=5, sleep=sleeps.append),
        http_transport=http_transport,
        **kwargs,
    )


def error(status: int, code: str = "x", headers=None, retry_after=None) -> httpx.Response:
    body = {"error": {"code": code, "message": f"{code} happened"}}
    if retry_after is not None:
        body["error"]["retry_after"] = retry_after
    return httpx.Response(status, json=body, headers=headers)


OK = httpx.Response(200, json={"ok": True})


@pytest.mark.parametrize(
    "failure",
    [
        error(429, "rate_limited"),
        error(500),
        error(502),
        error(503),
        httpx.ReadTimeout("slow"),
        httpx.RemoteProtocolError("dropped"),
        httpx.Response(200, content=b'{"ok": tr'),  # truncated body
    ],
    ids=["429", "500", "502", "503", "timeout", "dropped", "truncated"],
)
def test_retries_transient_failures_then_succeeds(failure):
    http, calls = scripted(failure, failure, OK)
    with client(http) as transport:
        assert transport.request_json("GET", "/logs") == {"ok": True}
        assert len(calls) == 3
        assert transport.stats.retries == 2 and transport.stats.requests == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_never_retries_client_errors(status):
    http, calls = scripted(error(status, "nope"), OK)
    with client(http) as transport, pytest.raises(ServiceError) as raised:
        transport.request_json("GET", "/logs")
    assert len(calls) == 1
    assert raised.value.status == status and raised.value.code == "nope"


def test_honours_retry_after_header_and_body_and_never_spins_on_zero():
    sleeps: list[float] = []
    http, _ = scripted(
        error(429, headers={"Retry-After": "3"}),
        error(429, retry_after=2),
        error(429, headers={"Retry-After": "0"}),
        OK,
    )
    with client(http, sleeps) as transport:
        transport.request_json("GET", "/logs")
        assert transport.stats.throttled == 3
    assert sleeps[0] >= 3 and sleeps[1] >= 2
    assert sleeps[2] >= MIN_WAIT


def test_a_write_is_not_retried_after_the_service_may_have_acted():
    http, calls = scripted(error(502), OK)
    with client(http) as transport, pytest.raises(ServiceError):
        transport.request_json("POST", "/records", json_body={}, idempotent=False)
    assert len(calls) == 1
    http, calls = scripted(error(429), OK)
    with client(http) as transport:
        transport.request_json("POST", "/records", json_body={}, idempotent=False)
    assert len(calls) == 2


def test_gives_up_after_the_attempts_with_the_service_error():
    http, calls = scripted(error(503, "down"))
    with client(http) as transport, pytest.raises(ServiceError, match="503 down"):
        transport.request_json("GET", "/logs")
    assert len(calls) == 5


def test_the_key_is_in_no_error_message():
    for answer in (error(401, "unauthorized"), error(500), httpx.ConnectError("refused")):
        http, _ = scripted(answer)
        with client(http) as transport, pytest.raises(Exception) as raised:
            transport.request_json("GET", "/logs")
        assert SECRET not in str(raised.value) and SECRET not in repr(raised.value)


def test_pacer_spaces_requests_across_threads():
    pacer = Pacer(Rate(20, per_seconds=1.0), headroom=0.0)
    stamps: list[float] = []
    lock = threading.Lock()

    def worker():
        for _ in range(5):
            pacer.wait()
            with lock:
                stamps.append(time.monotonic())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stamps.sort()
    assert len(stamps) == 20
    # 20 per second, evenly spaced, shared by all threads: the k-th request is let go no
    # sooner than k intervals after the start. (A busy machine only delays a stamp after its
    # turn, so the gaps between stamps say nothing; this bound holds however late they are.)
    assert all(stamp - started >= k * 0.05 for k, stamp in enumerate(stamps))


class Named(pydantic.BaseModel):
    name: str


# (body, the name read): JSON escapes as `json.dumps` writes them, bytes as a service sends.
ODD_TEXTS = {
    "lone high surrogate": (b'"odd \\ud800 text"', "odd \ufffd text"),
    "lone low surrogate": (b'"\\uDC00 first"', "\ufffd first"),
    "two lone ones": (b'"\\udc00\\ud800"', "\ufffd\ufffd"),
    "a pair": (b'"\\ud83d\\ude00"', "\U0001f600"),
    "an escaped backslash": (b'"\\\\ud800"', "\\ud800"),
    "a byte that is not UTF-8": (b'"odd \xff text"', "odd \ufffd text"),
}
DECODERS = {
    "model": lambda transport: transport.get("/named", Named).name,
    "plain types": lambda transport: transport.get("/named", pydantic.TypeAdapter(dict))["name"],
    "request_json": lambda transport: transport.request_json("GET", "/named")["name"],
}


@pytest.mark.parametrize("decoder", DECODERS.values(), ids=DECODERS.keys())
@pytest.mark.parametrize(("text", "read"), ODD_TEXTS.values(), ids=ODD_TEXTS.keys())
def test_text_utf8_cannot_carry_reads_as_the_replacement_character_at_once(decoder, text, read):
    """A lone surrogate (valid JSON) was read as a cut body: asked again until retries ran
    out, then the sync failed; or decoded to a `str` that Arrow and Parquet refuse."""
    http, calls = scripted(httpx.Response(200, content=b'{"name": ' + text + b"}"))
    with client(http) as transport:
        assert decoder(transport) == read
        read.encode("utf-8")
    assert len(calls) == 1


def test_a_lone_surrogate_in_a_page_of_logs_reads_as_the_replacement_character():
    log = {
        "id": "l1",
        "activity_name": "odd \ud800 name",
        "account_id": "acc",
        "trigger": "comment",
        "action": "dm",
        "status": "sent",
        "created_at": "2026-01-01T09:00:00+00:00",
    }
    body = json.dumps({"logs": [log], "total": 1}).encode()
    http, calls = scripted(httpx.Response(200, content=body))
    with client(http) as transport:
        page = CommentClient(transport).log_table(days=1, page=0)
    assert page.logs["activity_name"].to_pylist() == ["odd \ufffd name"]
    assert len(calls) == 1


def test_a_lone_surrogate_in_an_error_reads_as_the_replacement_character():
    body = b'{"error": {"code": "bad", "message": "odd \\ud800 value"}}'
    http, _ = scripted(httpx.Response(400, content=body))
    with client(http) as transport, pytest.raises(ServiceError) as raised:
        transport.request_json("GET", "/named")
    assert "odd \ufffd value" in str(raised.value)


def test_a_cut_body_is_still_asked_again():
    cut = httpx.Response(200, content=b'{"name": "odd \\ud800 te')
    http, calls = scripted(cut, httpx.Response(200, content=b'{"name": "whole"}'))
    with client(http) as transport:
        assert transport.get("/named", Named).name == "whole"
    assert len(calls) == 2


class _Answering(http.server.BaseHTTPRequestHandler):
    """Answers every GET with who answered (`server.name`) and the request line's target."""

    def do_GET(self) -> None:
        body = json.dumps({"via": self.server.name, "target": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def answering():
    """Start a local HTTP server named `name` (HTTPS with `tls`); its port is returned."""
    servers = []

    def start(name: str, tls: ssl.SSLContext | None = None) -> int:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        server.name = name
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


class _Port(http.server.BaseHTTPRequestHandler):
    """Keeps connections alive (HTTP/1.1) and answers with the port the request came from."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = json.dumps({"port": self.client_address[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_connection_idle_for_longer_than_keepalive_seconds_is_not_used_again(no_proxy):
    """A server closes idle connections (uvicorn after 5 s): one it closes just as a request
    goes out on it fails that request with no answer, and a behavior event cannot be sent
    again then. Kept alive a second, a connection never lives long enough to meet that."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with Transport(base, {}, api_key=SECRET) as transport:
            first = transport.request_json("GET", "/")["port"]
            time.sleep(KEEPALIVE_SECONDS + 0.3)
            again = transport.request_json("GET", "/")["port"]
    finally:
        server.shutdown()
        server.server_close()
    assert again != first


@pytest.fixture
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_requests_go_through_the_proxy_the_environment_names_unless_no_proxy_covers_the_host(
    answering, monkeypatch, no_proxy
):
    service, proxy = answering("service"), answering("proxy")
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{proxy}")
    base = f"http://127.0.0.1:{service}/api"

    def ask() -> dict:
        with Transport(base, {}, api_key=SECRET) as transport:
            return transport.request_json("GET", "/named", params={"page": 2})

    assert ask() == {"via": "proxy", "target": f"{base}/named?page=2"}
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert ask() == {"via": "service", "target": "/api/named?page=2"}


def test_an_https_service_is_trusted_as_the_certificate_authorities_of_ssl_cert_file_say(
    answering, monkeypatch, no_proxy, tmp_path
):
    """Read as they are when the connection is made: one is trusted only once named, and
    until then the connection's failure says so, naming the variable."""
    authority = trustme.CA()
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("127.0.0.1").configure_cert(tls)
    base = f"https://127.0.0.1:{answering('service', tls)}/api"
    named = tmp_path / "authorities.pem"
    authority.cert_pem.write_to_path(str(named))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    def ask() -> dict:
        retry = RetryPolicy(attempts=1, sleep=lambda seconds: None)
        with Transport(base, {}, api_key=SECRET, retry=retry) as transport:
            return transport.request_json("GET", "/named")

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(httpx.ConnectError) as raised:
        ask()
    connection = Connection(
        name="default", base_url=base, api_key=SECRET, base_url_from="COMMENT_AUTOMATION_URL"
    )
    told = explain(CommentAutomation(connections=[connection]), connection, raised.value)
    assert "certificate is not trusted" in told, told
    assert "SSL_CERT_FILE" in told and "COMMENT_AUTOMATION_URL" in told
    monkeypatch.setenv("SSL_CERT_FILE", str(named))
    assert ask() == {"via": "service", "target": "/api/named"}


def test_the_seconds_requests_wait_for_the_rate_budget_are_counted():
    """Three requests at two a second: the first goes at once, the others wait their slot
    (about a second in all, less what the requests themselves took); the figure reaches each
    materialization's metadata."""
    http, calls = scripted(OK)
    with Transport(
        "http://paced-service/api/v1",  # a pacer of its own: pacers are per key and address
        {"Authorization": f"Bearer {SECRET}"},
        api_key=SECRET,
        rates={"default": Rate(2, per_seconds=1.0)},
        http_transport=http,
    ) as transport:
        for _ in range(3):
            transport.request_json("GET", "/logs")
    assert len(calls) == 3
    assert 0.5 <= transport.stats.waited <= 1.1, transport.stats.waited
    assert transport.stats.as_metadata()["budget_wait_seconds"] == round(transport.stats.waited, 2)
