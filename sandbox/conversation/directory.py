"""Channels, teams and users of one region: tens to hundreds of rows, held as dicts.

Each record holds the union of the fields of all its forms; a form is picked by the model's
field names (`models.pick`).
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from zoneinfo import ZoneInfo

import numpy as np

from sandbox.clock import iso
from sandbox.context import Sandbox
from sandbox.conversation.models import ROUTING_RULES
from sandbox.errors import ApiError, not_found
from sandbox.fakedata import LOCALES, Pools

DAY = 86400

# (type, language_code, timezone, label). Full value lists are not shown by the spec (section
# 2): types after the sample `fb` are the platforms such a service connects; `wccs` = web chat.
CHANNEL_PLANS = {
    "default": (
        ("fb", "en", "America/New_York", "US"),
        ("ig", "en", "America/New_York", "US"),
        ("line", "zh-TW", "Asia/Taipei", "Taiwan"),
        ("line", "th", "Asia/Bangkok", "Thailand"),
        ("whatsapp", "es", "Europe/Madrid", "Spain"),
        ("fb", "pt-BR", "America/Sao_Paulo", "Brasil"),
        ("wccs", "en", "Asia/Singapore", "Web"),
        ("line", "ja", "Asia/Tokyo", "Japan"),
    ),
    "jp": (
        ("line", "ja", "Asia/Tokyo", "Tokyo"),
        ("line", "ja", "Asia/Tokyo", "Osaka"),
        ("fb", "ja", "Asia/Tokyo", "Japan"),
        ("ig", "ja", "Asia/Tokyo", "Japan"),
        ("wccs", "ja", "Asia/Tokyo", "Web"),
        ("line", "en", "Asia/Tokyo", "Global"),
    ),
}
CHANNEL_LABELS = {
    "fb": "Facebook",
    "ig": "Instagram",
    "line": "LINE",
    "whatsapp": "WhatsApp",
    "wccs": "Web Chat",
}
LANGUAGE_LOCALE = {
    "en": "en_US",
    "ja": "ja_JP",
    "zh-TW": "zh_TW",
    "es": "es_ES",
    "fr": "fr_FR",
    "pt-BR": "pt_BR",
    "th": "th_TH",
}
REGION_LANGUAGE = {"default": "en", "jp": "ja"}

TEAM_PLANS = {
    "default": (
        ("Customer Support", "support"),
        ("VIP Care", "support"),
        ("Sales", "sales"),
        ("Billing & Payments", "finance"),
        ("Returns & Exchanges", "support"),
        ("Social Media", "marketing"),
        ("Tier 2 Support", "support"),
        ("Wholesale", "sales"),
    ),
    "jp": (
        ("カスタマーサポート", "support"),
        ("VIPサポート", "support"),
        ("営業", "sales"),
        ("請求・お支払い", "finance"),
        ("返品・交換", "support"),
        ("SNS運用", "marketing"),
        ("二次対応", "support"),
        ("法人営業", "sales"),
    ),
}

ROLES = {"owner": (1, "Owner"), "admin": (2, "Admin"), "agent": (3, "Agent")}
ON_DUTY = ("online", "away", "offline")  # full list not shown: sample `away`, `online`
USER_STATUSES = ("active", "invited", "deactivated")  # samples `active`, `invited`


class Directory:
    def __init__(self, sandbox: Sandbox, region: str, pools: Pools) -> None:
        self._sandbox = sandbox
        self._lock = threading.Lock()
        rng = np.random.default_rng(sandbox.seed_for("conversation", region, "directory"))
        self.region = region
        self.locale = LOCALES.index(LANGUAGE_LOCALE[REGION_LANGUAGE[region]])
        self.org_id = int(rng.integers(10_000, 99_999))
        anchor = sandbox.clock.anchor
        brand = pools.companies[int(rng.integers(0, len(pools.companies) // 7)) * 7 + self.locale]
        self.channels = _channels(rng, region, brand, anchor)
        # Per channel: UTC offset (seconds) for the daily rhythm, and the audience's locale.
        zones = [ZoneInfo(c["timezone"]) for c in self.channels]
        self.channel_offsets = np.array(
            [z.utcoffset(anchor).total_seconds() for z in zones], dtype=np.int64
        )
        self.channel_locales = np.array(
            [LOCALES.index(LANGUAGE_LOCALE[c["language_code"]]) for c in self.channels]
        )
        self.users = _users(rng, sandbox.config.sizes.users, self, pools, anchor)
        self.teams = _teams(rng, region, sandbox.config.sizes.teams, anchor)
        agents = [u["id"] for u in self.users if u["type"] == "human" and u["role_type"] != "owner"]
        self.team_users = {
            t["id"]: sorted(
                set(rng.choice(agents, size=min(len(agents), 5), replace=False).tolist())
            )
            for t in self.teams
        }
        self._channel_index = {c["id"]: i for i, c in enumerate(self.channels)}
        self._team_index = {t["id"]: i for i, t in enumerate(self.teams)}
        self._user_index = {u["id"]: i for i, u in enumerate(self.users)}

    # --- lookups: unknown ids are 404 (field named when the id came in a body)

    def channel_index(self, channel_id: int, field: str | None = None) -> int:
        if channel_id not in self._channel_index:
            raise _missing("channel", channel_id, field)
        return self._channel_index[channel_id]

    def team(self, team_id: int, field: str | None = None) -> dict:
        if team_id not in self._team_index:
            raise _missing("team", team_id, field)
        return self.teams[self._team_index[team_id]]

    def user(self, user_id: int, field: str | None = None) -> dict:
        if user_id not in self._user_index:
            raise _missing("user", user_id, field)
        return self.users[self._user_index[user_id]]

    def check_org(self, org_id: int | None) -> None:
        if org_id is not None and org_id != self.org_id:
            raise _missing("organization", org_id, "org_id")

    def team_by_external(self, external_team_id: str) -> dict:
        found = next((t for t in self.teams if t["external_team_id"] == external_team_id), None)
        if found is None:
            raise not_found(f"team with external_team_id {external_team_id!r}")
        return found

    def user_by_external(self, external_user_id: str) -> dict:
        found = next((u for u in self.users if u["external_user_id"] == external_user_id), None)
        if found is None:
            raise not_found(f"user with external_user_id {external_user_id!r}")
        return found

    def user_ids(self, kind: str) -> list[int]:
        """Users who write messages: `human` agents (not the owner) or `ai` agents."""
        return [
            u["id"]
            for u in self.users
            if u["type"] == kind and u["role_type"] != "owner" and u["status"] == "active"
        ]

    # --- changes

    def update_team(self, team_id: int, changes: dict) -> dict:
        with self._lock:
            team = self.team(team_id)
            if not team["editable"]:
                raise ApiError(403, "team_not_editable", f"team {team_id} is not editable")
            external = changes.get("external_team_id")
            if external is not None and any(
                t["external_team_id"] == external and t is not team for t in self.teams
            ):
                raise _taken("external_team_id", external)
            team.update(changes)
            return team

    def add_users_to_team(self, team_id: int, user_ids: list[int]) -> list[dict]:
        with self._lock:
            self.team(team_id)
            users = [self.user(i, "user_ids") for i in dict.fromkeys(user_ids)]
            self.team_users[team_id] = sorted(set(self.team_users[team_id]) | set(user_ids))
            return users

    def update_user(self, user_id: int, changes: dict) -> dict:
        with self._lock:
            user = self.user(user_id)
            external = changes.get("external_user_id")
            if external is not None and any(
                u["external_user_id"] == external and u is not user for u in self.users
            ):
                raise _taken("external_user_id", external)
            user.update(changes, updated_at=iso(self._sandbox.clock.now()))
            return user


def _missing(what: str, value: int, field: str | None) -> ApiError:
    return ApiError(404, "not_found", f"{what} {value} not found", field=field)


def _taken(field: str, value: str) -> ApiError:
    # Lookups by external id need it unique within the region.
    return ApiError(409, "conflict", f"{field} {value!r} is already used", field=field)


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


def _channels(rng: np.random.Generator, region: str, brand: str, anchor) -> list[dict]:
    plan = CHANNEL_PLANS[region]
    first_id = int(rng.integers(100, 900)) * 100
    disconnected = int(rng.integers(0, len(plan)))
    channels = []
    for k, (kind, language, zone, label) in enumerate(plan):
        created = anchor - timedelta(days=int(rng.integers(420, 1500)))
        connected = k != disconnected
        expiry = anchor + timedelta(
            days=int(rng.integers(20, 60)) if connected else -int(rng.integers(3, 40))
        )
        channels.append(
            {
                "id": first_id + k,
                "uuid": _uuid(rng),
                "name": f"{brand} {CHANNEL_LABELS[kind]} {label}",
                "type": kind,
                "status": "connected" if connected else "disconnected",
                "language_code": language,
                "timezone": zone,
                "external_channel_id": _external_channel_id(rng, kind),
                "external_access_token_expired_at": iso(expiry),
                "broadcast_enabled": bool(kind != "wccs" and rng.random() < 0.8),
                "user_recognition_enabled": bool(rng.random() < 0.5),
                "created_at": iso(created),
                "updated_at": iso(created + (anchor - created) * float(rng.uniform(0.3, 0.95))),
            }
        )
    return channels


def _external_channel_id(rng: np.random.Generator, kind: str) -> str:
    # The id the platform gives the page, official account, business number or widget.
    if kind == "fb":
        return str(int(rng.integers(10**14, 10**15)))
    if kind == "ig":
        return f"1784{int(rng.integers(10**12, 10**13))}"
    if kind == "line":
        return str(int(rng.integers(1_600_000_000, 2_100_000_000)))
    if kind == "whatsapp":
        return str(int(rng.integers(10**14, 10**15)))
    return f"wccs-{rng.bytes(6).hex()}"


def _teams(rng: np.random.Generator, region: str, count: int, anchor) -> list[dict]:
    plan = TEAM_PLANS[region]
    first_id = int(rng.integers(1000, 9000))
    teams = []
    for k in range(count):
        name, category = plan[k % len(plan)]
        if k >= len(plan):
            name = f"{name} {k // len(plan) + 1}"
        description = (
            f"{name}のお問い合わせを担当"
            if region == "jp"
            else f"Handles {category} conversations for {name}"
        )
        teams.append(
            {
                "id": first_id + k,
                "name": name,
                "description": description,
                "category": category,
                "external_team_id": f"T-{rng.bytes(2).hex()}-{k + 1:03d}",
                "routing_rule": ROUTING_RULES[int(rng.choice(3, p=[0.6, 0.3, 0.1]))],
                # The first team is the organization's default team: settings fixed.
                "editable": k > 0,
            }
        )
    return teams


def _users(
    rng: np.random.Generator, count: int, directory: Directory, pools: Pools, anchor
) -> list[dict]:
    first_id = int(rng.integers(10_000, 90_000))
    employee_numbers = int(rng.integers(0, 100_000))
    first_account = int(rng.integers(100_000, 900_000))
    ai_count = max(1, count // 12)
    language = REGION_LANGUAGE[directory.region]
    owner_id = first_id
    admins = [owner_id]
    users = []
    for k in range(count):
        ai = k >= count - ai_count
        role = "owner" if k == 0 else "admin" if k <= max(1, count // 10) else "agent"
        locale = directory.locale if rng.random() < 0.8 else int(rng.integers(0, len(LOCALES)))
        profile = int(rng.integers(0, len(pools.names) // len(LOCALES))) * len(LOCALES) + locale
        user_id = first_id + k
        name = (
            f"AIアシスタント {k - count + ai_count + 1}"
            if ai and language == "ja"
            else f"AI Agent {k - count + ai_count + 1}"
            if ai
            else pools.names[profile]
        )
        # Every status occurs: the last two humans are invited and deactivated.
        last_human = count - ai_count - 1
        status = (
            "active"
            if k == 0 or ai
            else "deactivated"
            if k == last_human
            else "invited"
            if k == last_human - 1
            else USER_STATUSES[int(rng.choice(3, p=[0.88, 0.08, 0.04]))]
        )
        created = anchor - timedelta(days=720 - k * 600 / count, hours=int(rng.integers(0, 24)))
        updated = created + (anchor - created) * float(rng.uniform(0.1, 0.9))
        users.append(
            {
                "id": user_id,
                "account_id": first_account + k * 7,
                "org_id": directory.org_id,
                "role_id": ROLES[role][0],
                # The owner created the organization: recorded as self-invited.
                "inviter_id": owner_id if k == 0 else int(rng.choice(admins)),
                "name": name,
                "chat_name": name.split()[0] if not ai else name,
                "avatar": f"https://avatars.sandbox.example/users/{user_id}.png",
                "email": f"{pools.usernames[profile]}.{k}@{'ai.' if ai else ''}agents.example",
                "external_user_id": None
                if ai
                else f"EMP{(k * 7919 + employee_numbers) % 100_000:05d}",
                "created_at": iso(created),
                "updated_at": iso(updated),
                "deleted_at": iso(updated) if status == "deactivated" else None,
                "role_name": ROLES[role][1],
                "role_type": role,
                "on_duty_status": "online"
                if ai
                else ON_DUTY[int(rng.choice(3, p=[0.45, 0.25, 0.3]))],
                "status": status,
                "type": "ai" if ai else "human",
                "is_internal_user": bool(not ai and rng.random() < 0.05),
                "language_code": language if locale == directory.locale else "en",
                "mobile": pools.mobiles[profile],
                "enable_popup_notification": bool(rng.random() < 0.7),
                "enable_sound_notification": bool(rng.random() < 0.5),
            }
        )
        if role == "admin":
            admins.append(user_id)
    return users
