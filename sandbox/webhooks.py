"""Webhook delivery, as the data hub does it (customer data hub spec, sections 5 and 6).

Each event is POSTed as JSON to the configured URL with `Service-Signature` (hex HMAC-SHA256
of the raw body, keyed with the UTF-8 secret), `Service-Idempotency-Key` (one id per event,
the same on every retry) and `User-Agent`. An answer other than 200, or none within 5 s,
is retried up to 3 times. Deliveries run on a thread of their own, so a slow receiver never
slows the API, at most `concurrency` at a time (`SandboxConfig.webhook_concurrency`), taken
in the order the events happened: one slow or retried event holds only its own slot. With
one at a time they arrive in order. Faults may duplicate an event (sent twice, one after the
other) or hold it back until the next one has been delivered.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import queue
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import httpx

from sandbox.clock import iso
from sandbox.encoding import json_bytes
from sandbox.faults import FaultInjector

USER_AGENT = "DataHub-Webhooks/1.0 (sandbox)"
ANSWER_DEADLINE_SECONDS = 5.0
MAX_RETRIES = 3


def sign(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


@dataclass
class Delivery:
    idempotency_key: str
    event: str
    body: bytes
    attempts: list[int | str] = field(default_factory=list)  # status codes, or error names
    delivered: bool = False

    def summary(self) -> dict:
        return {
            "idempotency_key": self.idempotency_key,
            "event": self.event,
            "attempts": self.attempts,
            "delivered": self.delivered,
            "envelope": json.loads(self.body),
        }


class WebhookDispatcher:
    def __init__(
        self,
        url: str | None,
        secret: str | None,
        *,
        concurrency: int,
        faults: FaultInjector | None = None,
        retry_delay: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"webhook concurrency must be at least 1, not {concurrency}")
        self.url = url
        self._concurrency = concurrency
        self._secret = secret
        self._faults = faults
        self._retry_delay = retry_delay
        self._transport = transport
        self._queue: queue.Queue[Delivery | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._outstanding = 0
        self._idle = threading.Event()
        self._idle.set()
        self.deliveries: list[Delivery] = []

    def attach_faults(self, faults: FaultInjector) -> None:
        self._faults = faults

    @property
    def enabled(self) -> bool:
        return bool(self.url and self._secret)

    def emit(self, event: str, source: str, data: dict, at: datetime, **extra) -> None:
        """Queue one event; `extra` holds envelope fields such as `event_id` of `*.sync`."""
        if not self.enabled:
            return
        envelope = {"event": event, "timestamp": iso(at), "source": source, **extra, "data": data}
        body = json_bytes(envelope)
        delivery = Delivery(str(uuid.uuid4()), event, body)
        with self._lock:
            self.deliveries.append(delivery)
            self._outstanding += 1
            self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
                self._thread.start()
        self._queue.put(delivery)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until every queued event has been delivered or given up on."""
        return self._idle.wait(timeout)

    def pending(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)

    def _run(self) -> None:
        asyncio.run(self._deliver_forever())

    async def _deliver_forever(self) -> None:
        slots = asyncio.Semaphore(self._concurrency)
        running: set[asyncio.Task] = set()
        held: Delivery | None = None

        def start(*group: Delivery) -> None:
            """Deliver `group` one after the other in a slot of its own."""
            task = asyncio.create_task(self._send_group(client, slots, group))
            running.add(task)
            task.add_done_callback(running.discard)

        async with httpx.AsyncClient(
            transport=self._transport, timeout=ANSWER_DEADLINE_SECONDS
        ) as client:
            while True:
                await slots.acquire()  # released by the group that takes it
                if held is not None and self._queue.empty():
                    start(held)  # nothing came after it: release it now
                    held = None
                    continue
                delivery = await self._next()
                if delivery is None:
                    slots.release()
                    await asyncio.gather(*running)
                    return
                if held is None and self._roll("webhook_reorder"):
                    held = delivery
                    slots.release()
                    continue
                group = [delivery]
                if self._roll("webhook_dup"):
                    with self._lock:
                        self._outstanding += 1
                    group.append(delivery)
                if held is not None:
                    group.append(held)
                    held = None
                start(*group)

    async def _next(self) -> Delivery | None:
        """The next queued event; a thread waits for one only when none is queued."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return await asyncio.to_thread(self._queue.get)

    async def _send_group(
        self, client: httpx.AsyncClient, slots: asyncio.Semaphore, group: tuple[Delivery, ...]
    ) -> None:
        try:
            for delivery in group:
                await self._send(client, delivery)
        finally:
            slots.release()

    def _roll(self, fault: str) -> bool:
        return self._faults is not None and self._faults.roll(getattr(self._faults.spec, fault))

    async def _send(self, client: httpx.AsyncClient, delivery: Delivery) -> None:
        try:
            await self._attempts(client, delivery)
        finally:
            with self._lock:
                self._outstanding -= 1
                if self._outstanding <= 0:
                    self._outstanding = 0
                    self._idle.set()

    async def _attempts(self, client: httpx.AsyncClient, delivery: Delivery) -> None:
        headers = {
            "Content-Type": "application/json",
            "Service-Signature": sign(delivery.body, self._secret or ""),
            "Service-Idempotency-Key": delivery.idempotency_key,
            "User-Agent": USER_AGENT,
        }
        for attempt in range(1 + MAX_RETRIES):
            if attempt:
                await asyncio.sleep(self._retry_delay * attempt)
            try:
                answer = await client.post(self.url, content=delivery.body, headers=headers)
                delivery.attempts.append(answer.status_code)
                if answer.status_code == 200:
                    delivery.delivered = True
                    return
            except httpx.HTTPError as exc:
                delivery.attempts.append(type(exc).__name__)
