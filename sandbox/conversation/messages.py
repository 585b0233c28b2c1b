"""Messages of one region: a year of history before the anchor, then live arrivals.

Held as numpy columns sorted by time (a million rows are a few arrays); the text of a row is
made only when a backup streams it. Conversations are a member's runs of messages without a
day of silence, numbered in order of their start.
"""

from __future__ import annotations

import math
import threading
from datetime import datetime

import numpy as np

from sandbox.context import Sandbox
from sandbox.conversation.directory import Directory
from sandbox.conversation.members import Members
from sandbox.conversation.table import Table, stamps
from sandbox.fakedata import MESSAGE_TEXTS

DAY = 86400
YEAR = 365 * DAY
CONVERSATION_GAP = DAY
LIVE_CHUNK = 1024  # live message k is row k % LIVE_CHUNK of chunk k // LIVE_CHUNK

# Not shown beyond `member` (spec section 2): agents write as `user`, AI agents as `bot`.
SENDER_TYPES = ("member", "user", "bot")
MESSAGE_TYPES = ("text", "image")
SENDER_SHARES = (0.58, 0.30, 0.12)
IMAGE_SHARES = (0.07, 0.02, 0.02)  # per sender type: members send photos more than agents

MEMBER_TEXTS = (
    *MESSAGE_TEXTS[:14],
    'Hi, I ordered 2 items, but only 1 arrived.\nOrder "A-1182", can you check?',
    "返品したいのですが、\n手続きを教えてください。",
    "Size M, color: navy; qty 2",
)
AGENT_TEXTS = (
    "Thanks for reaching out! Let me check that for you.",
    "I've updated your delivery address.\nAnything else I can help with?",
    "Sure, size M is in stock. Shall I reserve one?",
    "お問い合わせありがとうございます。確認いたします。",
    "您好，請稍等，我幫您查詢。",
    "Your refund was issued; it takes 3-5 business days.",
)
BOT_TEXTS = (
    *MESSAGE_TEXTS[14:],
    "自動応答：営業時間は10時〜19時です。",
    'Hi! I\'m the virtual assistant. Type "agent" to talk to a person.',
)
TEXTS = (*MEMBER_TEXTS, *AGENT_TEXTS, *BOT_TEXTS)
TEXT_RANGES = (
    (0, len(MEMBER_TEXTS)),
    (len(MEMBER_TEXTS), len(MEMBER_TEXTS) + len(AGENT_TEXTS)),
    (len(MEMBER_TEXTS) + len(AGENT_TEXTS), len(TEXTS)),
)

# Local-time rhythm: quiet nights, an evening peak, busier weekends (Monday first).
HOUR_WEIGHTS = np.array(
    [
        0.35,
        0.2,
        0.12,
        0.08,
        0.06,
        0.08,
        0.15,
        0.3,
        0.55,
        0.8,
        0.95,
        1.0,
        1.05,
        1.0,
        0.95,
        0.95,
        1.0,
        1.1,
        1.3,
        1.55,
        1.7,
        1.6,
        1.2,
        0.7,
    ]
)
WEEKDAY_WEIGHTS = np.array([0.9, 0.9, 0.95, 0.95, 1.05, 1.3, 1.25])

BACKUP_COLUMNS = (
    "message_uuid",
    "conversation_id",
    "channel_id",
    "member_id",
    "sender_type",
    "sender_id",
    "message_type",
    "text",
    "url",
    "mime_type",
    "timestamp",
)
MEDIA_URL = "https://media.sandbox.example/conversation"


class Messages:
    def __init__(
        self, sandbox: Sandbox, region: str, directory: Directory, members: Members
    ) -> None:
        self._sandbox = sandbox
        self._members = members
        self._lock = threading.Lock()
        self._anchor = int(sandbox.clock.anchor.timestamp())
        self._seed = sandbox.seed_for("conversation", region, "messages")
        self._media = f"{MEDIA_URL}/{region}"
        self._channel_ids = np.array([c["id"] for c in directory.channels])
        self._member_channels = members.table["channel"].copy()
        self._writers = np.array(directory.user_ids("human")), np.array(directory.user_ids("ai"))
        self._member_weights = members.activity / members.activity.sum()
        self._text_weights = [_text_weights(region, *span) for span in TEXT_RANGES]
        rng = np.random.default_rng(self._seed)
        rows = self._draw(rng, sandbox.config.sizes.messages)
        rows["ts"] = self._history_times(rng, directory.channel_offsets[rows["channel"]])
        order = np.argsort(rows["ts"], kind="stable")
        rows = {name: column[order] for name, column in rows.items()}
        first_conversation = int(rng.integers(1, 9)) * 10_000_000
        rows["conversation"], first, self._last = _conversations(
            rows, members.size, first_conversation
        )
        self._next_conversation = int(rows["conversation"].max(initial=first_conversation)) + 1
        self.table = Table(rows)
        self._history = self.table.size
        self._live = 0
        members.settle_created(first)

    # --- live traffic

    def catch_up(self) -> None:
        """Add the live messages due by now (none when frozen)."""
        due = self._due(self._sandbox.clock.now())
        with self._lock:
            if due > self._live:
                rate = self._sandbox.config.arrivals_per_minute
                self.table.append(self._live_rows(self._live, due, rate))
                self._live = due

    def rows_at(self, moment: datetime) -> int:
        """How many rows the table held at `moment`: live rows are only ever appended, in
        order of arrival, so the first `rows_at(m)` rows are the messages as of `m`."""
        return self._history + self._due(moment)

    def _due(self, moment: datetime) -> int:
        """Live messages arrived by `moment`: message k arrives (k + 1) / rate minutes after
        the anchor."""
        clock, rate = self._sandbox.clock, self._sandbox.config.arrivals_per_minute
        if clock.frozen or rate <= 0:
            return 0
        return max(0, int((moment - clock.anchor).total_seconds() * rate / 60))

    # --- reading

    def window(self, started: float, ended: float) -> tuple[int, int]:
        """Rows with started <= timestamp < ended (epoch seconds; rows are whole seconds)."""
        ts = self.table["ts"]
        return (
            int(np.searchsorted(ts, math.ceil(started))),
            int(np.searchsorted(ts, math.ceil(ended))),
        )

    def year(self) -> tuple[int, int]:
        """Rows of the 365 days up to now: what a full-year backup holds."""
        start = math.ceil(self._sandbox.clock.now().timestamp() - YEAR)
        return int(np.searchsorted(self.table["ts"], start)), self.table.size

    def member_rows(self, lo: int, hi: int) -> np.ndarray:
        """Distinct members (rows of `Members`) who appear in messages lo..hi."""
        return np.unique(self.table["member"][lo:hi])

    def uuids(self, lo: int, hi: int) -> list[str]:
        return _uuids(self.table["hi"][lo:hi], self.table["lo"][lo:hi])

    def last_times(self, member_row: int) -> tuple[int, int]:
        """(last message, last message the member sent), epoch seconds; -1 when none."""
        last_any, last_own, _ = self._last
        if member_row >= len(last_any):
            return -1, -1  # created through the API: has written nothing
        return int(last_any[member_row]), int(last_own[member_row])

    def backup_rows(self, rows: np.ndarray) -> list[list]:
        """CSV rows (BACKUP_COLUMNS) of the given message rows."""
        t = self.table
        kind, low = t["kind"][rows], t["lo"][rows]
        member_ids = self._members.first_id + t["member"][rows].astype(np.int64)
        senders = np.where(kind == 0, member_ids, t["sender"][rows])
        out = []
        for uid, conversation, channel, member, sender_kind, sender, image, text, bits, when in zip(
            _uuids(t["hi"][rows], low),
            t["conversation"][rows].tolist(),
            self._channel_ids[t["channel"][rows]].tolist(),
            member_ids.tolist(),
            kind.tolist(),
            senders.tolist(),
            t["mtype"][rows].tolist(),
            t["text"][rows].tolist(),
            low.tolist(),
            stamps(t["ts"][rows]),
            strict=True,
        ):
            if image:  # spec section 9: text "", flat url and mime_type
                ext, mime = ("png", "image/png") if bits & 1 else ("jpg", "image/jpeg")
                body, url = "", f"{self._media}/{uid}.{ext}"
            else:
                body, url, mime = TEXTS[text].replace("{n}", str(100_000 + bits % 900_000)), "", ""
            out.append(
                [
                    uid,
                    conversation,
                    channel,
                    member,
                    SENDER_TYPES[sender_kind],
                    sender,
                    MESSAGE_TYPES[image],
                    body,
                    url,
                    mime,
                    when,
                ]
            )
        return out

    # --- generation

    def _draw(self, rng: np.random.Generator, count: int) -> dict[str, np.ndarray]:
        """Everything of `count` messages but their times."""
        member = rng.choice(len(self._member_weights), count, p=self._member_weights)
        kind = rng.choice(len(SENDER_TYPES), count, p=SENDER_SHARES)
        humans, bots = self._writers
        sender = np.select(
            [kind == 1, kind == 2], [rng.choice(humans, count), rng.choice(bots, count)], -1
        )
        image = rng.random(count) < np.array(IMAGE_SHARES)[kind]
        text = np.select(
            [kind == 0, kind == 1],
            [self._pick_text(rng, 0, count), self._pick_text(rng, 1, count)],
            self._pick_text(rng, 2, count),
        )
        raw = np.frombuffer(rng.bytes(16 * count), dtype=np.uint64).reshape(count, 2)
        # RFC 4122 version 4 and variant bits, so the pair reads as a random uuid.
        high = (raw[:, 0] & np.uint64(0xFFFF_FFFF_FFFF_0FFF)) | np.uint64(0x4000)
        low = (raw[:, 1] & np.uint64(0x3FFF_FFFF_FFFF_FFFF)) | np.uint64(0x8000_0000_0000_0000)
        return {
            "member": member.astype(np.int32),
            "channel": self._member_channels[member],
            "kind": kind.astype(np.int8),
            "sender": sender.astype(np.int64),
            "mtype": image.astype(np.int8),
            "text": text.astype(np.int16),
            "hi": high,
            "lo": low,
        }

    def _pick_text(self, rng: np.random.Generator, kind: int, count: int) -> np.ndarray:
        start, stop = TEXT_RANGES[kind]
        return start + rng.choice(stop - start, count, p=self._text_weights[kind])

    def _history_times(self, rng: np.random.Generator, utc_offsets: np.ndarray) -> np.ndarray:
        """Epoch seconds within the 365 days before the anchor (`history_days` of the
        config), in the channels' local rhythm."""
        count = len(utc_offsets)
        span = self._sandbox.config.history_days
        start = self._anchor - span * DAY
        first_day = start // DAY
        days = np.arange(span + 1)
        weights = WEEKDAY_WEIGHTS[(first_day + days + 3) % 7] * (0.75 + 0.5 * days / span)
        day = rng.choice(span + 1, count, p=weights / weights.sum())
        hour = rng.choice(24, count, p=HOUR_WEIGHTS / HOUR_WEIGHTS.sum())
        local = (first_day + day) * DAY + hour * 3600 + rng.integers(0, 3600, count)
        # Wrap the spill over either end back into the span (keeps the rhythm).
        return start + (local - utc_offsets - start) % (span * DAY)

    def _live_rows(self, start: int, stop: int, rate: float) -> dict[str, np.ndarray]:
        parts = []
        for chunk in range(start // LIVE_CHUNK, (stop - 1) // LIVE_CHUNK + 1):
            drawn = self._draw(np.random.default_rng([*self._seed, 1, chunk]), LIVE_CHUNK)
            first = chunk * LIVE_CHUNK
            lo, hi = max(start, first) - first, min(stop, first + LIVE_CHUNK) - first
            parts.append({name: column[lo:hi] for name, column in drawn.items()})
        rows = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
        # Live message k arrives (k + 1) / rate minutes after the anchor.
        rows["ts"] = self._anchor + np.floor(np.arange(start + 1, stop + 1) * 60 / rate).astype(
            np.int64
        )
        rows["conversation"] = self._continue_conversations(rows)
        return rows

    def _continue_conversations(self, rows: dict[str, np.ndarray]) -> np.ndarray:
        last_any, last_own, last_conversation = self._last
        out = np.empty(len(rows["ts"]), np.int64)
        for i, (member, when, kind) in enumerate(
            zip(rows["member"].tolist(), rows["ts"].tolist(), rows["kind"].tolist(), strict=True)
        ):
            if last_any[member] < 0 or when - last_any[member] > CONVERSATION_GAP:
                last_conversation[member] = self._next_conversation
                self._next_conversation += 1
            out[i] = last_conversation[member]
            last_any[member] = when
            if kind == 0:
                last_own[member] = when
        return out


def _conversations(
    rows: dict[str, np.ndarray], member_count: int, first_id: int
) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Conversation ids of time-sorted rows, each member's first time, and per-member state
    for live arrivals: (last message time, last own message time, last conversation id)."""
    order = np.lexsort((rows["ts"], rows["member"]))
    member, ts = rows["member"][order], rows["ts"][order]
    new_member = np.ones(len(ts), bool)
    new_member[1:] = member[1:] != member[:-1]
    starts = new_member.copy()
    starts[1:] |= ts[1:] - ts[:-1] > CONVERSATION_GAP
    ordinal = np.cumsum(starts) - 1
    rank = np.empty(int(starts.sum()), np.int64)
    rank[np.argsort(ts[starts], kind="stable")] = np.arange(len(rank))
    conversation = np.empty(len(ts), np.int64)
    conversation[order] = first_id + rank[ordinal]
    last = np.ones(len(ts), bool)
    last[:-1] = new_member[1:]
    first_time, last_time, last_own, last_conversation = (
        np.full(member_count, -1, np.int64) for _ in range(4)
    )
    first_time[member[new_member]] = ts[new_member]
    last_time[member[last]] = ts[last]
    last_conversation[member[last]] = conversation[order][last]
    own = rows["kind"][order] == 0
    own_member, own_ts = member[own], ts[own]
    own_last = np.ones(len(own_ts), bool)
    own_last[:-1] = own_member[1:] != own_member[:-1]
    last_own[own_member[own_last]] = own_ts[own_last]
    return conversation, first_time, (last_time, last_own, last_conversation)


def _uuids(high: np.ndarray, low: np.ndarray) -> list[str]:
    texts = [f"{h:016x}{lo:016x}" for h, lo in zip(high.tolist(), low.tolist(), strict=True)]
    return [f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}" for x in texts]


def _text_weights(region: str, start: int, stop: int) -> np.ndarray:
    """Uniform, except the Japanese region writes mostly Japanese."""
    texts = TEXTS[start:stop]
    kana = np.array([any("\u3040" <= ch <= "\u30ff" for ch in text) for text in texts])
    weights = np.where(kana, 6.0, 1.0) if region == "jp" else np.ones(len(texts))
    return weights / weights.sum()
