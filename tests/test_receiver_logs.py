"""Nothing a caller sends reaches either receiver's output (`pipelines/inbox/serving.py`): a canary
in the query string, a header and the body of calls accepted and refused, each receiver run
as a user runs it (`python -m pipelines.webhooks`, `python -m pipelines.agent`), its stdout
and stderr read after it stops. The access lines are there, of the receiver's words."""

import socket
from urllib.parse import urlsplit

import httpx

from pipelines.agent.receiver import AGENT_PATH
from pipelines.webhooks.receiver import WEBHOOK_PATH
from tests.agent.conftest import TOKEN, body_of, message, turn
from tests.servers import ServerProcess, spawner
from tests.webhooks.conftest import SECRET, envelope, signed

CANARY = "canary-5e7b1d"
HEADERS = {"X-Trace": CANARY, "User-Agent": CANARY, "X-Forwarded-For": CANARY}
QUERY = {"token": CANARY}
OVER_A_MIB = (CANARY * ((1 << 20) // len(CANARY) + 1)).encode()


def call(url: str, body: bytes, headers: dict[str, str]) -> int:
    answer = httpx.post(url, content=body, headers=HEADERS | headers, params=QUERY, timeout=30)
    return answer.status_code


def raw(url: str, request: bytes) -> None:
    """Bytes no HTTP client sends: a request line and header uvicorn cannot parse."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as connection:
        connection.sendall(request)
        connection.recv(4096)


def others(url: str) -> list[int]:
    """Calls every receiver refuses the same way: another path, another method, bytes that
    are not HTTP."""
    base = url.rsplit("/", 2)[0]
    statuses = [
        call(f"{base}/{CANARY}", b"{}", {}),
        httpx.get(url, headers=HEADERS, params=QUERY, timeout=30).status_code,
    ]
    raw(url, f"POST /?{CANARY} HTTP/1.1\r\nHost: x\r\n{CANARY} {CANARY}\r\n\r\n".encode())
    raw(url, f"{CANARY} /{CANARY} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return statuses


def stopped(server: ServerProcess) -> str:
    server.process.terminate()
    server.process.wait(timeout=30)
    return server.log.read_text()


def test_the_webhook_receiver_logs_nothing_a_caller_sent(tmp_path):
    body = envelope(data={"line_uid": CANARY})
    bad_timestamp = envelope(timestamp=CANARY)  # its reason quotes the timestamp
    env = {"WEBHOOK_SECRET": SECRET, "LAKE_ROOT": str(tmp_path / "lake")}
    with spawner("pipelines.webhooks", WEBHOOK_PATH, tmp_path) as spawn:
        server = spawn(env)
        statuses = [
            call(server.url, body, signed(body, CANARY)),
            call(server.url, body, signed(body, CANARY)),  # a duplicate
            call(server.url, body, signed(body, CANARY) | {"Service-Signature": CANARY}),
            call(server.url, bad_timestamp, signed(bad_timestamp, f"{CANARY}-2")),
            call(server.url, OVER_A_MIB, signed(OVER_A_MIB, f"{CANARY}-3")),
            *others(server.url),
        ]
        output = stopped(server)
    assert statuses == [200, 200, 401, 400, 413, 404, 405]
    assert CANARY not in output, output
    for line in [
        f"POST {WEBHOOK_PATH} 200",
        f"POST {WEBHOOK_PATH} 401",
        f"POST {WEBHOOK_PATH} 400",
        f"POST {WEBHOOK_PATH} 413",
        "POST (another path) 404",
        f"GET {WEBHOOK_PATH} 405",
        "rejected a webhook (400)",
    ]:
        assert line in output, output


def test_the_agent_logs_nothing_a_caller_sent(tmp_path):
    body = body_of(turn(messages=[message(1, CANARY)], prompt=CANARY))
    authorized = {"Authorization": f"Bearer {TOKEN}"}
    env = {
        "AGENT_TOKEN": TOKEN,
        "AGENT_REPLY": "tests.agent.replies:fail_quoting",  # its error quotes the member
        "LAKE_ROOT": str(tmp_path / "lake"),
        "WAREHOUSE_PATH": str(tmp_path / "warehouse.duckdb"),
    }
    with spawner("pipelines.agent", AGENT_PATH, tmp_path) as spawn:
        server = spawn(env)
        statuses = [
            call(server.url, body, authorized),
            call(server.url, body, authorized),  # the same turn again
            call(server.url, body, {"Authorization": f"Bearer {CANARY}"}),
            call(server.url, body_of({CANARY: CANARY}), authorized),
            call(server.url, CANARY.encode(), authorized),
            call(server.url, OVER_A_MIB, authorized),
            *others(server.url),
        ]
        output = stopped(server)
    assert statuses == [200, 200, 401, 400, 400, 413, 404, 405]
    assert CANARY not in output, output
    for line in [
        f"POST {AGENT_PATH} 200",
        f"POST {AGENT_PATH} 401",
        f"POST {AGENT_PATH} 400",
        f"POST {AGENT_PATH} 413",
        "POST (another path) 404",
        f"GET {AGENT_PATH} 405",
        "handed over (failed)",
    ]:
        assert line in output, output


def test_a_traceback_is_told_by_its_class_alone():
    """uvicorn logs an exception it meets with its traceback, whose text may quote a request."""
    import logging

    from pipelines.inbox.serving import LOGGING, NoTraceback

    try:
        raise ValueError(f"illegal request line: b'POST /?token={CANARY}'")
    except ValueError as error:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, "", 0, "%s", ("ASGI",), None)
        record.exc_info = (type(error), error, error.__traceback__)
    formatter = LOGGING["formatters"]["line"]
    line = formatter["()"](formatter["fmt"]).format(record) if NoTraceback().filter(record) else ""
    assert line.endswith("ASGI (ValueError)") and CANARY not in line
