"""The agent inbox into the lake: `conversation/agent_requests/date=D/inbox.parquet` (a row
per request, with its answer) and `conversation/agent_messages/date=D/inbox.parquet` (a row
per message of each request), D being the UTC day the request was first received.

As the webhook compaction does (`pipelines/webhooks/compaction.py`, both on the plumbing of
`pipelines/inbox/compaction.py`): a day is rewritten whole
from the inbox when the inbox holds a newer request or answer of it than its file says
(`inbox_max_request_id`, `inbox_max_answer_id` in the requests file's metadata). The
messages file is written first and the requests file, which carries the watermark, last: a
crash between them leaves the day stale, and the next run rewrites both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date

import pyarrow as pa

from pipelines.agent.inbox import PLACE, inbox_path, open_agent_inbox
from pipelines.agent.reply import HANDOVER, OUTCOMES, Route
from pipelines.agent.request import AgentRequest, NotARequest, parse_request
from pipelines.agent.turns import Inbox, StoredTurn
from pipelines.inbox import compaction as plumbing
from pipelines.inbox.compaction import FILE_NAME, ForeignInbox, storable
from pipelines.lake import Lake
from pipelines.stream import TIMESTAMP, Stream, described

DAY = "The UTC day the receiver first got the request (the partition)."
REQUEST_KEY = described(
    "request_key",
    pa.string(),
    "SHA-256 of the request's canonical JSON: the same turn sent again has the same key.",
)
CONVERSATION_ID = described(
    "conversation_id", pa.int64(), "The conversation, as `conversation.messages` has it."
)
AGENT_REQUESTS = Stream(
    "conversation",
    "agent_requests",
    pa.schema(
        [
            REQUEST_KEY,
            CONVERSATION_ID,
            described("org_uuid", pa.string(), "The organization (one per region)."),
            described("version", pa.string(), "The AI agent API version: `1.0` or `1.1`."),
            described("prompt", pa.string(), "The prompt configured for the agent, if sent."),
            described(
                "member_id", pa.int64(), "The conversation's member (its first participant)."
            ),
            described("channel_id", pa.int64(), "The member's channel."),
            described("channel_type", pa.string(), "The channel's type, e.g. `fb`."),
            described(
                "external_member_id",
                pa.string(),
                "The member's id outside the service (the data hub's member id when the "
                "brand links them).",
            ),
            described("participants", pa.string(), "Every participant, as JSON."),
            described("message_count", pa.int32(), "Messages the request carried."),
            described("received_at", TIMESTAMP, "When the receiver first got it, UTC."),
            described("answered_at", TIMESTAMP, "When its answer was stored, UTC; null: none."),
            described("reply_text", pa.string(), "The answer sent (`reply_text`)."),
            described(
                "handover",
                pa.bool_(),
                f"The answer asks for a human agent (its text holds `{HANDOVER}`).",
            ),
            described(
                "outcome",
                pa.string(),
                "Who answered: `replied` (the reply function, with text), `routed` (the "
                "function, with a handover to a team or user), `default` (no function set), "
                "or the handover because the function `failed`, was `late` or returned "
                f"`not text` ({', '.join(OUTCOMES)}); null while not answered.",
            ),
            described("error", pa.string(), "Why the function's reply was not used."),
            described(
                "handover_team_id",
                pa.int64(),
                "A routed handover's team (the reply function's `handover`); null: none.",
            ),
            described(
                "handover_user_id",
                pa.int64(),
                "A routed handover's user (the reply function's `handover`); null: none.",
            ),
            described(
                "handover_assign_type",
                pa.string(),
                "How a routed handover assigns the member: `case-based` or `permanent`.",
            ),
            described(
                "handover_connection",
                pa.string(),
                "The conversation connection a routed handover is assigned through.",
            ),
            described(
                "latency_ms", pa.float64(), "From receiving it to storing its answer, in ms."
            ),
            described("body", pa.string(), "The request as received, JSON text."),
        ]
    ),
    daily=True,
    key=("request_key",),
    day=DAY,
)
AGENT_MESSAGES = Stream(
    "conversation",
    "agent_messages",
    pa.schema(
        [
            REQUEST_KEY,
            CONVERSATION_ID,
            described("position", pa.int32(), "The message's place in the request, from 1."),
            described("message_uuid", pa.string(), "As `conversation.messages` has it."),
            described("sender_type", pa.string(), "`member`, or who else wrote it."),
            described("sender_id", pa.int64(), "The sender's id."),
            described("message_type", pa.string(), "`text` or `image`."),
            described("text", pa.string(), "The text; empty for an image."),
            described("url", pa.string(), "Version 1.1 images: a public link to the image."),
            described("mime_type", pa.string(), "Version 1.1 images: e.g. `image/png`."),
            described("timestamp", TIMESTAMP, "When the message was sent, UTC."),
        ]
    ),
    daily=True,
    key=("request_key", "position"),
    day=DAY,
)
STREAMS = [AGENT_REQUESTS, AGENT_MESSAGES]
#: Turns decided together: one Arrow table per chunk.
CHUNK_TURNS = 1000
WATERMARKS = ("inbox_max_request_id", "inbox_max_answer_id")


@dataclass
class Compaction(plumbing.Compacted):
    requests: int = 0
    messages: int = 0

    def rewritten(self) -> tuple[Stream, ...]:
        return (AGENT_REQUESTS, AGENT_MESSAGES)


def compact_inbox(lake_root: str, lake: Lake, log: plumbing.Log, warn: plumbing.Log) -> Compaction:
    """The agent inbox compacted into the lake (`compact`), what was done said on `log`;
    nothing where no inbox is there yet. The Dagster asset and the command line's sync both
    run it (`warn`: what every compaction is given; this one has nothing to warn of)."""
    inbox = open_agent_inbox(lake_root, create=False)
    if inbox is None:
        log(f"agent: no inbox at {inbox_path(lake_root)}, nothing to compact")
        return Compaction(inbox=str(inbox_path(lake_root)))
    with inbox:
        done = compact(inbox, lake)
        done.inbox, done.inbox_counts = inbox.location, inbox.counts()
    log(
        f"{AGENT_REQUESTS.relation}: {done.requests} requests and {done.messages} messages "
        f"over {len(done.days)} day(s) rewritten"
    )
    return done


def stale_days(inbox: Inbox, lake: Lake) -> Mapping[date, tuple[int, int]]:
    """Days whose files lack requests or answers the inbox holds, with its newest ids."""
    return plumbing.stale_days(inbox, lake, AGENT_REQUESTS, lambda: _every_stale_day(inbox, lake))


def _every_stale_day(inbox: Inbox, lake: Lake) -> dict[date, tuple[int, int]]:
    """`stale_days` from every landed day's file and the whole inbox."""
    days = plumbing.landed(lake, AGENT_REQUESTS)
    others = plumbing.foreign(inbox.uuid, days)
    if others:
        # A new inbox restarts ids at 1: its watermarks mean nothing beside the old ones.
        raise ForeignInbox(
            f"{lake.uri(lake.stream_dir(AGENT_REQUESTS))} was compacted from agent inbox(es) "
            f"{sorted(others)}, not from {inbox.location} ({inbox.uuid}); move its files and "
            f"{AGENT_MESSAGES.name}'s aside, or point AGENT_INBOX (or SYNC_STORE) at the inbox "
            "they came from"
        )
    landed_tops = {
        day: tuple(int(metadata.get(name, 0)) for name in WATERMARKS)
        for day, metadata in days.items()
    }
    return {
        day: tops
        for day, tops in inbox.day_watermarks().items()
        if tops != landed_tops.get(day, (0, 0))
    }


#: The AI agent receiver's inbox, compacted by a sync and by its sensor's runs.
AGENT_COMPACTION = plumbing.InboxCompaction(
    "agent",
    tuple(STREAMS),
    compact_inbox,
    PLACE,
    holds="turns and answers",
)


def _request_row(turn: StoredTurn, request: AgentRequest | None) -> dict:
    answer = turn.answer
    member = request.member if request else None
    row = {
        "request_key": turn.request_key,
        "received_at": turn.received_at,
        "body": turn.body.decode("utf-8", "backslashreplace"),
        "answered_at": answer.answered_at if answer else None,
        "reply_text": answer.answer.reply_text if answer else None,
        "handover": answer.answer.handover if answer else None,
        "outcome": answer.answer.outcome if answer else None,
        "error": answer.answer.error if answer else None,
        **_route_columns(answer.answer.route if answer else None),
        "latency_ms": (
            (answer.answered_at - turn.received_at).total_seconds() * 1000 if answer else None
        ),
    }
    if request is not None:
        row |= {
            "conversation_id": request.conversation_id,
            "org_uuid": storable(request.org_uuid),
            "version": request.version,
            "prompt": storable(request.prompt),
            "participants": json.dumps(
                request.participants.model_dump(mode="json")["members"], ensure_ascii=True
            ),
            "message_count": len(request.messages),
        }
    if member is not None:
        row |= {
            "member_id": member.member_id,
            "channel_id": member.channel_id,
            "channel_type": storable(member.channel_type),
            "external_member_id": storable(member.external_member_id),
        }
    return row


def _route_columns(route: Route | None) -> dict:
    if route is None:
        return {}
    return {
        "handover_team_id": route.team_id,
        "handover_user_id": route.user_id,
        "handover_assign_type": route.assign_type,
        "handover_connection": route.connection,
    }


def _message_rows(turn: StoredTurn, request: AgentRequest) -> Iterator[dict]:
    for position, message in enumerate(request.messages, 1):
        yield {
            "request_key": turn.request_key,
            "conversation_id": request.conversation_id,
            "position": position,
            "message_uuid": storable(message.message_uuid),
            "sender_type": storable(message.sender_type),
            "sender_id": message.sender_id,
            "message_type": storable(message.message_type),
            "text": storable(message.text),
            "url": storable(message.url),
            "mime_type": storable(message.mime_type),
            "timestamp": message.timestamp,
        }


def _rows(turns: list[StoredTurn]) -> tuple[pa.Table, pa.Table]:
    requests, messages = [], []
    for turn in turns:
        try:
            request, _ = parse_request(turn.body)
        except NotARequest:
            # Stored as a request by an older reader: kept whole, in `body`.
            request = None
        requests.append(_request_row(turn, request))
        if request is not None:
            messages.extend(_message_rows(turn, request))
    return (
        pa.Table.from_pylist(requests, schema=AGENT_REQUESTS.schema),
        pa.Table.from_pylist(messages, schema=AGENT_MESSAGES.schema),
    )


def _compact_day(inbox: Inbox, lake: Lake, day: date, tops: tuple[int, int]) -> tuple[int, int]:
    metadata = plumbing.day_metadata(inbox.uuid, dict(zip(WATERMARKS, tops, strict=True)))
    with (
        lake.writer(AGENT_REQUESTS, FILE_NAME, day, metadata) as requests,
        lake.writer(AGENT_MESSAGES, FILE_NAME, day, metadata) as messages,
    ):
        for chunk in plumbing.chunks(inbox.turns_of(day, tops), CHUNK_TURNS):
            request_table, message_table = _rows(chunk)
            requests.extend([request_table])
            messages.extend([message_table])
    return requests.rows, messages.rows


def compact(inbox: Inbox, lake: Lake) -> Compaction:
    """Rewrite every stale day from the inbox; each file is replaced atomically."""
    done = Compaction()
    newest = inbox.newest()
    for day, tops in sorted(stale_days(inbox, lake).items()):
        requests, messages = _compact_day(inbox, lake, day, tops)
        done.requests += requests
        done.messages += messages
        done.days.append(day)
    plumbing.compacted(lake, AGENT_REQUESTS, inbox, newest)
    return done
