"""Deterministic history of one comment automation workspace.

Accounts with their published posts and stories, activities, and a year of trigger logs, all
drawn from `sandbox.seed_for("comment", workspace, <stream>)`. Logs are numpy columns
(`logs.LogTable`); the same row functions derive the live arrivals, so history and live
traffic look alike.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from urllib.parse import urlsplit

import numpy as np

from sandbox.comment import texts
from sandbox.comment.logs import DM, PUBLIC_REPLY, LogTable, sort_rows
from sandbox.comment.models import (
    FOLLOW_GATE_TRIGGERS,
    NEXT_POST_TRIGGERS,
    NO_DM,
    NO_PUBLIC_REPLIES,
    PLATFORMS,
    TRIGGERS,
)
from sandbox.context import Sandbox
from sandbox.fakedata import COMMENT_TEXTS, Pools, pools

DAY = 86_400
RETAINED_DAYS = 365  # logs older than this are never served
CATALOG_DAYS = 400  # posts reach further back: a log names a post published before it
DASHBOARD = "https://dashboard.example"
CONNECT_URL = f"{DASHBOARD}/accounts/connect"
BILLING_URL = f"{DASHBOARD}/billing"

# Per workspace: plan, and days from the anchor to the end of a trial (None: paid plan).
PROFILES = {"demo": ("pro", None, False), "agency": ("trial", 30, True)}
DEFAULT_PROFILE = ("pro", None, False)  # (plan, trial days, one brand per account)

PLATFORM_WEIGHTS = {"instagram": 0.6, "facebook": 0.25, "threads": 0.15}
TRIGGER_WEIGHTS = {
    "instagram": {"ig_comment": 0.65, "ig_story": 0.2, "ig_live": 0.15},
    "facebook": {"fb_comment": 0.6, "fb_live": 0.15, "fb_message": 0.25},
    "threads": {"threads_reply": 1.0},
}
MEDIA_TYPES = {  # as each platform's API names them
    "instagram": {"IMAGE": 0.45, "CAROUSEL_ALBUM": 0.25, "VIDEO": 0.3},
    "story": {"IMAGE": 0.6, "VIDEO": 0.4},
    "threads": {"TEXT_POST": 0.5, "IMAGE": 0.3, "CAROUSEL_ALBUM": 0.1, "VIDEO": 0.1},
    "facebook": {"photo": 0.5, "video": 0.2, "status": 0.2, "link": 0.1},
}
ACCOUNT_VARIANTS = (("", ""), ("_shop", " Shop"), (".jp", " Japan"), ("_outlet", " Outlet"))
FAIL_SHARE = np.array([0.03, 0.05])  # by action: public replies fail less often than DMs
STORY_TEXTLESS_SHARE = 0.3  # a story mention carries no text
# Comments by UTC hour: Asian evening around 12 UTC, European and American evenings later.
DAILY_CURVE = np.array(
    [
        0.6,
        0.5,
        0.45,
        0.4,
        0.35,
        0.35,
        0.4,
        0.5,
        0.6,
        0.75,
        0.9,
        1.1,
        1.25,
        1.3,
        1.2,
        1.0,
        0.95,
        1.0,
        1.1,
        1.25,
        1.35,
        1.3,
        1.05,
        0.8,
    ]
)
WEEKEND_FACTOR = 1.35

ERROR_TEXTS: tuple[str, ...] = tuple(text for group in texts.ERRORS.values() for text in group)
ERROR_REFS = {
    key: np.array([ERROR_TEXTS.index(text) for text in group])
    for key, group in texts.ERRORS.items()
}
_SHORTCODE = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def moment(seconds: int) -> datetime:
    return datetime.fromtimestamp(int(seconds), UTC)


def midnight(day) -> int:
    return epoch(datetime(day.year, day.month, day.day, tzinfo=UTC))


def new_uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


class PostTable:
    """Every post id a workspace's logs name, so a log row stores a small integer."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._refs: dict[str, int] = {}

    def ref(self, post_id: str) -> int:
        if post_id not in self._refs:
            self._refs[post_id] = len(self.ids)
            self.ids.append(post_id)
        return self._refs[post_id]


@dataclass
class Catalog:
    """One account's published posts or stories, oldest first."""

    times: np.ndarray  # epoch seconds
    ids: list[str]
    captions: list[str | None]
    media_types: list[str]
    permalinks: list[str]
    refs: np.ndarray  # each id's index in the PostTable


@dataclass
class AccountRecord:
    index: int
    id: str
    platform: str
    handle: str
    username: str | None
    page_name: str | None
    token_expires_at: datetime | None
    connected_at: datetime
    site: str  # the brand's web address, which DM buttons link to
    posts: Catalog
    stories: Catalog
    recent: int  # how many of its posts the platform lists as recent

    @cached_property
    def permalinks(self) -> dict[str, str]:
        """Permalink key -> post id, to resolve post URLs (built on first use)."""
        return {
            permalink_key(link): post_id
            for catalog in (self.posts, self.stories)
            for link, post_id in zip(catalog.permalinks, catalog.ids, strict=True)
        }


@dataclass
class ActivityRecord:
    index: int  # position in the workspace's activity list, which log rows refer to
    id: str
    account: AccountRecord
    name: str
    status: str
    trigger: str
    keywords: list[str]
    match: str
    public_replies: list[str]
    dm: list[dict]
    post_scope: str
    post_ids: list[str] | None
    follow_gate: dict
    start_at: datetime | None
    end_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # The post a `next_post` activity answers on, once published: (PostTable ref, epoch).
    next_post: tuple[int, int] | None = None

    def actions(self) -> list[int]:
        return ([PUBLIC_REPLY] if self.public_replies else []) + ([DM] if self.dm else [])


def follow_gate_off() -> dict:
    return {
        "enabled": False,
        "opening_text": None,
        "button_title": None,
        "not_following_text": None,
    }


@dataclass
class History:
    id: str
    name: str
    plan: str
    trial_ends_at: datetime | None
    user: dict
    accounts: list[AccountRecord]
    activities: list[ActivityRecord]
    posts: PostTable
    logs: LogTable
    log_prefix: str  # log ids are this prefix and 12 hex digits


def permalink_key(url: str) -> str:
    """The part of a post URL that identifies the post: host without www, path without '/'."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").removeprefix("www.")
    host = "threads.net" if host == "threads.com" else host  # Threads moved domains in 2025
    return host + parts.path.rstrip("/")


# --- the workspace -------------------------------------------------------------------------


def generate(sandbox: Sandbox, workspace: str) -> History:
    anchor = sandbox.clock.anchor
    seed = sandbox.config.seed
    pool = pools(seed)
    plan, trial_days, brand_per_account = PROFILES.get(workspace, DEFAULT_PROFILE)
    rng = np.random.default_rng(sandbox.seed_for("comment", workspace, "workspace"))
    user_at = int(rng.integers(len(pool.names)))
    user = {"id": new_uuid(rng), "name": pool.names[user_at], "email": pool.emails[user_at]}
    brand = _brand(pool, rng)
    name = f"{brand[0]} Agency" if brand_per_account else brand[0]
    trial_ends_at = None
    if trial_days is not None:
        trial_ends_at = datetime.combine(
            anchor.date() + timedelta(days=trial_days), datetime.min.time(), UTC
        )
    ws_id, log_prefix = new_uuid(rng), new_uuid(rng)[:24]
    posts = PostTable()
    accounts = _accounts(sandbox, workspace, pool, brand, brand_per_account, posts)
    activities = _activities(sandbox, workspace, accounts)
    logs = _history_logs(sandbox, workspace, activities, posts, len(pool.usernames))
    return History(
        ws_id, name, plan, trial_ends_at, user, accounts, activities, posts, logs, log_prefix
    )


def _brand(pool: Pools, rng: np.random.Generator) -> tuple[str, str]:
    """A company name and a web-safe slug of it (from a Latin-script locale of the pools)."""
    latin_slots = (0, 3, 4, 5)  # en_US, es_ES, fr_FR, pt_BR in fakedata.LOCALES order
    at = 7 * int(rng.integers(len(pool.companies) // 7)) + int(rng.choice(latin_slots))
    company = pool.companies[at]
    ascii_name = unicodedata.normalize("NFKD", company).encode("ascii", "ignore").decode()
    return company, re.sub(r"[^a-z0-9]+", "", ascii_name.lower())[:18] or "brand"


# --- accounts and their posts -------------------------------------------------------------


def _accounts(
    sandbox: Sandbox,
    workspace: str,
    pool: Pools,
    brand: tuple[str, str],
    brand_per_account: bool,
    posts: PostTable,
) -> list[AccountRecord]:
    rng = np.random.default_rng(sandbox.seed_for("comment", workspace, "accounts"))
    post_rng = np.random.default_rng(sandbox.seed_for("comment", workspace, "posts"))
    anchor = sandbox.clock.anchor
    count = int(rng.integers(3, 7))
    # Every platform once, then the most used ones again.
    platforms = list(PLATFORMS) + list(
        rng.choice(PLATFORMS, size=count - 3, p=list(PLATFORM_WEIGHTS.values()))
    )
    soon = platforms.index("instagram")  # this token expires within 7 days of the anchor
    accounts = []
    for index, platform in enumerate(platforms):
        company, slug = _brand(pool, rng) if brand_per_account else brand
        # A brand's second account on a platform is a regional or outlet one.
        variant = 0 if brand_per_account else platforms[:index].count(platform)
        suffix, label = ACCOUNT_VARIANTS[variant]
        username = f"{slug}{suffix}"
        page_name = company + label
        if platform == "facebook":
            if rng.random() < 0.3:
                username = None  # not every Page has a username
        elif platform == "threads":
            page_name = None
        handle = f"@{username}" if username else company
        if platform == "facebook":
            expires = None  # Page tokens do not expire
        else:
            days = rng.uniform(1, 6.5) if index == soon else rng.uniform(8, 60)
            expires = (anchor + timedelta(days=float(days))).replace(microsecond=0)
        connected = anchor - timedelta(seconds=int(rng.integers(370 * DAY, 900 * DAY)))
        account = AccountRecord(
            index=index,
            id=new_uuid(rng),
            platform=str(platform),
            handle=handle,
            username=username,
            page_name=page_name,
            token_expires_at=expires,
            connected_at=connected,
            site=f"https://www.{slug}.example",
            posts=_catalog(post_rng, platform, "posts", username or slug, anchor, posts),
            stories=_catalog(post_rng, platform, "story", username or slug, anchor, posts),
            recent=int(rng.integers(10, 26)),
        )
        accounts.append(account)
    return accounts


def _catalog(
    rng: np.random.Generator,
    platform: str,
    kind: str,
    username: str,
    anchor: datetime,
    posts: PostTable,
) -> Catalog:
    """Posts (or Instagram stories) published over the CATALOG_DAYS before the anchor."""
    end = epoch(anchor)
    start = end - CATALOG_DAYS * DAY
    if kind == "story" and platform != "instagram":
        times = np.zeros(0, dtype=np.int64)  # only Instagram stories can trigger (ig_story)
    elif kind == "story":
        # Stories live 24 hours; a few are up at the anchor, the rest expired long ago.
        old = rng.integers(start, end - DAY, size=int(rng.integers(450, 800)))
        live = rng.integers(end - 23 * 3600, end - 600, size=int(rng.integers(2, 7)))
        times = np.sort(np.concatenate([old, live]))
    else:
        times = np.sort(rng.integers(start, end - 7200, size=int(rng.integers(150, 260))))
    n = len(times)
    numbers = np.cumsum(rng.integers(10**9, 10**11, size=n)).tolist()
    codes = ["".join(row) for row in _SHORTCODE[rng.integers(0, 64, size=(n, 11))]]
    table = MEDIA_TYPES["story" if kind == "story" else platform]
    media = rng.choice(list(table), size=n, p=list(table.values())).tolist()
    caption_at = rng.integers(0, len(texts.CAPTIONS), size=n)
    no_caption = rng.random(n) < 0.08
    captions = [
        None if kind == "story" or bare else texts.CAPTIONS[at]
        for at, bare in zip(caption_at.tolist(), no_caption.tolist(), strict=True)
    ]
    if platform == "facebook":
        page = 100_000_000_000_000 + int(rng.integers(10**13))
        ids = [f"{page}_{1_000_000_000_000 + number}" for number in numbers]
        links = [
            f"https://www.facebook.com/{page}/posts/{post_id.split('_')[1]}" for post_id in ids
        ]
    elif platform == "threads":
        ids = [str(18_050_000_000_000_000 + number) for number in numbers]
        links = [f"https://www.threads.net/@{username}/post/{code}" for code in codes]
    elif kind == "story":
        ids = [str(18_000_000_000_000_000 + number) for number in numbers]
        links = [f"https://www.instagram.com/stories/{username}/{post_id}/" for post_id in ids]
    else:
        ids = [str(17_900_000_000_000_000 + number) for number in numbers]
        links = [
            f"https://www.instagram.com/{'reel' if m == 'VIDEO' else 'p'}/{code}/"
            for m, code in zip(media, codes, strict=True)
        ]
    refs = np.array([posts.ref(post_id) for post_id in ids], dtype=np.int32)
    return Catalog(times.astype(np.int64), ids, captions, media, links, refs)


# --- activities ---------------------------------------------------------------------------


def _activities(
    sandbox: Sandbox, workspace: str, accounts: list[AccountRecord]
) -> list[ActivityRecord]:
    rng = np.random.default_rng(sandbox.seed_for("comment", workspace, "activities"))
    anchor = sandbox.clock.anchor
    weights = np.array([PLATFORM_WEIGHTS[a.platform] for a in accounts])
    result = []
    for index in range(sandbox.config.sizes.activities):
        account = accounts[int(rng.choice(len(accounts), p=weights / weights.sum()))]
        table = TRIGGER_WEIGHTS[account.platform]
        trigger = str(rng.choice(list(table), p=list(table.values())))
        # The first activity runs through the whole year, so every workspace has traffic.
        first = index == 0
        status = (
            "active"
            if first
            else str(rng.choice(["active", "paused", "draft"], p=[0.6, 0.25, 0.15]))
        )
        age_days = rng.uniform(420, 540) if first else rng.uniform(7, 540)
        created = anchor - timedelta(seconds=int(age_days * DAY))
        result.append(_activity(rng, index, account, trigger, status, created, first, anchor))
    return result


def _activity(
    rng: np.random.Generator,
    index: int,
    account: AccountRecord,
    trigger: str,
    status: str,
    created: datetime,
    first: bool,
    anchor: datetime,
) -> ActivityRecord:
    exact = rng.random() < 0.15
    sets = texts.EXACT_KEYWORD_SETS if exact else texts.KEYWORD_SETS
    keywords = list(sets[int(rng.integers(len(sets)))])
    campaign = texts.CAMPAIGNS[int(rng.integers(len(texts.CAMPAIGNS)))]
    can_reply = trigger not in NO_PUBLIC_REPLIES
    can_dm = trigger not in NO_DM
    replies = can_reply and (not can_dm or rng.random() < 0.8)
    public_replies = (
        [
            texts.PUBLIC_REPLIES[int(i)]
            for i in rng.choice(len(texts.PUBLIC_REPLIES), int(rng.integers(1, 4)), False)
        ]
        if replies
        else []
    )
    dm = _dm(rng, account) if can_dm and (not replies or rng.random() < 0.85) else []
    follow_gate = follow_gate_off()
    if dm and trigger in FOLLOW_GATE_TRIGGERS and rng.random() < 0.3:
        follow_gate = {
            "enabled": True,
            "opening_text": "Follow us to unlock the link 💌",
            "button_title": "I'm following ✅",
            "not_following_text": "Looks like you're not following yet. "
            "Follow us and tap the button again!",
        }
    post_scope, post_ids, next_post = _post_scope(rng, account, trigger, created)
    start_at = end_at = None
    if not first and rng.random() < 0.2:  # a campaign with a schedule
        start_at = created + timedelta(seconds=int(rng.integers(0, 3 * DAY)))
        end_at = start_at + timedelta(seconds=int(rng.integers(7 * DAY, 60 * DAY)))
    age = epoch(anchor) - epoch(created)  # at least 7 days
    if status == "paused":  # paused some time after it started running, not today
        updated = created + timedelta(seconds=int(rng.integers(DAY, age - DAY)))
    else:  # edited during its first month at most
        updated = created + timedelta(seconds=int(rng.integers(0, min(30 * DAY, age))))
    return ActivityRecord(
        index=index,
        id=new_uuid(rng),
        account=account,
        name=f"{campaign} – {keywords[0]}" if keywords else campaign,
        status=status,
        trigger=trigger,
        keywords=keywords,
        match="exact" if exact else "contains",
        public_replies=public_replies,
        dm=dm,
        post_scope=post_scope,
        post_ids=post_ids,
        follow_gate=follow_gate,
        start_at=start_at,
        end_at=end_at,
        created_at=created,
        updated_at=updated,
        next_post=next_post,
    )


def _dm(rng: np.random.Generator, account: AccountRecord) -> list[dict]:
    """One DM in one of the three shapes of spec section 2 (DmBlock)."""
    cdn = account.site.replace("https://www.", "https://cdn.")
    shape = rng.random()
    if shape < 0.6:
        blocks = [{"type": "text", "text": texts.DM_TEXTS[int(rng.integers(len(texts.DM_TEXTS)))]}]
        for _ in range(int(rng.integers(0, 3))):
            title = texts.BUTTON_TITLES[int(rng.integers(len(texts.BUTTON_TITLES)))]
            blocks.append(
                {
                    "type": "button",
                    "title": title,
                    "url": f"{account.site}/products/{int(rng.integers(100, 999))}",
                }
            )
        return blocks
    if shape < 0.8:
        return [{"type": "image", "image_url": f"{cdn}/dm/offer-{int(rng.integers(1, 40))}.jpg"}]
    cards = []
    for _ in range(int(rng.integers(2, 6))):
        product = int(rng.integers(100, 999))
        card = {
            "type": "card",
            "title": texts.CARD_TITLES[int(rng.integers(len(texts.CARD_TITLES)))],
        }
        subtitle = texts.CARD_SUBTITLES[int(rng.integers(len(texts.CARD_SUBTITLES)))]
        if subtitle is not None:
            card["subtitle"] = subtitle
        card["image_url"] = f"{cdn}/products/{product}.png"
        card["buttons"] = [{"title": "View product", "url": f"{account.site}/products/{product}"}]
        cards.append(card)
    return cards


def _post_scope(
    rng: np.random.Generator, account: AccountRecord, trigger: str, created: datetime
) -> tuple[str, list[str] | None, tuple[int, int] | None]:
    draw = rng.random()
    catalog = account.posts
    published = int(np.searchsorted(catalog.times, epoch(created), side="right"))
    if trigger in NEXT_POST_TRIGGERS and draw < 0.1 and published < len(catalog.ids):
        return "next_post", None, (int(catalog.refs[published]), int(catalog.times[published]))
    if trigger in ("ig_comment", "fb_comment", "threads_reply") and draw < 0.3 and published:
        recent = range(max(0, published - 10), published)
        chosen = sorted(
            rng.choice(
                recent, size=min(len(recent), int(rng.integers(1, 4))), replace=False
            ).tolist()
        )
        return "selected", [catalog.ids[i] for i in chosen], None
    return "all", None, None


# --- trigger logs -------------------------------------------------------------------------


def matching_texts(keywords: list[str], match: str) -> np.ndarray:
    """Comments (indices into COMMENT_TEXTS) that trigger these keywords, case-insensitively."""
    wanted = [k.lower() for k in keywords]
    hits = [
        i
        for i, text in enumerate(COMMENT_TEXTS)
        if not wanted
        or (text.lower() in wanted if match == "exact" else any(k in text.lower() for k in wanted))
    ]
    return np.array(hits or range(len(COMMENT_TEXTS)), dtype=np.int16)


def event_columns(
    activity: ActivityRecord, t: np.ndarray, u: np.ndarray, users: int, posts: PostTable
) -> dict[str, np.ndarray]:
    """Who commented what on which post; `u` holds 4 uniform draws per event."""
    candidates = matching_texts(activity.keywords, activity.match)
    text = candidates[(u[:, 1] * len(candidates)).astype(np.int64)]
    if activity.trigger == "ig_story":
        text = np.where(u[:, 2] < STORY_TEXTLESS_SHARE, -1, text)
    return {
        "user": (users * u[:, 0] ** 2).astype(np.int32),  # some people comment a lot
        "text": text,
        "post": _post_refs(activity, t, u[:, 3], posts),
        "trigger": np.full(len(t), TRIGGERS.index(activity.trigger), dtype=np.int8),
        "activity": np.full(len(t), activity.index, dtype=np.int32),
    }


def _post_refs(
    activity: ActivityRecord, t: np.ndarray, u: np.ndarray, posts: PostTable
) -> np.ndarray:
    if activity.trigger == "fb_message":
        return np.full(len(t), -1)  # a private message is on no post
    if activity.post_scope == "next_post" and activity.next_post is not None:
        return np.full(len(t), activity.next_post[0])
    if activity.post_scope == "selected" and activity.post_ids:
        refs = np.array([posts.ref(post_id) for post_id in activity.post_ids])
        return refs[(u * len(refs)).astype(np.int64)]
    story = activity.trigger == "ig_story"
    catalog = activity.account.stories if story else activity.account.posts
    if not len(catalog.ids):
        return np.full(len(t), -1)
    latest = np.searchsorted(catalog.times, t, side="right") - 1
    back = (u**3 * (3 if story else 12)).astype(np.int64)  # mostly the newest posts
    return catalog.refs[np.clip(latest - back, 0, None)]


def outcome_columns(platform: str, action: np.ndarray, u: np.ndarray) -> dict[str, np.ndarray]:
    """Success or failure with the platform's reason; `u` holds 2 uniform draws per row."""
    failed = u[:, 0] < FAIL_SHARE[action]
    error = np.full(len(action), -1, dtype=np.int16)
    for code, name in ((PUBLIC_REPLY, "public_reply"), (DM, "dm")):
        refs = ERROR_REFS.get((platform, name))
        rows = failed & (action == code)
        if refs is not None and rows.any():
            error[rows] = refs[(u[rows, 1] * len(refs)).astype(np.int64)]
    return {"status": failed.astype(np.int8), "error": error, "action": action}


def run_window(activity: ActivityRecord, start: int, end: int) -> tuple[int, int] | None:
    """The part of [start, end] in which the activity answered comments."""
    if activity.status == "draft" or not activity.actions():
        return None
    if activity.post_scope == "next_post" and activity.next_post is None:
        return None  # waits for a post that is never published here
    begin = max(start, epoch(activity.created_at))
    if activity.start_at:
        begin = max(begin, epoch(activity.start_at))
    if activity.next_post:
        begin = max(begin, activity.next_post[1])
    if activity.end_at:
        end = min(end, epoch(activity.end_at))
    if activity.status == "paused":
        end = min(end, epoch(activity.updated_at))
    return (begin, end) if end > begin else None


def _hourly_intensity(rng: np.random.Generator, start: int, hours: int) -> np.ndarray:
    """Relative comment volume per hour: daily curve, busier weekends, growth, day noise."""
    hour = np.arange(hours)
    at = start + hour * 3600
    weekday = (at // DAY + 3) % 7  # 1970-01-01 was a Thursday; Monday = 0
    noise = rng.gamma(8.0, 1 / 8.0, size=hours // 24 + 1)[hour // 24]
    return (
        DAILY_CURVE[(at // 3600) % 24]
        * np.where(weekday >= 5, WEEKEND_FACTOR, 1.0)
        * (0.7 + 0.3 * hour / hours)
        * noise
    )


def _history_logs(
    sandbox: Sandbox, workspace: str, activities: list[ActivityRecord], posts: PostTable, users: int
) -> LogTable:
    rng = np.random.default_rng(sandbox.seed_for("comment", workspace, "trigger_logs"))
    end = epoch(sandbox.clock.anchor)
    days = sandbox.config.history_days
    start = midnight(sandbox.clock.anchor.date() - timedelta(days=days - 1))
    intensity = _hourly_intensity(rng, start, -(-(end - start) // 3600))
    cumulative = np.concatenate([[0.0], np.cumsum(intensity)])
    windows = [run_window(a, start, end) for a in activities]
    volume = np.array(
        [
            0.0
            if w is None
            else cumulative[-(-(w[1] - start) // 3600)] - cumulative[(w[0] - start) // 3600]
            for w in windows
        ]
    )
    popularity = rng.lognormal(0.0, 0.8, size=len(activities))
    share = volume * popularity
    counts = rng.multinomial(sandbox.config.sizes.trigger_logs, share / share.sum())
    parts = [
        _activity_rows(rng, a, int(n), w, start, intensity, users, posts)
        for a, n, w in zip(activities, counts, windows, strict=True)
        if n
    ]
    columns = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    return sort_rows(columns)


def _activity_rows(
    rng: np.random.Generator,
    activity: ActivityRecord,
    rows: int,
    window: tuple[int, int],
    start: int,
    intensity: np.ndarray,
    users: int,
    posts: PostTable,
) -> dict[str, np.ndarray]:
    """`rows` log rows: events (comments) at the hourly rhythm, one row per action taken."""
    actions = np.array(activity.actions(), dtype=np.int8)
    events = -(-rows // len(actions))
    first, last = (window[0] - start) // 3600, -(-(window[1] - start) // 3600)
    weights = intensity[first:last]
    hours = first + rng.choice(len(weights), size=events, p=weights / weights.sum())
    when = np.clip(start + hours * 3600 + rng.integers(0, 3600, size=events), *window)
    event = np.repeat(np.arange(events), len(actions))[:rows]
    position = np.tile(np.arange(len(actions)), events)[:rows]
    # The DM follows the public reply by a few seconds.
    t = np.minimum(when[event] + position * rng.integers(1, 4, size=rows), window[1])
    per_event = event_columns(activity, when, rng.random((events, 4)), users, posts)
    columns = {name: column[event] for name, column in per_event.items()}
    columns.update(
        outcome_columns(activity.account.platform, actions[position], rng.random((rows, 2)))
    )
    columns["t"] = t
    return columns


def live_rows(
    activities: list[ActivityRecord | None],
    t: np.ndarray,
    u: np.ndarray,
    users: int,
    posts: PostTable,
) -> dict[str, np.ndarray] | None:
    """Arrivals at times `t` (ascending), one log row each, spread over running activities.

    `u` holds 8 uniform draws per arrival, whether or not it lands, so arrival k always uses
    the same draws. An arrival when no activity runs is lost, as no comment was answered.
    """
    running = [a for a in activities if a is not None and a.status == "active"]
    windows = [run_window(a, 0, 2**62) for a in running]
    running = [a for a, w in zip(running, windows, strict=True) if w]
    if not running:
        return None
    begin = np.array([w[0] for w in windows if w])
    finish = np.array([w[1] for w in windows if w])
    eligible = (t[:, None] >= begin) & (t[:, None] < finish)
    count = eligible.sum(axis=1)
    pick = np.argmax(eligible.cumsum(axis=1) > (u[:, 0] * count)[:, None].astype(np.int64), axis=1)
    parts, order = [], []
    for slot in np.unique(pick[count > 0]):
        rows = np.flatnonzero((pick == slot) & (count > 0))
        activity = running[slot]
        actions = np.array(activity.actions(), dtype=np.int8)
        action = actions[(u[rows, 1] * len(actions)).astype(np.int64)]
        columns = event_columns(activity, t[rows], u[rows, 2:6], users, posts)
        columns.update(outcome_columns(activity.account.platform, action, u[rows, 6:8]))
        columns["t"] = t[rows]
        parts.append(columns)
        order.append(rows)
    if not parts:
        return None
    arrival = np.argsort(np.concatenate(order), kind="stable")  # back to arrival order
    return {name: np.concatenate([p[name] for p in parts])[arrival] for name in parts[0]}
