"""Comment automation service client."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, NamedTuple, NotRequired, get_origin, get_type_hints

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pydantic
from typing_extensions import TypedDict

from pipelines.clients.base import Model, Service
from pipelines.lake.drift import extra_column, tolerated
from pipelines.lake.schemas import Day, Moment, arrow_fields
from pipelines.stream import EXTRA, TIMESTAMP
from pipelines.transport import Rate, Transport, whole_json

#: The service's documented limit: 120 requests per minute per key, every operation.
REQUESTS_PER_MINUTE = 120
#: Documented bounds: `limit` 1..200 on /logs; `days` 1..365 on /logs and 1..90 on /stats.
LOGS_PAGE_LIMIT = 200
LOGS_MAX_DAYS = 365
STATS_MAX_DAYS = 90
ACTIVITY_TREND_DAYS = 14


class WorkspaceInfo(Model):
    id: str
    """The workspace's id."""
    name: str | None = None
    """The workspace's name; null when it has none."""
    plan: str | None = None
    """The workspace's plan, as the service names it (no values are documented); null when
    it has none."""
    trial_ends_at: Moment | None = None
    """When the workspace's trial ends, in UTC; null when the service gives none."""
    service_status: str
    """The service's status for the workspace, as the service sends it (no values are
    documented)."""
    billing_url: str
    """The address (URL) of the workspace's billing page."""


class Me(Model):
    user: dict[str, Any] | None = None
    """The key's `user` object of `GET /me`, as JSON text; its inner fields are not
    documented."""
    workspace: WorkspaceInfo
    usage: dict[str, Any] | None = None
    """The workspace's `usage` object of `GET /me`, as JSON text; its inner fields are not
    documented. Null when the service gives none."""
    api_key: dict[str, Any] | None = None


class Account(Model):
    id: str
    """The connected account's id (an activity's or a trigger log's `account_id`)."""
    platform: str
    """The account's platform: `instagram`, `facebook` or `threads`."""
    handle: str
    """The account's handle on its platform."""
    username: str | None = None
    """The account's username; null when the service gives none."""
    page_name: str | None = None
    """The account's page name; null when the service gives none."""
    supported_triggers: list[str]
    """The triggers the account supports, each one of an activity's `trigger` values
    (`ig_comment`, `ig_story`, `ig_live`, `fb_comment`, `fb_live`, `fb_message`,
    `threads_reply`)."""
    token_expires_at: Moment | None = None
    """When the account's platform token expires, in UTC; null when none is given. A new
    token takes a browser login at the platform (`connect_url` of `GET /accounts`)."""
    connected_at: Moment
    """When the account was connected, in UTC."""


class Accounts(Model):
    accounts: list[Account]
    connect_url: str


class Post(Model):
    id: str
    """The post's id (what an activity's `post_ids` holds; a story's id for stories)."""
    caption: str | None = None
    """The post's caption; null when it has none."""
    media_type: str | None = None
    """The post's media type, as the platform gives it (no values are documented); null
    when none is given."""
    timestamp: Moment | None = None
    """The post's time, in UTC, as the platform gives it; null when none is given."""
    permalink: str | None = None
    """The post's permanent link (URL) on its platform; null when none is given."""


class Posts(Model):
    posts: list[Post]


class ActivityStats(Model):
    public_replies_sent: int
    """Public replies the activity has sent in all (its `stats` total)."""
    dms_sent: int
    """DMs the activity has sent in all (its `stats` total)."""


class Activity(Model):
    id: str
    """The activity's id (a uuid)."""
    name: str
    """Internal name."""
    status: str
    """`draft`, `active` or `paused`."""
    account_id: str
    """The connected account that replies (an account's `id`)."""
    platform: str
    """`instagram`, `facebook` or `threads`."""
    trigger: str
    """What triggers it: `ig_comment` (a comment on a post or Reel), `ig_story` (a reply to,
    or mention in, a Story), `ig_live` (a comment during an Instagram live), `fb_comment`
    (a comment on a Page post), `fb_live` (a comment during a Facebook live), `fb_message`
    (a private message to the Page) or `threads_reply` (a reply to a Threads post)."""
    keywords: list[str]
    """The keywords a comment is matched against; case-insensitive; empty: every comment
    triggers."""
    match: str
    """`contains` (the comment contains a keyword) or `exact` (it equals one)."""
    public_replies: list[str]
    """The public reply texts; one is picked at random per reply."""
    dm: list[dict[str, Any]]
    """The DM's blocks (`type` `text`, `button`, `image` or `card`), as JSON text."""
    post_scope: str
    """`all` (every post), `selected` (only `post_ids`) or `next_post` (the next post published)."""
    post_ids: list[str] | None = None
    """The posts of scope `selected`; story ids for `ig_story`. Null when none are set."""
    follow_gate: dict[str, Any] | None = None
    """Asks the commenter to follow the account before the DM content is delivered: the
    gate (`enabled`, `opening_text`, `button_title`, `not_following_text`) as JSON text;
    null: no gate."""
    start_at: Moment | None = None
    """When the activity starts, in UTC; null when none is set."""
    end_at: Moment | None = None
    """When the activity ends, in UTC: after `start_at`. Null when none is set."""
    created_at: Moment
    """When the activity was created, in UTC."""
    updated_at: Moment
    """When the activity was last updated, in UTC."""
    dashboard_url: str
    """The activity's page (URL) in the service's dashboard."""
    stats: ActivityStats | None = None


class Activities(Model):
    activities: list[Activity]


class TrendDay(Model):
    date: Day
    """The UTC day, one of the 14 of the activity's trend."""
    successful_triggers: int
    """The activity's successful triggers that day."""


class ActivityDetail(Model):
    activity: Activity
    daily: list[TrendDay]


class TriggerLog(TypedDict):
    """One trigger log as a plain dict: a year of logs is a million rows, and dicts validated
    straight from the body cost a fraction of models (bench: pull throughput). Fields the
    service adds later are kept in `_extra` (`_log_table`)."""

    id: str
    """The trigger log's id."""
    activity_id: NotRequired[str | None]
    """The activity that was triggered (an activity's `id`); null when the service gives
    none."""
    activity_name: NotRequired[str | None]
    """That activity's internal name; null when the service gives none."""
    account_id: str
    """The connected account the activity replies as (an account's `id`)."""
    trigger: str
    """The trigger that fired: `ig_comment`, `ig_story`, `ig_live`, `fb_comment`, `fb_live`,
    `fb_message` or `threads_reply` (as an activity's `trigger`)."""
    username: NotRequired[str | None]
    """The commenter's username; null when the service gives none."""
    comment_text: NotRequired[str | None]
    """The text of the comment that triggered the activity; null when the service gives
    none."""
    post_id: NotRequired[str | None]
    """The post commented on (a post's `id`); null when the service gives none."""
    action: str
    """What the activity did, as the service names it; the service documents no list of
    values."""
    status: str
    """`success` or `failed`: set when the log is written, never changed."""
    error: NotRequired[str | None]
    """The error of the attempt, as the service words it; null when there is none."""
    created_at: Moment
    """When the log was written, in UTC. Its UTC day is the row's `date`."""


class LogsPage(TypedDict):
    #: Checked one by one (`_log_rows_table`), so one log's drift does not fail the page.
    logs: list[dict[str, Any]]
    total: int
    page: int
    limit: int


LOGS_PAGE = pydantic.TypeAdapter(LogsPage)

#: A trigger log's fields as Arrow columns: texts, and `created_at` in UTC seconds. The
#: `trigger_logs` stream is these after its `connection` (`pipelines/streams/comment/__init__.py`).
LOG_SCHEMA = pa.schema(arrow_fields(TriggerLog))
_LOG_TEXTS = pa.struct([(name, pa.string()) for name in LOG_SCHEMA.names])
_PAGE_TEXTS = pa.schema([("logs", pa.list_(_LOG_TEXTS)), ("total", pa.int64())])
#: TriggerLog's fields without NotRequired. Not its `__required_keys__`: the annotations are
#: strings under `from __future__ import annotations`, so the class cannot tell them apart.
_REQUIRED = tuple(
    name
    for name, hint in get_type_hints(TriggerLog, include_extras=True).items()
    if get_origin(hint) is not NotRequired
)


class LogTable(NamedTuple):
    """One page of trigger logs as an Arrow table (`LOG_TABLE`), and the list's total."""

    logs: pa.Table
    total: int


#: A page's logs: their fields, then what the schema does not hold (`pipelines/lake/drift.py`).
LOG_TABLE = pa.schema([*LOG_SCHEMA, pa.field(EXTRA.name, EXTRA.type)])
_LOG = pydantic.TypeAdapter(TriggerLog)
_ONE_LINE, _LINES = (
    pajson.ParseOptions(
        explicit_schema=_PAGE_TEXTS, unexpected_field_behavior="infer", newlines_in_values=lines
    )
    for lines in (False, True)
)


def log_tables(bodies: list[bytes]) -> list[LogTable | None]:
    """Pages of logs read as one: Arrow parses them in one call, in C++ without the GIL, and
    the columns are made once for all of them; each call costs a fixed part besides its
    rows (bench: pull). A field the service added comes as a column of its own, kept in
    `_extra`. When they cannot all be read so, each is read alone; None for a page that
    cannot (a time without offset, a missing field, a value of another type, a cut answer),
    which `log_table` reads the general way."""
    try:
        return list(_read_pages(bodies))
    except (pa.ArrowInvalid, ValueError):
        if len(bodies) == 1:
            return [None]
        return [table for body in bodies for table in log_tables([body])]


def _read_pages(bodies: list[bytes]) -> list[LogTable]:
    # Each body on one line, as the service sends it, is a line of one JSON document per
    # page; one pretty-printed has line breaks between its values, so it is read alone.
    if len(bodies) > 1 and any(b"\n" in body for body in bodies):
        raise ValueError("not one line each")
    text = b"\n".join(bodies)
    options = _ONE_LINE if b"\n" not in bodies[0] else _LINES
    read = pajson.ReadOptions(use_threads=False, block_size=max(len(text), 1 << 16))
    pages = pajson.read_json(pa.BufferReader(text), read_options=read, parse_options=options)
    if pages.num_rows != len(bodies) or any(pages[name].null_count for name in _PAGE_TEXTS.names):
        raise ValueError("not one page each")
    listed = pages["logs"].combine_chunks()
    logs = pa.Table.from_struct_array(listed.flatten())
    if any(logs[name].null_count for name in _REQUIRED):
        raise ValueError("a required field is missing")
    moments = pc.cast(logs["created_at"], TIMESTAMP)
    logs = logs.set_column(logs.schema.get_field_index("created_at"), "created_at", moments)
    new = logs.select([name for name in logs.column_names if name not in LOG_SCHEMA.names])
    extra = extra_column(new, None, (), logs.num_rows)
    logs = logs.select(LOG_SCHEMA.names).append_column(EXTRA.name, extra)
    if not logs.schema.equals(LOG_TABLE):  # a cast of the same types still copies
        logs = logs.cast(LOG_TABLE, safe=False)
    offsets = listed.offsets.to_pylist()
    totals = pages["total"].to_pylist()
    return [
        LogTable(logs.slice(start - offsets[0], end - start), total)
        for start, end, total in zip(offsets, offsets[1:], totals, strict=False)
    ]


def _log_table(body: bytes) -> LogTable:
    """One page: read by Arrow (`log_tables`), else checked log by log, which names what is
    wrong with a body that is not one."""
    (table,) = log_tables([body])
    if table is not None:
        return table
    validated = whole_json(LOGS_PAGE.validate_json)(body)
    return LogTable(_log_rows_table(validated["logs"]), validated["total"])


def _as_utc(text: str | None) -> datetime | None:
    if text is None:
        return None
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _log_rows_table(logs: list[dict]) -> pa.Table:
    """Logs as a `LOG_TABLE` table, each checked against `TriggerLog` field by field (what
    does not fit is None, and kept in `_extra`); a time without offset is read as UTC."""
    checked = [tolerated(_LOG, LOG_SCHEMA.names, log) for log in logs]
    columns = {name: [log.get(name) for log, _ in checked] for name in LOG_SCHEMA.names}
    moments = pa.array(columns.pop("created_at"), pa.string())
    try:
        created = pc.cast(moments, TIMESTAMP)
    except pa.ArrowInvalid:  # some without offset: one by one
        created = pa.array([_as_utc(text) for text in moments.to_pylist()], TIMESTAMP)
    extra = pa.array([extra for _, extra in checked], EXTRA.type)
    table = pa.table({**columns, "created_at": created, EXTRA.name: extra})
    return table.cast(LOG_TABLE, safe=False)


class StatsDay(Model):
    date: str
    """The UTC day the figures count (landed as the partition, `date`)."""
    public_replies: int
    """Public replies sent that UTC day."""
    dms: int
    """DMs sent that UTC day."""
    failed: int
    """Failed attempts that UTC day."""


class Stats(Model):
    days: int
    daily: list[StatsDay]
    totals: dict[str, int]


class CommentClient:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def me(self) -> Me:
        return self.transport.get("/me", Me)

    def accounts(self) -> Accounts:
        return self.transport.get("/accounts", Accounts)

    def posts(self, account_id: str, kind: Literal["posts", "story"]) -> Posts:
        return self.transport.get(f"/accounts/{account_id}/posts", Posts, params={"kind": kind})

    def activities(self) -> Activities:
        return self.transport.get("/activities", Activities)

    def activity(self, activity_id: str) -> ActivityDetail:
        return self.transport.get(f"/activities/{activity_id}", ActivityDetail)

    def create_activity(self, body: dict[str, Any]) -> Activity:
        """POST: not sent again after a lost answer (a second one would make a second
        activity); pipelines/activities/ finds one made so by its name the next time."""
        answer = self.transport.request_json(
            "POST", "/activities", json_body=body, idempotent=False
        )
        return Activity.model_validate(answer)

    def update_activity(self, activity_id: str, body: dict[str, Any]) -> Activity:
        """PATCH of the fields in `body`: the same body sent twice leaves the same activity."""
        answer = self.transport.request_json("PATCH", f"/activities/{activity_id}", json_body=body)
        return Activity.model_validate(answer)

    def delete_activity(self, activity_id: str) -> None:
        """DELETE the activity and, at the service, its trigger logs."""
        self.transport.request_json("DELETE", f"/activities/{activity_id}")

    def logs(self, *, days: int, page: int, limit: int = LOGS_PAGE_LIMIT) -> LogsPage:
        params = {"days": days, "page": page, "limit": limit}
        return self.transport.get("/logs", LOGS_PAGE, params=params)

    def log_table(self, *, days: int, page: int, limit: int = LOGS_PAGE_LIMIT) -> LogTable:
        """A page of `logs` as Arrow: what a pull lands (`logs` serves probes and checks)."""
        params = {"days": days, "page": page, "limit": limit}
        return self.transport.get_decoded("/logs", _log_table, params=params)

    def log_body(self, *, days: int, page: int, limit: int = LOGS_PAGE_LIMIT) -> bytes:
        """A page of `logs` as the service sent it, to be read with others (`log_tables`);
        one that cannot be is asked for again by `log_table`."""
        params = {"days": days, "page": page, "limit": limit}
        return self.transport.get_decoded("/logs", bytes, params=params)

    def stats(self, days: int) -> Stats:
        return self.transport.get("/stats", Stats, params={"days": days})


class CommentAutomation(Service):
    """Connections are workspaces: one key each."""

    service: ClassVar[str] = "comment"
    rates: ClassVar[dict[str, Rate]] = {"default": Rate(REQUESTS_PER_MINUTE)}

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def client(self, transport: Transport) -> CommentClient:
        return CommentClient(transport)
