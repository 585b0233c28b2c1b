"""Contacts of one data hub region: numpy columns for the generated profiles, dicts for changes.

A generated contact is its row index into the columns; its text is picked from the fakedata
pools when a page (or an export chunk) is built. A changed contact keeps only its changed
fields in `changes`; contacts created by an import live in `created`. Both hold immutable
dicts (replaced, never edited in place) so an export snapshot is a shallow copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

import numpy as np

from sandbox.context import Sandbox
from sandbox.fakedata import pools

# Contact profile fields (spec section 2); the update and import bodies accept these.
PROFILE_FIELDS = (
    "customer_id",
    "connect_id",
    "full_name",
    "display_name",
    "display_email",
    "display_mobile",
    "gender",
    "birthday",
    "region",
    "city",
    "address",
    "company",
    "member_level",
)
# The export adds these (spec section 2, "and for export also").
EXPORT_FIELDS = (
    *PROFILE_FIELDS,
    "source",
    "member_id",
    "line_uid",
    "channel_type",
    "external_member_id",
    "account_manager",
)
GENDERS = ("male", "female", "unknown", "other")
GENDER_SHARES = (0.40, 0.48, 0.09, 0.03)
MEMBER_LEVELS = ("bronze", "silver", "gold", "platinum")
SOURCES = ("maac", "caac")

# (country code, calling code, national mobile prefix, digits after the prefix, share)
MARKETS = {
    "default": (
        ("tw", "886", "9", 8, 0.45),
        ("th", "66", "8", 8, 0.20),
        ("us", "1", "415", 7, 0.15),
        ("sg", "65", "9", 7, 0.10),
        ("hk", "852", "6", 7, 0.10),
    ),
    "jp": (
        ("jp", "81", "90", 8, 0.90),
        ("tw", "886", "9", 8, 0.05),
        ("us", "1", "415", 7, 0.05),
    ),
}
# The channels each region's contacts belong to: (channel_type, external_channel_id, share).
CHANNELS = {
    "default": (
        ("line", "1656001001", 0.50),
        ("line", "1656001002", 0.15),
        ("fb", "104882710293847", 0.12),
        ("ig", "17841405822304914", 0.08),
        ("whatsapp", "886223456789", 0.08),
        ("wccs", "wccs-site-tw", 0.07),
    ),
    "jp": (
        ("line", "2000123456", 0.70),
        ("fb", "108223344556677", 0.05),
        ("ig", "17841409988776655", 0.10),
        ("whatsapp", "81312345678", 0.05),
        ("wccs", "wccs-site-jp", 0.10),
    ),
}
ACCOUNT_MANAGERS = 12  # the first names of the pool serve as the brand's staff


@dataclass(frozen=True)
class Snapshot:
    """The contacts as of one moment (an export's completion)."""

    table: ContactTable
    size: int
    changes: dict[int, dict]
    created: list[dict]

    def rows(self, chunk: int = 2000) -> Iterator[list[dict]]:
        base = self.table.base_size
        for start in range(0, min(base, self.size), chunk):
            stop = min(start + chunk, base)
            page = self.table.generated(start, stop)
            for offset, row in enumerate(page):
                row.update(self.changes.get(start + offset, {}))
            yield page
        for start in range(0, len(self.created), chunk):
            yield [dict(row) for row in self.created[start : start + chunk]]


class ContactTable:
    def __init__(self, sandbox: Sandbox, region: str) -> None:
        seed = sandbox.seed_for("datahub", region, "contacts")
        rng = np.random.default_rng(seed)
        self.pools = pools(sandbox.config.seed)
        self.region = region
        n = self.base_size = sandbox.config.sizes.contacts
        self.first_member_id = int(rng.integers(100_000, 900_000))
        self.channels = CHANNELS[region]
        self.markets = MARKETS[region]
        size = len(self.pools.names)
        picks = rng.integers(0, size, (6, n), dtype=np.int32)
        self.k_name, self.k_user, self.k_city, self.k_address, self.k_company, self.k_domain = picks
        self.market = _choice(rng, self.markets, n)
        self.channel = _choice(rng, self.channels, n)
        self.gender = rng.choice(len(GENDERS), n, p=GENDER_SHARES).astype(np.uint8)
        self.level = rng.choice(len(MEMBER_LEVELS) + 1, n, p=(0.45, 0.25, 0.12, 0.05, 0.13))
        self.source = (rng.random(n) < 0.3).astype(np.uint8)
        born = date(1950, 1, 1).toordinal()
        self.birthday = rng.integers(born, date(2008, 12, 31).toordinal(), n)
        self.uid = rng.integers(0, 2**63, (2, n), dtype=np.int64)
        self.account_manager = rng.integers(0, ACCOUNT_MANAGERS, n)
        whatsapp = np.array([c[0] == "whatsapp" for c in self.channels])[self.channel]
        shares = rng.random((7, n))
        self.has_customer_id = shares[0] < 0.55
        self.has_connect_id = shares[1] < 0.35
        self.has_email = shares[2] < 0.75
        self.has_mobile = (shares[3] < 0.65) | whatsapp  # WhatsApp's member id is the number
        self.has_birthday = shares[4] < 0.6
        self.has_company = shares[5] < 0.3
        self.has_account_manager = shares[6] < 0.2
        self.mobile_offset = int(rng.integers(0, 10**7))
        self.changes: dict[int, dict] = {}
        self.created: list[dict] = []
        self._by_channel: dict[tuple, int] | None = None

    @property
    def size(self) -> int:
        return self.base_size + len(self.created)

    def channel_member_ids(self) -> dict[str, list[str]]:
        """Each generated contact's id on its channel (`external_member_id`), by channel
        type, in row order: the same people write to the brand's conversation channels."""
        found: dict[str, list[str]] = {}
        columns = zip(self.market.tolist(), self.channel.tolist(), *self.uid.tolist(), strict=True)
        for row, (market, channel, hi, lo) in enumerate(columns):
            channel_type, _, _, _, member = self._identity(row, market, channel, hi, lo)
            if member:
                found.setdefault(channel_type, []).append(member)
        return found

    def member_ids(self) -> list[int]:
        generated = range(self.first_member_id, self.first_member_id + self.base_size)
        return [*generated, *(row["member_id"] for row in self.created)]

    def row_of_member(self, member_id: int) -> int | None:
        row = member_id - self.first_member_id
        return row if 0 <= row < self.size else None

    def profile(self, row: int) -> dict:
        if row >= self.base_size:
            return dict(self.created[row - self.base_size])
        found = self.generated(row, row + 1)[0]
        found.update(self.changes.get(row, {}))
        return found

    def snapshot(self) -> Snapshot:
        return Snapshot(self, self.size, dict(self.changes), list(self.created))

    def set_fields(self, row: int, values: dict) -> list[str]:
        """Write `values` (None clears) and return the names whose value changed."""
        current = self.profile(row)
        changed = {name: value for name, value in values.items() if current.get(name) != value}
        if not changed:
            return []
        if row >= self.base_size:
            self.created[row - self.base_size] = current | changed
        else:
            self.changes[row] = self.changes.get(row, {}) | changed
        return list(changed)

    def create(self, values: dict) -> int:
        """A contact an import brought in; it has a channel only when a LINE uid came with it."""
        line_type, line_channel, _ = next(c for c in self.channels if c[0] == "line")
        line_uid = values.get("line_uid")
        row = self.size
        contact = dict.fromkeys(EXPORT_FIELDS) | values
        contact |= {
            "member_id": self.first_member_id + row,
            "source": "maac",
            "channel_type": line_type if line_uid else None,
            "external_channel_id": line_channel if line_uid else None,
            "external_member_id": line_uid,
        }
        self.created.append(contact)
        if self._by_channel is not None and line_uid:
            self._by_channel.setdefault((line_type, line_channel, line_uid), row)
        return row

    def find_by_channel(self, channel_type: str, channel_id: str, member_id: str) -> int | None:
        if self._by_channel is None:
            self._by_channel = self._channel_index()
        return self._by_channel.get((channel_type, channel_id, member_id))

    def rows_by(self, field: str) -> dict[str, list[int]]:
        """Current value of `field` → rows holding it (import matching)."""
        found: dict[str, list[int]] = {}
        row = 0
        for page in self.snapshot().rows():
            for contact in page:
                value = contact[field]
                if value is not None:
                    found.setdefault(value, []).append(row)
                row += 1
        return found

    def line_rows(self) -> np.ndarray:
        """Generated contacts that have a LINE uid (campaign recipients)."""
        line = np.array([c[0] == "line" for c in self.channels])
        return np.flatnonzero(line[self.channel])

    def generated(self, start: int, stop: int) -> list[dict]:
        """Profiles of generated rows [start, stop) as dicts, without their changes."""
        p = self.pools
        columns = zip(
            range(start, stop),
            *(getattr(self, name)[start:stop].tolist() for name in _COLUMNS),
            self.uid[0, start:stop].tolist(),
            self.uid[1, start:stop].tolist(),
            strict=True,
        )
        rows = []
        for (
            row, k_name, k_user, k_city, k_address, k_company, k_domain, market, channel,
            gender, level, source, birthday, manager, has_customer_id, has_connect_id,
            has_email, has_mobile, has_birthday, has_company, has_manager, hi, lo,
        ) in columns:  # fmt: skip
            member_id = self.first_member_id + row
            country = self.markets[market][0]
            channel_type, channel_id, line_uid, mobile, external_member_id = self._identity(
                row, market, channel, hi, lo
            )
            user = p.usernames[k_user].rstrip("0123456789")
            rows.append(
                {
                    "customer_id": f"C{member_id:08d}" if has_customer_id else None,
                    "connect_id": f"cn_{lo % 16**12:012x}" if has_connect_id else None,
                    "full_name": p.names[k_name],
                    "display_name": user,
                    "display_email": _email(user, member_id, p.emails[k_domain])
                    if has_email
                    else None,
                    "display_mobile": mobile if has_mobile else None,
                    "gender": GENDERS[gender],
                    "birthday": date.fromordinal(birthday).isoformat() if has_birthday else None,
                    "region": country,
                    "city": p.cities[k_city],
                    "address": p.addresses[k_address],
                    "company": p.companies[k_company] if has_company else None,
                    "member_level": MEMBER_LEVELS[level] if level < len(MEMBER_LEVELS) else None,
                    "source": SOURCES[source],
                    "member_id": member_id,
                    "line_uid": line_uid,
                    "channel_type": channel_type,
                    "external_channel_id": channel_id,
                    "external_member_id": external_member_id,
                    "account_manager": p.names[manager] if has_manager else None,
                }
            )
        return rows

    def _identity(self, row: int, market: int, channel: int, hi: int, lo: int) -> tuple:
        """(channel_type, external_channel_id, line_uid, mobile, external_member_id) of a row."""
        _, calling, prefix, width, _ = self.markets[market]
        channel_type, channel_id, _ = self.channels[channel]
        number = (row * 7_654_321 + self.mobile_offset) % 10**width  # unique per row
        mobile = f"+{calling}{prefix}{number:0{width}d}"
        line_uid = f"U{hi:016x}{lo:016x}" if channel_type == "line" else None
        member = _external_member_id(channel_type, line_uid, mobile, hi, lo)
        return channel_type, channel_id, line_uid, mobile, member

    def _channel_index(self) -> dict[tuple, int]:
        # Updates and imports never change a contact's channel, so the columns suffice.
        index: dict[tuple, int] = {}
        columns = zip(self.market.tolist(), self.channel.tolist(), *self.uid.tolist(), strict=True)
        for row, (market, channel, hi, lo) in enumerate(columns):
            channel_type, channel_id, _, _, member = self._identity(row, market, channel, hi, lo)
            index.setdefault((channel_type, channel_id, member), row)
        for offset, contact in enumerate(self.created):
            if contact["channel_type"]:
                key = (
                    contact["channel_type"],
                    contact["external_channel_id"],
                    contact["external_member_id"],
                )
                index.setdefault(key, self.base_size + offset)
        return index


# Generated columns, in the order `generated` unpacks them.
_COLUMNS = (
    "k_name", "k_user", "k_city", "k_address", "k_company", "k_domain", "market", "channel",
    "gender", "level", "source", "birthday", "account_manager", "has_customer_id",
    "has_connect_id", "has_email", "has_mobile", "has_birthday", "has_company",
    "has_account_manager",
)  # fmt: skip


def _choice(rng: np.random.Generator, table: tuple, n: int) -> np.ndarray:
    shares = np.array([entry[-1] for entry in table])
    return rng.choice(len(table), n, p=shares / shares.sum()).astype(np.uint8)


def _email(user: str, member_id: int, pool_email: str) -> str:
    # The member id keeps addresses unique, so an import can match on them.
    return f"{user}.{member_id}@{pool_email.partition('@')[2]}"


def _external_member_id(
    channel_type: str, line_uid: str | None, mobile: str, hi: int, lo: int
) -> str:
    """The member's id on its channel, in the form that platform uses."""
    if channel_type == "line":
        return line_uid or ""
    if channel_type == "fb":
        return str(10**15 + hi % (9 * 10**15))  # page-scoped id, 16 digits
    if channel_type == "ig":
        return str(10**16 + hi % (9 * 10**16))  # Instagram-scoped id, 17 digits
    if channel_type == "whatsapp":
        return mobile.lstrip("+")  # wa_id: the number without "+"
    return f"wv_{lo % 16**12:012x}"  # web chat visitor
