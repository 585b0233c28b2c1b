"""The conversation service calling the brand's AI agent (conversation service spec, sections 2,
4, 5, 8 and 9), as the service does for every message a member sends.

A turn is one POST of the AI agent request to the configured URL, with
`Authorization: Bearer <token>`: the member's conversation up to and including the new
message (its last `TURN_MESSAGES`, oldest first) in the region's version, and the region's
prompt when it has one. Messages carry what the backup CSV carries (`Messages.backup_rows`),
so a turn joins the messages a sync lands. Calls run on a thread of their own, up to
`IN_FLIGHT` at once, so a slow agent slows neither the API nor the other calls. Every call is
recorded: the ground truth of `GET /_sandbox/agent` and of the `agent_*` counts of
`/_sandbox/truth` (sandbox/app.py).
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
import numpy as np

from sandbox.conversation.messages import (
    BACKUP_COLUMNS,
    CONVERSATION_GAP,
    MESSAGE_TYPES,
    SENDER_TYPES,
)
from sandbox.encoding import json_bytes

if TYPE_CHECKING:
    from sandbox.context import Sandbox
    from sandbox.conversation.directory import Directory
    from sandbox.conversation.members import Members
    from sandbox.conversation.messages import Messages

VERSIONS = ("1.0", "1.1")  # spec section 9
HANDOVER = "<HUMAN_HANDOVER>"  # in a reply_text: the agent hands the member to a person
ANSWER_DEADLINE_SECONDS = 45.0  # spec section 8
# Choices the spec leaves open (sandbox/README.md lists them).
TURN_MESSAGES = 20
IN_FLIGHT = 20
MAX_RETRIES = 2
TICK_SECONDS = 1.0
MEMBER = SENDER_TYPES.index("member")
IMAGE = MESSAGE_TYPES.index("image")
MESSAGE_FIELDS = ("message_type", "message_uuid", "sender_id", "sender_type", "text", "timestamp")


@dataclass
class AgentCall:
    region: str
    body: bytes
    attempts: list[int | str] = field(default_factory=list)  # status codes, or error names
    reply_text: str | None = None  # of a 200 answering `{reply_text: string}`
    seconds: float | None = None  # from the first attempt to the outcome; None while in flight

    @property
    def answered(self) -> bool:
        return self.reply_text is not None

    @property
    def handover(self) -> bool:
        return self.answered and HANDOVER in self.reply_text

    def summary(self) -> dict:
        return {
            "region": self.region,
            "request": json.loads(self.body),
            "attempts": list(self.attempts),
            "reply_text": self.reply_text,
            "handover": self.handover,
            "answered": self.answered,
            "seconds": self.seconds,
        }


class AgentCaller:
    """Sends the turns of every region to the one agent URL and keeps each call's record.

    An attempt without an answer (a transport error, none within 45 s) or answered 5xx is
    retried with the same body, `retry_delay` seconds later, at most `MAX_RETRIES` times;
    any other answer is final.
    """

    def __init__(self, url: str, token: str, retry_delay: float = 1.0) -> None:
        self.url = url
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self._retry_delay = retry_delay
        self._queue: queue.Queue[AgentCall | None] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._outstanding = 0
        self._idle = threading.Event()
        self._idle.set()
        self._watched: list[Callable[[], None]] = []
        self._ticker: threading.Thread | None = None
        self._stopped = threading.Event()
        self.calls: list[AgentCall] = []

    def send(self, region: str, body: dict) -> None:
        """Queue one turn."""
        call = AgentCall(region, json_bytes(body))
        with self._lock:
            self.calls.append(call)
            self._outstanding += 1
            self._idle.clear()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="agent-calls", daemon=True)
                self._thread.start()
        self._queue.put(call)

    def watch(self, catch_up: Callable[[], None]) -> None:
        """Call `catch_up` every `TICK_SECONDS` from now on: on a live clock members write
        whether or not anyone asks the API, and the service answers them as they come."""
        with self._lock:
            self._watched.append(catch_up)
            if self._ticker is None:
                self._ticker = threading.Thread(target=self._tick, name="agent-clock", daemon=True)
                self._ticker.start()

    def wait_idle(self, timeout: float) -> bool:
        """Block until every queued call has been answered or given up on."""
        return self._idle.wait(timeout)

    def counts(self, region: str) -> dict[str, int]:
        """The region's figures of `/_sandbox/truth`."""
        calls = [call for call in self.calls if call.region == region]
        return {
            "agent_calls": len(calls),
            "agent_answered": sum(call.answered for call in calls),
            "agent_handovers": sum(call.handover for call in calls),
        }

    def close(self) -> None:
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)

    def _tick(self) -> None:
        while not self._stopped.wait(TICK_SECONDS):
            for catch_up in self._watched:
                catch_up()

    def _run(self) -> None:
        asyncio.run(self._call_forever())

    async def _call_forever(self) -> None:
        slots = asyncio.Semaphore(IN_FLIGHT)
        # No per-phase limit of httpx's: the spec's deadline is for the whole answer (_attempt).
        async with httpx.AsyncClient(timeout=None) as client, asyncio.TaskGroup() as running:
            while (call := await asyncio.to_thread(self._queue.get)) is not None:
                await slots.acquire()
                running.create_task(self._call(client, call, slots))

    async def _call(
        self, client: httpx.AsyncClient, call: AgentCall, slots: asyncio.Semaphore
    ) -> None:
        started = time.monotonic()
        try:
            for attempt in range(1 + MAX_RETRIES):
                if attempt:
                    await asyncio.sleep(self._retry_delay)
                if not await self._attempt(client, call):
                    break
        finally:
            call.seconds = round(time.monotonic() - started, 3)
            slots.release()
            with self._lock:
                self._outstanding -= 1
                if self._outstanding == 0:
                    self._idle.set()

    async def _attempt(self, client: httpx.AsyncClient, call: AgentCall) -> bool:
        """One POST; whether it failed in a way worth another (no answer, or a 5xx)."""
        try:
            async with asyncio.timeout(ANSWER_DEADLINE_SECONDS):
                answer = await client.post(self.url, content=call.body, headers=self._headers)
        except (httpx.HTTPError, TimeoutError) as exc:
            call.attempts.append(type(exc).__name__)
            return True
        call.attempts.append(answer.status_code)
        if answer.status_code == 200:
            call.reply_text = _reply_text(answer)
        return answer.status_code >= 500


class AgentTurns:
    """What one region sends its agent: a turn per live member message, in order of arrival.

    A `1.0` agent never receives `url` or `mime_type` (spec section 9), so its turns leave
    image messages out, and a member's image starts no turn: it would show it nothing new.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        region: str,
        directory: Directory,
        members: Members,
        messages: Messages,
        caller: AgentCaller,
    ) -> None:
        config = sandbox.config
        self.region = region
        self.version = config.agent_versions.get(region)
        if self.version not in VERSIONS:
            raise ValueError(
                f"agent_versions[{region!r}] is {self.version!r}, not one of {VERSIONS}"
            )
        self._prompt = config.agent_prompts.get(region)
        self._org_uuid = org_uuid(sandbox, region)
        self._directory = directory
        self._members = members
        self._messages = messages
        self._caller = caller
        self._lock = threading.Lock()
        self._anchor = sandbox.clock.anchor
        self._next = messages.rows_at(self._anchor)  # live rows follow the history

    def catch_up(self) -> None:
        """Send a turn for each member message that arrived since the last time."""
        # One at a time, so the turns leave in order of arrival and each message starts one.
        with self._lock:
            table = self._messages.table
            start, self._next = self._next, table.size
            written = start + np.flatnonzero(table["kind"][start : self._next] == MEMBER)
            for row in written.tolist():
                body = self.turn(row)
                if body is not None:
                    self._caller.send(self.region, body)

    def replay(self, count: int) -> int:
        """Send the turns of the last `count` member messages of the history, oldest first:
        what the service sent for them, for a frozen sandbox (the demo's), where no member
        writes. How many were sent (a 1.0 agent is sent no image)."""
        table, history = self._messages.table, self._messages.rows_at(self._anchor)
        written = np.flatnonzero(table["kind"][:history] == MEMBER)[-count:] if count else []
        bodies = [body for row in written.tolist() if (body := self.turn(row)) is not None]
        for body in bodies:
            self._caller.send(self.region, body)
        return len(bodies)

    def counts(self) -> dict[str, int]:
        return self._caller.counts(self.region)

    def turn(self, row: int) -> dict | None:
        """The AI agent request (spec section 2) for the message at `row`; None when this
        agent cannot read it."""
        table = self._messages.table
        if self.version == "1.0" and table["mtype"][row] == IMAGE:
            return None
        messages = self._messages.backup_rows(self._conversation_rows(row))
        prompt = {"prompt": self._prompt} if self._prompt else {}
        return {
            "conversation_id": int(table["conversation"][row]),
            "messages": [_message(dict(zip(BACKUP_COLUMNS, m, strict=True))) for m in messages],
            "org_uuid": self._org_uuid,
            "participants": {"members": [self._participant(int(table["member"][row]))]},
            **prompt,
            "version": self.version,
        }

    def _conversation_rows(self, row: int) -> np.ndarray:
        """Rows of the conversation of `row` up to it that this agent can read, oldest first,
        the last `TURN_MESSAGES` at most.

        Searched back from `row` over a window that doubles until it holds enough of them or
        the conversation's start, which no message of it precedes by under a day (messages.py).
        """
        table = self._messages.table
        ts, conversation = table["ts"][: row + 1], table["conversation"][: row + 1]
        span = 2 * CONVERSATION_GAP
        while True:
            lo = int(np.searchsorted(ts, ts[row] - span))
            found = lo + np.flatnonzero(conversation[lo:] == conversation[row])
            readable = found[table["mtype"][found] != IMAGE] if self.version == "1.0" else found
            started = ts[found[0]] - CONVERSATION_GAP >= ts[row] - span
            if len(readable) >= TURN_MESSAGES or lo == 0 or started:
                return readable[-TURN_MESSAGES:]
            span *= 2

    def _participant(self, member_row: int) -> dict:
        channel = self._directory.channels[int(self._members.table["channel"][member_row])]
        external = self._members.external_ids[member_row]
        return {
            "channel_id": channel["id"],
            # The platform's id of the member, as create_or_update_channel_member takes it.
            "channel_member_id": external,
            "channel_type": channel["type"],
            "external_member_id": external,
            "member_id": self._members.member_id(member_row),
        }


def org_uuid(sandbox: Sandbox, region: str) -> str:
    """The region's organization, as the agent knows it: the same for the same seed."""
    rng = np.random.default_rng(sandbox.seed_for("conversation", region, "org_uuid"))
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _message(row: dict) -> dict:
    """A message object of the request from its backup CSV row: images carry `url` and
    `mime_type` (only `1.1` turns hold images)."""
    message = {name: row[name] for name in MESSAGE_FIELDS}
    if row["message_type"] == "image":
        message |= {"url": row["url"], "mime_type": row["mime_type"]}
    return message


def _reply_text(answer: httpx.Response) -> str | None:
    """`reply_text` of an answer; None when the answer is not `{reply_text: string}`."""
    try:
        body = answer.json()
    except ValueError:
        return None
    reply = body.get("reply_text") if isinstance(body, dict) else None
    return reply if isinstance(reply, str) else None
