"""Request and response models of the comment automation API, and the rules that span fields.

Field-level rules (lengths, item counts, enums, required) live on the pydantic models, so a
violation is a 400 naming the field (core handler). Rules across fields or depending on the
block type or trigger are `check_dm` and `check_activity`, raising the same 400 with the field
path in the same dotted form the core handler produces (`dm.1.title`, `post_ids.3`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from sandbox.encoding import Text, bounded_text
from sandbox.errors import invalid

Platform = Literal["instagram", "facebook", "threads"]
Trigger = Literal[
    "ig_comment", "ig_story", "ig_live", "fb_comment", "fb_live", "fb_message", "threads_reply"
]
# Spec section 2, Trigger table.
TRIGGER_PLATFORM: dict[str, str] = {
    "ig_comment": "instagram",
    "ig_story": "instagram",
    "ig_live": "instagram",
    "fb_comment": "facebook",
    "fb_live": "facebook",
    "fb_message": "facebook",
    "threads_reply": "threads",
}
TRIGGERS: tuple[str, ...] = tuple(TRIGGER_PLATFORM)
PLATFORMS: tuple[str, ...] = ("instagram", "facebook", "threads")
# Spec section 2, Activity input fields: where a feature is unavailable or the only place allowed.
NO_PUBLIC_REPLIES = frozenset({"ig_story", "fb_message"})
NO_DM = frozenset({"threads_reply"})
NEXT_POST_TRIGGERS = frozenset({"ig_comment"})
FOLLOW_GATE_TRIGGERS = frozenset({"ig_comment", "ig_live"})

# DM limits (spec section 8).
DM_TEXT_MAX = 1000
DM_TEXT_MAX_WITH_BUTTONS = 640
DM_BUTTONS_MAX = 3
BUTTON_TITLE_MAX = 20
CARDS_MAX = 10
# Pages that show a shared file rather than being the file (spec: "file-sharing share-page
# links are rejected"); a host or any of its subdomains.
SHARE_PAGE_HOSTS = (
    "drive.google.com",
    "docs.google.com",
    "photos.google.com",
    "photos.app.goo.gl",
    "dropbox.com",
    "1drv.ms",
    "onedrive.live.com",
    "icloud.com",
    "wetransfer.com",
    "we.tl",
    "box.com",
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def _iso_text(value: Any) -> Any:
    # JSON carries date-times as ISO 8601 text; pydantic alone would also take Unix numbers.
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 date-time string with timezone")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 date-time string with timezone") from None


IsoDateTime = Annotated[AwareDatetime, BeforeValidator(_iso_text)]


class Strict(BaseModel):
    # Unknown input fields are refused, naming the field (sandbox choice, see README).
    model_config = ConfigDict(extra="forbid")


# --- input --------------------------------------------------------------------------------
# Optional fields default to None but refuse an explicit null, except where the Activity
# response itself shows null (post_ids, schedule, follow_gate texts): what GET returns can be
# sent back.


class FollowGate(Strict):
    enabled: StrictBool
    opening_text: str | None = None
    button_title: bounded_text(max_length=BUTTON_TITLE_MAX) | None = None
    not_following_text: str | None = None


class CardButton(Strict):
    title: Text = Field(max_length=BUTTON_TITLE_MAX)
    url: str


class DmBlock(Strict):
    """One block; which fields a block may carry depends on `type` (see `check_dm`)."""

    type: Literal["text", "button", "image", "card"]
    text: str = None
    title: Text = Field(None, max_length=80, description="button label max 20; card title max 80")
    url: str = None
    image_url: str = None
    subtitle: Text = Field(None, max_length=80)
    buttons: list[CardButton] = Field(None, max_length=DM_BUTTONS_MAX)


class ActivityFields(Strict):
    name: Text = Field(None, max_length=100)
    keywords: list[str] = Field(None, max_length=50)
    match: Literal["contains", "exact"] = None
    public_replies: list[str] = Field(None, max_length=10)
    dm: list[DmBlock] = None
    post_scope: Literal["all", "selected", "next_post"] = None
    post_ids: list[str] | None = Field(None, max_length=50)
    follow_gate: FollowGate = None
    start_at: IsoDateTime | None = None
    end_at: IsoDateTime | None = None


class ActivityCreate(ActivityFields):
    account_id: str
    trigger: Trigger
    status: Literal["draft", "active"] = "draft"


class ActivityUpdate(ActivityFields):
    trigger: Trigger = None
    status: Literal["draft", "active", "paused"] = None


# --- output -------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None
    action_url: str | None = None
    retry_after: int | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class WorkspaceInfo(BaseModel):
    id: str
    name: str | None
    plan: str | None
    trial_ends_at: str | None
    service_status: str
    billing_url: str


class User(BaseModel):
    id: str
    name: str
    email: str


class Usage(BaseModel):
    period: str = Field(description="UTC calendar month, YYYY-MM")
    public_replies: int
    dms: int
    failed: int
    activities: int
    active_activities: int


class ApiKeyInfo(BaseModel):
    prefix: str = Field(description="start of the key, never the whole key")
    scope: Literal["read", "read+write"]


class Workspace(BaseModel):
    user: User
    workspace: WorkspaceInfo
    usage: Usage | None
    api_key: ApiKeyInfo


class Account(BaseModel):
    id: str
    platform: Platform
    handle: str
    username: str | None
    page_name: str | None
    supported_triggers: list[Trigger]
    token_expires_at: str | None
    connected_at: str


class AccountList(BaseModel):
    accounts: list[Account]
    connect_url: str


class Post(BaseModel):
    id: str
    caption: str | None
    media_type: str | None
    timestamp: str | None
    permalink: str | None


class PostList(BaseModel):
    posts: list[Post]


class ActivityStats(BaseModel):
    public_replies_sent: int
    dms_sent: int


class FollowGateOut(BaseModel):
    enabled: bool
    opening_text: str | None
    button_title: str | None
    not_following_text: str | None


class Activity(BaseModel):
    id: str
    name: str
    status: Literal["draft", "active", "paused"]
    account_id: str
    platform: Platform
    trigger: Trigger
    keywords: list[str]
    match: Literal["contains", "exact"]
    public_replies: list[str]
    dm: list[DmBlock]
    post_scope: Literal["all", "selected", "next_post"]
    post_ids: list[str] | None
    follow_gate: FollowGateOut
    start_at: str | None
    end_at: str | None
    created_at: str
    updated_at: str
    dashboard_url: str
    stats: ActivityStats


class ActivityList(BaseModel):
    activities: list[Activity]


class DailyTrigger(BaseModel):
    date: str
    successful_triggers: int


class ActivityDetail(BaseModel):
    activity: Activity
    daily: list[DailyTrigger] = Field(description="the last 14 UTC days, oldest first")


class Deleted(BaseModel):
    deleted: bool
    id: str


class TriggerLog(BaseModel):
    id: str
    activity_id: str | None
    activity_name: str | None
    account_id: str
    trigger: Trigger
    username: str | None
    comment_text: str | None
    post_id: str | None
    action: Literal["public_reply", "dm"]
    status: Literal["success", "failed"]
    error: str | None
    created_at: str


class LogPage(BaseModel):
    logs: list[TriggerLog]
    total: int
    page: int
    limit: int


class DailyStats(BaseModel):
    date: str
    public_replies: int
    dms: int
    failed: int


class StatTotals(BaseModel):
    public_replies: int
    dms: int
    failed: int


class Stats(BaseModel):
    days: int
    daily: list[DailyStats]
    totals: StatTotals


# --- rules across fields ------------------------------------------------------------------

# Spec section 2, DmBlock "Used by" column; `card` also takes `subtitle` and `buttons`.
BLOCK_FIELDS = {
    "text": {"text"},
    "button": {"title", "url"},
    "image": {"image_url"},
    "card": {"title", "subtitle", "image_url", "buttons"},
}
# Required beyond `type`: what a block cannot be shown without (sandbox choice for `card`).
BLOCK_REQUIRED = {
    "text": ("text",),
    "button": ("title", "url"),
    "image": ("image_url",),
    "card": ("title",),
}


def is_https_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return parts.scheme == "https" and bool(parts.hostname)
    except ValueError:
        return False


def is_direct_image_url(url: str) -> bool:
    """A full https URL of a PNG or JPEG file, not a file-sharing page (spec: DmBlock)."""
    if not is_https_url(url):
        return False
    parts = urlsplit(url)
    host = parts.hostname or ""
    shared = any(host == h or host.endswith("." + h) for h in SHARE_PAGE_HOSTS)
    return not shared and parts.path.lower().endswith(IMAGE_SUFFIXES)


def check_dm(blocks: list[DmBlock]) -> None:
    """The block rules and the three DM shapes of spec section 2 (DmBlock) and section 8."""
    for i, block in enumerate(blocks):
        _check_block(f"dm.{i}", block)
    kinds = [block.type for block in blocks]
    if "image" in kinds and len(blocks) != 1:
        raise invalid("dm", "an image block must be the only block of the DM")
    if "card" in kinds:
        if set(kinds) != {"card"}:
            raise invalid("dm", "card blocks form a carousel alone, without other blocks")
        if len(blocks) > CARDS_MAX:
            raise invalid("dm", f"a carousel holds 1 to {CARDS_MAX} cards")
        return
    if "image" in kinds or not blocks:
        return
    buttons = kinds.count("button")
    if buttons > DM_BUTTONS_MAX:
        raise invalid("dm", f"at most {DM_BUTTONS_MAX} buttons per DM")
    if "text" not in kinds:
        raise invalid("dm", "buttons go with at least one text block")
    limit = DM_TEXT_MAX_WITH_BUTTONS if buttons else DM_TEXT_MAX
    if sum(len(block.text) for block in blocks if block.type == "text") > limit:
        raise invalid(
            "dm",
            f"all text together must be at most {limit} characters"
            + (" when buttons are present" if buttons else ""),
        )


def _check_block(path: str, block: DmBlock) -> None:
    sent = block.model_fields_set - {"type"}
    unused = sorted(sent - BLOCK_FIELDS[block.type])
    if unused:
        raise invalid(f"{path}.{unused[0]}", f"not used by {block.type} blocks")
    for name in BLOCK_REQUIRED[block.type]:
        if name not in sent:
            raise invalid(f"{path}.{name}", f"required for {block.type} blocks")
    if block.type == "button":
        if len(block.title) > BUTTON_TITLE_MAX:
            raise invalid(f"{path}.title", f"button label max {BUTTON_TITLE_MAX} characters")
        if not is_https_url(block.url):
            raise invalid(f"{path}.url", "must be a full https URL")
    if block.image_url is not None and not is_direct_image_url(block.image_url):
        raise invalid(
            f"{path}.image_url",
            "must be a direct https URL of a PNG or JPEG file, not a share page",
        )
    for j, button in enumerate(block.buttons or ()):
        if not is_https_url(button.url):
            raise invalid(f"{path}.buttons.{j}.url", "must be a full https URL")


def check_activity(activity: Any) -> None:
    """Feature availability per trigger, post scope and schedule (spec section 2).

    `activity` is the stored form after the change (create, or update merged onto the
    current activity), so a trigger change is checked against the features already set.
    """
    trigger = activity.trigger
    if activity.public_replies and trigger in NO_PUBLIC_REPLIES:
        raise invalid("public_replies", f"public replies are unavailable for {trigger}")
    if activity.dm and trigger in NO_DM:
        raise invalid("dm", f"a DM is unavailable for {trigger}")
    if activity.follow_gate["enabled"] and trigger not in FOLLOW_GATE_TRIGGERS:
        raise invalid("follow_gate", "the follow gate is for ig_comment and ig_live only")
    if activity.post_scope == "next_post" and trigger not in NEXT_POST_TRIGGERS:
        raise invalid("post_scope", "next_post is for ig_comment only")
    if activity.post_scope == "selected" and not activity.post_ids:
        raise invalid("post_ids", "post_scope selected needs at least one post id")
    if activity.post_scope != "selected" and activity.post_ids:
        raise invalid("post_ids", "post_ids apply to post_scope selected only")
    if activity.start_at and activity.end_at and activity.end_at <= activity.start_at:
        raise invalid("end_at", "must be after start_at")
