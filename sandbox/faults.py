"""Faults on demand: server errors, 429 bursts, slow answers, dropped connections, truncated
bodies, and duplicated or reordered webhook deliveries.

Spec string (for `--faults` and `PUT /_sandbox/faults`), comma-separated `name=value`:

    error=0.05          share of requests answered 500, 502 or 503
    rate=0.05           share of requests answered 429 (a burst starts with that request)
    burst=4             length of a 429 burst, in requests of the same key (default 1)
    retry_after=1       seconds announced by fault 429s (body `retry_after` and `Retry-After`)
    slow=0.05           share of requests answered late
    delay=1.5           how late, in seconds (default 1.0)
    drop=0.02           share of connections closed before the body is sent
    truncate=0.02       share of bodies cut in half
    posts_502=0.3       share of recent-posts calls that fail at the platform (502)
    webhook_dup=0.1     share of webhook events delivered twice
    webhook_reorder=0.1 share of webhook events held back and delivered after the next one

Faults never touch `/_sandbox/` (the ground truth) or `openapi.json`.
"""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import asdict, dataclass, fields

import httpx

from sandbox.encoding import json_bytes

SHARES = (
    "error",
    "rate",
    "slow",
    "drop",
    "truncate",
    "posts_502",
    "webhook_dup",
    "webhook_reorder",
)


@dataclass
class FaultSpec:
    error: float = 0.0
    rate: float = 0.0
    burst: int = 1
    retry_after: int = 1
    slow: float = 0.0
    delay: float = 1.0
    drop: float = 0.0
    truncate: float = 0.0
    posts_502: float = 0.0
    webhook_dup: float = 0.0
    webhook_reorder: float = 0.0

    @classmethod
    def parse(cls, text: str | None) -> FaultSpec:
        spec = cls()
        for item in filter(None, (part.strip() for part in (text or "").split(","))):
            name, sep, value = item.partition("=")
            spec.set(name.strip(), value.strip() if sep else "")
        return spec

    @classmethod
    def from_dict(cls, values: dict) -> FaultSpec:
        spec = cls()
        for name, value in values.items():
            spec.set(name, value)
        return spec

    def set(self, name: str, value: object) -> None:
        known = {f.name: f.type for f in fields(self)}
        if name not in known:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(known)}")
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError(f"fault {name!r} needs a number, got {value!r}") from None
        if name in SHARES and not 0.0 <= number <= 1.0:
            raise ValueError(f"fault {name!r} is a share and must be within 0..1, got {number}")
        if number < 0:
            raise ValueError(f"fault {name!r} must not be negative, got {number}")
        setattr(self, name, int(number) if name in ("burst", "retry_after") else number)

    def as_dict(self) -> dict:
        return asdict(self)


class ConnectionDropped(httpx.RemoteProtocolError):
    """Raised inside the app to cut the connection.

    In-process (httpx's ASGI transport) the caller sees this transport error; under uvicorn the
    server closes the socket after the status line, and the caller sees the same error class.
    """


class FaultInjector:
    """ASGI middleware that applies the current FaultSpec to service requests."""

    def __init__(self, app, spec: FaultSpec, seed: int) -> None:
        self.app = app
        self.spec = spec
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._bursts: dict[bytes, int] = {}
        self.injected: dict[str, int] = {}

    def roll(self, share: float) -> bool:
        with self._lock:
            return share > 0 and self._random.random() < share

    def _count(self, kind: str) -> None:
        with self._lock:
            self.injected[kind] = self.injected.get(kind, 0) + 1

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path.startswith("/_sandbox") or path.endswith("openapi.json"):
            await self.app(scope, receive, send)
            return
        spec = self.spec
        if self.roll(spec.slow):
            self._count("slow")
            await asyncio.sleep(spec.delay)
        key = _credential(scope)
        limited = self._in_burst(key)
        if not limited and self.roll(spec.rate):
            self._start_burst(key)
            limited = True
        if limited:
            self._count("rate")
            await _answer(send, 429, "rate_limited", "too many requests (injected)", spec)
            return
        if self.roll(spec.error):
            status = self._random.choice((500, 502, 503))
            self._count(f"error_{status}")
            await _answer(send, status, "server_error", "server error (injected)", spec)
            return
        if self.roll(spec.drop):
            self._count("drop")
            await send({"type": "http.response.start", "status": 200, "headers": []})
            raise ConnectionDropped("server closed the connection (injected)")
        if self.roll(spec.truncate):
            self._count("truncate")
            await self.app(scope, receive, _truncating(send))
            return
        await self.app(scope, receive, send)

    def _in_burst(self, key: bytes) -> bool:
        with self._lock:
            left = self._bursts.get(key, 0)
            if left > 0:
                self._bursts[key] = left - 1
                return True
            return False

    def _start_burst(self, key: bytes) -> None:
        with self._lock:
            self._bursts[key] = max(0, self.spec.burst - 1)


def _credential(scope) -> bytes:
    for name, value in scope.get("headers", ()):
        if name in (b"authorization", b"apikey"):
            return value
    return b""


async def _answer(send, status: int, code: str, message: str, spec: FaultSpec) -> None:
    error: dict = {"code": code, "message": message}
    headers = [(b"content-type", b"application/json")]
    if status == 429:
        error["retry_after"] = spec.retry_after
        headers.append((b"retry-after", str(spec.retry_after).encode()))
    body = json_bytes({"error": error})
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _truncating(send):
    """Pass the head through, then half of the body, then cut the connection."""
    state = {"buffer": b""}

    async def wrapped(message) -> None:
        if message["type"] == "http.response.start":
            await send(message)
            return
        state["buffer"] += message.get("body", b"")
        if message.get("more_body"):
            return
        body = state["buffer"]
        half = body[: len(body) // 2]
        await send({"type": "http.response.body", "body": half, "more_body": True})
        raise ConnectionDropped("response body truncated (injected)")

    return wrapped
