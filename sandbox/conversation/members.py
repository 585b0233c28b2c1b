"""Members of one region (contacts on the channels) and their assignments.

Held as numpy columns: the profile is an index into the fakedata pools (its locale follows
the channel's audience), other fields are small codes; the two member forms of spec section 2
are built per request. Member ids are `first_id + row`, so a lookup is arithmetic.
"""

from __future__ import annotations

import threading
from datetime import date

import numpy as np

from sandbox.context import Sandbox
from sandbox.conversation.directory import Directory
from sandbox.conversation.models import ASSIGN_TYPES
from sandbox.conversation.table import Table, stamp
from sandbox.errors import ApiError, not_found
from sandbox.fakedata import LOCALES, Pools

# Full value lists are not shown (spec section 2); the samples are among them.
PROCESSING_STATES = ("new", "open", "pending", "resolved", "blocked")
MEMBER_STATUSES = ("active", "inactive", "unfollowed")
ENGAGEMENT_LEVELS = ("Lv1", "Lv2", "Lv3", "Lv4", "Lv5")
MEMBER_LEVELS = ("Bronze", "Silver", "Gold", "Platinum")
GENDERS = ("female", "male", "other")
LOCALE_COUNTRIES = {
    "en_US": "us",
    "ja_JP": "jp",
    "zh_TW": "tw",
    "es_ES": "es",
    "fr_FR": "fr",
    "pt_BR": "br",
    "th_TH": "th",
}
CALLING_CODES = {
    "en": "1",
    "ja": "81",
    "zh-TW": "886",
    "es": "34",
    "fr": "33",
    "pt-BR": "55",
    "th": "66",
}
NOTES = (
    "Prefers to be contacted in the evening",
    "Asked about wholesale pricing, follow up next month",
    "Repeat buyer; handle returns with care",
    "配送先の変更履歴あり",
    "領収書の再発行を希望",
    "Allergic to nuts, check ingredients before recommending",
    "VIP since 2023",
)
BIRTHDAYS = (date(1960, 1, 1).toordinal(), date(2008, 12, 31).toordinal())
# Odd multipliers modulo a power of two or ten (coprime) are bijections: row -> unique id text.
MIX64 = 0x9E3779B97F4A7C15
MIX10 = 7919

RESOLVED = PROCESSING_STATES.index("resolved")
UNASSIGNED = ASSIGN_TYPES.index("unassigned")


class Members:
    def __init__(
        self,
        sandbox: Sandbox,
        region: str,
        directory: Directory,
        pools: Pools,
        hub_ids: dict[str, list[str]] | None = None,
    ) -> None:
        """`hub_ids`: the region's data hub contacts' ids on their channels, by channel type
        (`ContactTable.channel_member_ids`): members of a channel of that type are those
        people, in order, as far as they go, so a conversation joins the hub's member."""
        self._sandbox = sandbox
        self._directory = directory
        self._pools = pools
        self._lock = threading.Lock()
        rng = np.random.default_rng(sandbox.seed_for("conversation", region, "members"))
        count = sandbox.config.sizes.conversation_members
        self.first_id = int(rng.integers(1, 9)) * 1_000_000 + int(rng.integers(0, 1000)) * 100
        self._mix = int(rng.integers(0, 2**62))
        self.table = Table(_draw(rng, count, sandbox, directory, pools))
        # How often each member writes, for the message generator: many quiet, a few chatty,
        # and some who never wrote (they exist only on the channel).
        activity = rng.lognormal(0.0, 1.0, count)
        activity[rng.random(count) < 0.12] = 0.0
        self.activity = activity
        channels = directory.channels
        linked = {kind: iter(ids) for kind, ids in (hub_ids or {}).items()}
        self.external_ids = [
            next(linked.get(channels[c]["type"], iter(())), None)
            or self._external_id(channels[c], i)
            for i, c in enumerate(self.table["channel"].tolist())
        ]
        self._by_external = {
            (c, e): i
            for i, (c, e) in enumerate(
                zip(self.table["channel"].tolist(), self.external_ids, strict=True)
            )
        }

    @property
    def size(self) -> int:
        return self.table.size

    def member_id(self, row: int) -> int:
        return self.first_id + row

    def settle_created(self, first_message: np.ndarray) -> None:
        """Members joined before their first message (-1: never wrote)."""
        created = self.table["created"]
        wrote = first_message >= 0
        joined = first_message - (3600 + (np.arange(len(created)) * 7919) % (40 * 86400))
        created[wrote] = np.minimum(created[wrote], joined[wrote])
        self.table["updated"][:] = np.maximum(self.table["updated"], created)

    # --- lookups

    def row(self, channel_id: int | None, member_id: int, field: str | None = None) -> int:
        """The member's row; 404 when it does not exist or belongs to another channel.

        `field` names the body field the id came in (the path needs none).
        """
        row = member_id - self.first_id
        exists = 0 <= row < self.size
        if channel_id is not None:
            channel = self._directory.channel_index(channel_id, "channel_id" if field else None)
            exists = exists and self.table["channel"][row] == channel
        if not exists:
            where = "" if channel_id is None else f" in channel {channel_id}"
            raise ApiError(404, "not_found", f"member {member_id} not found{where}", field=field)
        return row

    def row_by_external(self, channel_id: int, external_member_id: str) -> int:
        channel = self._directory.channel_index(channel_id)
        row = self._by_external.get((channel, external_member_id))
        if row is None:
            raise not_found(f"member {external_member_id!r} in channel {channel_id}")
        return row

    # --- the two forms (spec section 2)

    def by_external_form(self, row: int) -> dict:
        common, private = self._fields(row)
        channel = self._directory.channels[int(self.table["channel"][row])]
        return {
            **common,
            "channel_id": channel["id"],
            "customer_id": private["customer_id"],
            "display_email": _masked_email(private["email"]),
            "display_mobile": _masked_mobile(private["mobile"]),
        }

    def by_id_form(self, row: int, last_message: int, last_member_message: int) -> dict:
        common, private = self._fields(row)
        channel = self._directory.channels[int(self.table["channel"][row])]
        return {
            **common,
            "created_at": stamp(self.table["created"][row]),
            "custom_id": private["custom_id"],
            "email": private["email"],
            "external_channel_id": channel["external_channel_id"],
            "last_member_message_send": stamp(last_member_message)
            if last_member_message >= 0
            else None,
            "last_message_at": stamp(last_message) if last_message >= 0 else None,
            "mobile": private["mobile"],
            "note": private["note"],
            "updated_at": stamp(self.table["updated"][row]),
        }

    def assignment(self, row: int) -> dict:
        team, user = int(self.table["team"][row]), int(self.table["user"][row])
        return {
            "assign_type": ASSIGN_TYPES[int(self.table["assign"][row])],
            "assignment_relationship": {
                "team_id": team if team >= 0 else None,
                "user_id": user if user >= 0 else None,
            },
        }

    # --- changes

    def upsert_external(self, channel: int, external_member_id: str) -> tuple[int, bool]:
        """Row of the member with this external id on the channel; (row, created)."""
        with self._lock:
            row = self._by_external.get((channel, external_member_id))
            now = self._now()
            if row is not None:
                self.table["updated"][row] = now
                return row, False
            self.table.append(_new_member(channel, now))
            row = self.size - 1
            self.external_ids.append(external_member_id)
            self._by_external[(channel, external_member_id)] = row
            return row, True

    def assign(self, row: int, assign_type: str, team_id: int | None, user_id: int | None) -> None:
        with self._lock:
            self.table["assign"][row] = ASSIGN_TYPES.index(assign_type)
            self.table["team"][row] = -1 if team_id is None else team_id
            self.table["user"][row] = -1 if user_id is None else user_id
            self.table["updated"][row] = self._now()

    def close(self, row: int) -> None:
        with self._lock:
            self.table["state"][row] = RESOLVED
            self.table["updated"][row] = self._now()

    # --- internals

    def _now(self) -> int:
        return int(self._sandbox.clock.now().timestamp())

    def _external_id(self, channel: dict, row: int) -> str:
        mixed = (row * MIX64 + self._mix) % 2**64
        digits = (row * MIX10 + self._mix) % 10**15
        kind = channel["type"]
        if kind == "line":  # "U" + 32 hex digits
            return f"U{mixed:016x}{(mixed * MIX64 + self._mix) % 2**64:016x}"
        if kind == "fb":  # page-scoped id
            return f"2{digits:015d}"
        if kind == "ig":
            return f"17{digits:015d}"
        if kind == "whatsapp":  # the phone number
            return f"{CALLING_CODES[channel['language_code']]}{digits % 10**9:09d}"
        return f"guest_{mixed:016x}"

    def _fields(self, row: int) -> tuple[dict, dict]:
        """(fields of both forms, values that each form shows under its own names)."""
        t, pools = self.table, self._pools
        channel = self._directory.channels[int(t["channel"][row])]
        profile = int(t["profile"][row])
        known = profile >= 0
        name = pools.names[profile] if known else None
        city = pools.cities[profile] if known and t["has_city"][row] else None
        country = LOCALE_COUNTRIES[LOCALES[profile % len(LOCALES)]] if known else None
        if channel["type"] == "whatsapp":
            mobile = "+" + self.external_ids[row]
        else:
            mobile = pools.mobiles[profile] if known and t["has_mobile"][row] else None
        level, gender, birthday = (
            int(t["level"][row]),
            int(t["gender"][row]),
            int(t["birthday"][row]),
        )
        manager, note = int(t["manager"][row]), int(t["note"][row])
        customer, connect = int(t["customer"][row]), int(t["connect"][row])
        member_id = self.member_id(row)
        common = {
            "id": member_id,
            "account_manager": self._directory.user(manager)["name"] if manager >= 0 else None,
            "assign_type": ASSIGN_TYPES[int(t["assign"][row])],
            "avatar": f"https://avatars.sandbox.example/members/{member_id}.jpg"
            if t["has_avatar"][row]
            else None,
            "birthday": date.fromordinal(birthday).isoformat() if birthday >= 0 else None,
            "city": city,
            "company": pools.companies[profile] if known and t["has_company"][row] else None,
            "connect_id": f"cid_{connect:012x}" if connect >= 0 else None,
            "country": country,
            "display_name": (pools.usernames[profile] if channel["type"] == "ig" else name)
            if known
            else None,
            "engagement_level": ENGAGEMENT_LEVELS[int(t["engagement"][row])],
            "external_member_id": self.external_ids[row],
            "gender": GENDERS[gender] if gender >= 0 else None,
            "location": f"{city}, {country.upper()}" if city else None,
            "member_level": MEMBER_LEVELS[level] if level >= 0 else None,
            "name": name,
            "original_email": pools.emails[profile] if known and t["has_email"][row] else None,
            "original_mobile": mobile,
            "original_name": name,
            "processing_state": PROCESSING_STATES[int(t["state"][row])],
            "star_mark": bool(t["star"][row]),
            "status": MEMBER_STATUSES[int(t["status"][row])],
            "type": channel["type"],
        }
        private = {
            "customer_id": f"C{customer:08d}" if customer >= 0 else None,
            "custom_id": f"M-{customer % 1_000_000:06d}"
            if customer >= 0 and row % 3 == 0
            else None,
            "email": common["original_email"],
            "mobile": mobile,
            "note": NOTES[note] if note >= 0 else None,
        }
        return common, private


def _draw(
    rng: np.random.Generator, count: int, sandbox: Sandbox, directory: Directory, pools: Pools
) -> dict[str, np.ndarray]:
    """The generated members' columns."""
    per_locale = len(pools.names) // len(LOCALES)
    channel_share = rng.gamma(1.5, 1.0, len(directory.channels))
    channel = rng.choice(len(directory.channels), count, p=channel_share / channel_share.sum())
    locale = np.where(
        rng.random(count) < 0.8,
        directory.channel_locales[channel],
        rng.integers(0, len(LOCALES), count),
    )
    anchor = int(sandbox.clock.anchor.timestamp())
    created = anchor - rng.integers(3600, 3 * 365 * 86400, count)
    assigned = rng.choice(len(ASSIGN_TYPES), count, p=[0.4, 0.15, 0.45])
    agents = np.array(directory.user_ids("human") or [-1])
    team_ids = np.array([t["id"] for t in directory.teams] or [-1])
    has_team = (assigned != UNASSIGNED) & (rng.random(count) < 0.7)

    def some(share: float, values: np.ndarray) -> np.ndarray:
        """`values` for a `share` of members, -1 (unknown) for the others."""
        return np.where(rng.random(count) < share, values, -1)

    return {
        "channel": channel.astype(np.int16),
        "profile": (rng.integers(0, per_locale, count) * len(LOCALES) + locale).astype(np.int32),
        "gender": some(0.9, rng.choice(3, count, p=[0.52, 0.44, 0.04])).astype(np.int8),
        "birthday": some(0.55, rng.integers(*BIRTHDAYS, count)).astype(np.int32),
        "has_city": rng.random(count) < 0.7,
        "has_company": rng.random(count) < 0.25,
        "has_email": rng.random(count) < 0.55,
        "has_mobile": rng.random(count) < 0.45,
        "has_avatar": rng.random(count) < 0.75,
        "engagement": rng.choice(5, count, p=[0.4, 0.25, 0.17, 0.11, 0.07]).astype(np.int8),
        "level": some(0.5, rng.choice(4, count, p=[0.5, 0.3, 0.15, 0.05])).astype(np.int8),
        "status": rng.choice(3, count, p=[0.88, 0.08, 0.04]).astype(np.int8),
        "state": rng.choice(5, count, p=[0.12, 0.15, 0.1, 0.58, 0.05]).astype(np.int8),
        "star": rng.random(count) < 0.08,
        "manager": some(0.15, rng.choice(agents, count)).astype(np.int64),
        "customer": some(0.3, rng.integers(0, 10**8, count)).astype(np.int64),
        "connect": some(0.35, rng.integers(0, 2**47, count)).astype(np.int64),
        "note": some(0.1, rng.integers(0, len(NOTES), count)).astype(np.int16),
        "created": created.astype(np.int64),
        "updated": (created + (anchor - created) * rng.uniform(0, 0.9, count)).astype(np.int64),
        "assign": assigned.astype(np.int8),
        "team": np.where(has_team, rng.choice(team_ids, count), -1).astype(np.int64),
        "user": np.where(assigned != UNASSIGNED, rng.choice(agents, count), -1).astype(np.int64),
    }


def _new_member(channel: int, now: int) -> dict[str, np.ndarray]:
    """A member created through the API: only the platform id is known."""
    unknown = np.array([-1])
    return {
        "channel": np.array([channel]),
        "profile": unknown,
        "gender": unknown,
        "birthday": unknown,
        "has_city": np.array([False]),
        "has_company": np.array([False]),
        "has_email": np.array([False]),
        "has_mobile": np.array([False]),
        "has_avatar": np.array([False]),
        "engagement": np.array([0]),
        "level": unknown,
        "status": np.array([MEMBER_STATUSES.index("active")]),
        "state": np.array([PROCESSING_STATES.index("new")]),
        "star": np.array([False]),
        "manager": unknown,
        "customer": unknown,
        "connect": unknown,
        "note": unknown,
        "created": np.array([now]),
        "updated": np.array([now]),
        "assign": np.array([UNASSIGNED]),
        "team": unknown,
        "user": unknown,
    }


def _masked_email(email: str | None) -> str | None:
    # The display forms show contact data masked, as consoles do for agents.
    if email is None:
        return None
    local, _, domain = email.partition("@")
    return f"{local[0]}***@{domain}"


def _masked_mobile(mobile: str | None) -> str | None:
    return None if mobile is None else f"{mobile[:4]}****{mobile[-3:]}"
