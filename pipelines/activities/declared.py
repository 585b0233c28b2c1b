"""The activities folder (`ACTIVITIES_DIR`, default `activities/`): one TOML file per comment
automation activity, read and checked whole before anything is asked of the service.

A file holds the service's activity input fields (comment automation spec, "Activity input
fields", and the DmBlock and follow_gate tables) plus `connection` (default `default`, a
comment connection of the settings, docs/settings.md) and `delete` (default false). Its `name`
is the activity's identity within its connection. A field left out is the service's
default (`status` draft, `match` contains, `post_scope` all, no keywords, replies, DM, posts,
gate or schedule): the file is the whole activity, so what the dashboard set beside it is
put back.

Every rule the spec states is checked here, mirroring the sandbox where the spec says "not
shown" (sandbox/README.md, "Comment automation"): a mistake is one `SetupError` line naming
the file and the field (`activities/spring.toml: dm.0.title: ...`), exit 2.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic import BeforeValidator, ConfigDict, Field

from pipelines.activities.state import comparable
from pipelines.errors import SetupError
from pipelines.mistakes import closest

#: The setting that names the folder, and its default.
ACTIVITIES_DIR = "ACTIVITIES_DIR"
DEFAULT_DIR = "activities"

Trigger = Literal[
    "ig_comment", "ig_story", "ig_live", "fb_comment", "fb_live", "fb_message", "threads_reply"
]
#: Spec, "Activity input fields": where a feature is unavailable, or the only place allowed.
NO_PUBLIC_REPLIES = frozenset({"ig_story", "fb_message"})
NO_DM = frozenset({"threads_reply"})
NEXT_POST_TRIGGERS = frozenset({"ig_comment"})
FOLLOW_GATE_TRIGGERS = frozenset({"ig_comment", "ig_live"})
#: Spec, "Limits": the DM's.
DM_TEXT_MAX, DM_TEXT_MAX_WITH_BUTTONS, DM_BUTTONS_MAX, CARDS_MAX = 1000, 640, 3, 10
BUTTON_TITLE_MAX = 20
#: The fields a block of each type carries (spec, DmBlock "Used by"), and those it needs
#: (the sandbox's choice for `card`: its title).
BLOCK_FIELDS = {
    "text": {"text"},
    "button": {"title", "url"},
    "image": {"image_url"},
    "card": {"title", "subtitle", "image_url", "buttons"},
}
BLOCK_REQUIRED = {
    "text": ("text",),
    "button": ("title", "url"),
    "image": ("image_url",),
    "card": ("title",),
}
#: File-sharing pages, which the spec says are refused as images (the sandbox's list).
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


def _moment(value: Any) -> Any:
    """TOML's own offset date-time, or ISO 8601 text; either needs its timezone."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO 8601 date-time with timezone") from None
    if isinstance(value, datetime) and value.utcoffset() is None:
        raise ValueError("needs a timezone (an offset such as +00:00 or Z)")
    return value


Moment = Annotated[datetime, BeforeValidator(_moment)]


class _Strict(pydantic.BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FollowGate(_Strict):
    enabled: bool
    opening_text: str | None = None
    button_title: Annotated[str, Field(max_length=BUTTON_TITLE_MAX)] | None = None
    not_following_text: str | None = None


class CardButton(_Strict):
    title: str = Field(max_length=BUTTON_TITLE_MAX)
    url: str


class DmBlock(_Strict):
    type: Literal["text", "button", "image", "card"]
    text: str | None = None
    title: Annotated[str, Field(max_length=80)] | None = None
    url: str | None = None
    image_url: str | None = None
    subtitle: Annotated[str, Field(max_length=80)] | None = None
    buttons: Annotated[list[CardButton], Field(max_length=DM_BUTTONS_MAX)] | None = None


class ActivityFile(_Strict):
    """One file: the input fields with the service's defaults, and where it belongs."""

    connection: str = "default"
    name: str = Field(min_length=1, max_length=100)
    delete: bool = False
    account_id: str | None = None
    trigger: Trigger | None = None
    keywords: list[str] = Field([], max_length=50)
    match: Literal["contains", "exact"] = "contains"
    public_replies: list[str] = Field([], max_length=10)
    dm: list[DmBlock] = []
    post_scope: Literal["all", "selected", "next_post"] = "all"
    post_ids: list[str] = Field([], max_length=50)
    follow_gate: FollowGate = FollowGate(enabled=False)
    start_at: Moment | None = None
    end_at: Moment | None = None
    status: Literal["draft", "active", "paused"] = "draft"


@dataclass(frozen=True)
class Declared:
    """One file, checked: where it is, its connection and name, and the activity it wants
    (`wanted`, in the form `pipelines/activities/state.py` compares; None to delete)."""

    file: str
    connection: str
    name: str
    wanted: dict[str, Any] | None


def activities_dir() -> Path:
    return Path(os.environ.get(ACTIVITIES_DIR) or DEFAULT_DIR)


def _declared_by(connection: str) -> str:
    """What sets a comment connection of that name (docs/settings.md)."""
    if connection == "default":
        return "COMMENT_AUTOMATION_URL and COMMENT_AUTOMATION_API_KEY set it"
    return (
        f"a `[[connections.comment]]` entry with name = {json.dumps(connection)} in the "
        "settings file (sync.toml, or the file SYNC_CONFIG names) sets it"
    )


def read_folder(folder: Path, connections: list[str]) -> list[Declared]:
    """Every `*.toml` of `folder`, checked; `connections`: the comment connections set."""
    if not folder.is_dir():
        raise SetupError(
            f"{ACTIVITIES_DIR}={folder} is not a folder: create it with one TOML file per "
            "activity, or point ACTIVITIES_DIR at yours (docs/activities.md)"
        )
    declared = [read_file(path, connections) for path in sorted(folder.glob("*.toml"))]
    seen: dict[tuple[str, str], str] = {}
    for one in declared:
        first = seen.setdefault((one.connection, one.name), one.file)
        if first != one.file:
            raise SetupError(
                f"{one.file}: name: {one.name!r} is also declared by {first} in connection "
                f"{one.connection!r}; a name is an activity's identity, give each its own"
            )
    return declared


def read_file(path: Path, connections: list[str]) -> Declared:
    where = str(path)
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise SetupError(f"{where} cannot be read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise SetupError(f"{where} is not valid TOML: {error}") from None
    try:
        parsed = ActivityFile.model_validate(document)
    except pydantic.ValidationError as error:
        raise SetupError(f"{where}: {_told(error.errors()[0])}") from None
    problem = _problem(parsed)
    if problem is None and parsed.connection not in connections:
        problem = (
            "connection",
            f"no comment connection {parsed.connection!r} is set"
            f"{closest(parsed.connection, connections)}; set: {', '.join(connections) or 'none'}"
            f"; {_declared_by(parsed.connection)} (docs/settings.md)",
        )
    if problem is not None:
        raise SetupError(f"{where}: {problem[0]}: {problem[1]}")
    wanted = None if parsed.delete else wanted_of(parsed)
    return Declared(where, parsed.connection, parsed.name, wanted)


def _told(error: dict) -> str:
    field = ".".join(str(part) for part in error["loc"]) or "the file"
    if error["type"] == "extra_forbidden":
        known = list(ActivityFile.model_fields)
        hint = closest(str(error["loc"][-1]), known) if len(error["loc"]) == 1 else ""
        return f"{field}: unknown field{hint}"
    if error["type"] == "missing":
        return f"{field}: required: add it"
    return f"{field}: {error['msg'].removeprefix('Value error, ')}"


def wanted_of(parsed: ActivityFile) -> dict[str, Any]:
    """The activity the file wants, every field present (the comparable form of
    pipelines/activities/state.py)."""
    values = parsed.model_dump(exclude={"connection", "delete"})
    values["dm"] = [block.model_dump(exclude_none=True) for block in parsed.dm]
    return comparable(values)


# -- rules across fields ------------------------------------------------------------------


def _problem(a: ActivityFile) -> tuple[str, str] | None:
    """The first rule across fields the file breaks (spec, "Activity input fields",
    DmBlock), as (field, reason); None when it keeps them all."""
    if a.delete:
        return None
    for name in ("account_id", "trigger"):
        if getattr(a, name) is None:
            return name, "required: add it (or `delete = true` to delete the activity)"
    trigger = a.trigger
    if a.public_replies and trigger in NO_PUBLIC_REPLIES:
        return "public_replies", f"public replies are unavailable for {trigger}"
    if a.dm and trigger in NO_DM:
        return "dm", f"a DM is unavailable for {trigger}"
    if a.follow_gate.enabled and trigger not in FOLLOW_GATE_TRIGGERS:
        return "follow_gate", "the follow gate is for ig_comment and ig_live only"
    if a.post_scope == "next_post" and trigger not in NEXT_POST_TRIGGERS:
        return "post_scope", "next_post is for ig_comment only"
    if a.post_scope == "selected" and not a.post_ids:
        return "post_ids", "post_scope selected needs at least one post id"
    if a.post_scope != "selected" and a.post_ids:
        return "post_ids", "post_ids apply to post_scope selected only"
    if a.start_at and a.end_at and a.end_at <= a.start_at:
        return "end_at", "must be after start_at"
    return _dm_problem(a.dm)


def _dm_problem(blocks: list[DmBlock]) -> tuple[str, str] | None:
    """The block rules and the DM's three shapes: text blocks with up to 3 buttons, one
    image alone, or a carousel of 1 to 10 cards alone."""
    for i, block in enumerate(blocks):
        problem = _block_problem(f"dm.{i}", block)
        if problem:
            return problem
    kinds = [block.type for block in blocks]
    if "image" in kinds and len(blocks) != 1:
        return "dm", "an image block must be the only block of the DM"
    if "card" in kinds:
        if set(kinds) != {"card"}:
            return "dm", "card blocks form a carousel alone, without other blocks"
        if len(blocks) > CARDS_MAX:
            return "dm", f"a carousel holds 1 to {CARDS_MAX} cards"
        return None
    if "image" in kinds or not blocks:
        return None
    buttons = kinds.count("button")
    if buttons > DM_BUTTONS_MAX:
        return "dm", f"at most {DM_BUTTONS_MAX} buttons per DM"
    if "text" not in kinds:
        return "dm", "buttons go with at least one text block"
    limit = DM_TEXT_MAX_WITH_BUTTONS if buttons else DM_TEXT_MAX
    if sum(len(block.text or "") for block in blocks if block.type == "text") > limit:
        return "dm", f"all text together must be at most {limit} characters" + (
            " when buttons are present" if buttons else ""
        )
    return None


def _block_problem(path: str, block: DmBlock) -> tuple[str, str] | None:
    sent = {name for name in block.model_fields_set - {"type"} if getattr(block, name) is not None}
    unused = sorted(sent - BLOCK_FIELDS[block.type])
    if unused:
        return f"{path}.{unused[0]}", f"not used by {block.type} blocks"
    for name in BLOCK_REQUIRED[block.type]:
        if name not in sent:
            return f"{path}.{name}", f"required for {block.type} blocks"
    if block.type == "button":
        if len(block.title or "") > BUTTON_TITLE_MAX:
            return f"{path}.title", f"a button label is at most {BUTTON_TITLE_MAX} characters"
        if not _https(block.url or ""):
            return f"{path}.url", "must be a full https URL"
    if block.image_url is not None and not _direct_image(block.image_url):
        return f"{path}.image_url", "must be a direct https URL of a PNG or JPEG, not a share page"
    for j, button in enumerate(block.buttons or ()):
        if not _https(button.url):
            return f"{path}.buttons.{j}.url", "must be a full https URL"
    return None


def _https(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname)


def _direct_image(url: str) -> bool:
    if not _https(url):
        return False
    parts = urlsplit(url)
    host = parts.hostname or ""
    shared = any(host == h or host.endswith("." + h) for h in SHARE_PAGE_HOSTS)
    return not shared and parts.path.lower().endswith((".png", ".jpg", ".jpeg"))
