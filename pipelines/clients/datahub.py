"""Customer data hub client, both regions.

The hub documents two paths (`get_task_status`, `list_custom_fields`); every other path is the
choice written in `PATHS` (the sandbox's, sandbox/README.md), which `[paths.datahub]` in
sync.toml overrides per operation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date
from typing import Any, ClassVar, TypeVar

import pydantic

from pipelines.clients.base import Model, Parsed, Service, check_path_overrides, fill_path
from pipelines.clients.polling import wait_for_job
from pipelines.transport import Rate, Transport

T = TypeVar("T")

#: operationId -> path template. Only `get_task_status` and `list_custom_fields` are the hub's
#: documented paths; it leaves the others "not shown".
PATHS: dict[str, str] = {
    "list_custom_fields": "/cdh/v1/custom-fields/",
    "list_broadcasts": "/v1/broadcasts",
    "get_broadcast_report": "/v1/broadcasts/{broadcast_id}/report",
    "export_members": "/v1/members/export",
    "get_task_status": "/task/{task_id}",
    "download_member_export": "/v1/members/export/{task_id}/file",
    "update_channel_contact_profile": "/v1/contacts/profile",
    "import_members": "/v1/members/import",
    "submit_behavior_event": "/v1/events/behavior",
    "submit_coupon_record": "/v1/records/coupon",
    "submit_order_record": "/v1/records/order",
    "submit_order_fulfillment_record": "/v1/records/order-fulfillment",
    "submit_membership_tier_record": "/v1/records/membership-tier",
    "submit_point_record": "/v1/records/point",
    "submit_reservation_record": "/v1/records/reservation",
}
#: The operation that submits each pushed record type (the hub names one per type).
SUBMIT_OPERATIONS = {
    **{
        kind: f"submit_{kind}_record"
        for kind in (
            "coupon",
            "order",
            "order_fulfillment",
            "membership_tier",
            "point",
            "reservation",
        )
    },
    "behavior_event": "submit_behavior_event",
}
#: The hub's documented limit: a report's date range spans at most 60 days, both ends included.
REPORT_MAX_DAYS = 60
#: The hub documents `success`, and notes that a completed import is also shown as `done`.
TASK_DONE = frozenset({"success", "done"})
TASK_FAILED = "failed"


class CustomFieldOption(Model):
    id: int
    """The option's id."""
    key: str
    """What a profile update sends to choose the option (never its name)."""
    name: str | None = None
    """The option's name."""
    description: str | None = None
    """The option's description."""
    position: int | None = None
    """The option's position among the field's options."""
    active: bool | None = None
    """Whether the option is active."""


class CustomField(Model):
    id: int
    """The custom field's id."""
    name: str | None = None
    """The custom field's name."""
    key: str
    """The field's key: a profile update names the field `cl_custom_<key>`."""
    type: str
    """The value type: `text`, `number`, `date`, `datetime` or `single_select` (the
    service's sample is `text`)."""
    description: str | None = None
    """The custom field's description."""
    slot_number: int | None = None
    """The field's slot number, as the service sends it; the service does not document
    it further."""
    active: bool
    """True: active; false: archived."""
    #: Only `single_select` fields carry options; others answer null.
    options: list[CustomFieldOption] | None = None
    """The options of a `single_select` field (`id`, `key`, `name`, `description`,
    `position`, `active`), in the field's order; null for every other type."""


class Broadcast(Model):
    id: int
    """The broadcast's id (what `get_broadcast_report` takes)."""
    source: str | None = None
    """`maac` or `caac`."""
    name: str | None = None
    """The broadcast's name."""
    sent_date: Parsed | None = None
    """When the broadcast was sent, or is to be sent (in the future while scheduled), in
    UTC."""
    status: str | None = None
    """The broadcast's status (sample `sent`; the service documents no full list)."""
    created_at: Parsed | None = None
    """When the broadcast was created, in UTC."""


class BroadcastReport(Model):
    """Figures over the asked range; further fields are undocumented ("not shown") and
    kept in `model_extra`."""

    name: str | None = None
    """The broadcast's name."""
    source: str | None = None
    """`maac` or `caac`."""
    sent_date: Parsed | None = None
    """When the broadcast was sent, in UTC; in the future while it is scheduled."""
    segment_name: str | None = None
    """The name of the broadcast's segment, as the service sends it."""
    sent: int
    """The sent count over the report's date range (`start_date` to `end_date`)."""
    open_count: int
    """The open count over the report's date range."""
    clicks: int
    """The click count over the report's date range."""


class Task(Model):
    id: int
    category: str
    status: str
    result: dict[str, Any] | None = None
    created_at: Parsed | None = None
    updated_at: Parsed | None = None


class ExportResult(Model):
    """An export task's `result` (undocumented by the hub; the sandbox's choice)."""

    download_url: str | None = None
    row_count: int


_custom_fields = pydantic.TypeAdapter(list[CustomField])
_broadcasts = pydantic.TypeAdapter(list[Broadcast])


class DataHubClient:
    def __init__(self, transport: Transport, paths: dict[str, str]) -> None:
        self.transport = transport
        self.paths = paths

    def _path(self, operation: str, **values: object) -> str:
        return fill_path(self.paths[operation], **values)

    def list_custom_fields(self, active: bool | None = None) -> list[CustomField]:
        """`active` None lists every field, archived ones included (the hub's documented query)."""
        params = {} if active is None else {"active": str(active).lower()}
        body = self.transport.request_json("GET", self._path("list_custom_fields"), params=params)
        return _custom_fields.validate_python(body)

    def list_broadcasts(self) -> list[Broadcast]:
        return _broadcasts.validate_python(
            self.transport.request_json("GET", self._path("list_broadcasts"))
        )

    def get_broadcast_report(self, broadcast_id: int, start: date, end: date) -> BroadcastReport:
        if (end - start).days + 1 > REPORT_MAX_DAYS:
            raise ValueError(f"a report spans at most {REPORT_MAX_DAYS} days: {start}..{end}")
        return self.transport.get(
            self._path("get_broadcast_report", broadcast_id=broadcast_id),
            BroadcastReport,
            params={"start_date": start.isoformat(), "end_date": end.isoformat()},
        )

    def export_members(self) -> Task:
        # Starting an export changes nothing on the service, so retrying a start whose answer
        # was lost is safe: at worst an unused export task is left behind.
        body = self.transport.request_json(
            "POST", self._path("export_members"), json_body={}, idempotent=True
        )
        return Task.model_validate(body)

    def get_task_status(self, task_id: int) -> Task:
        return self.transport.get(self._path("get_task_status", task_id=task_id), Task)

    def wait_for_task(self, task: Task, *, deadline_seconds: float, what: str) -> Task:
        """Poll `task` until it is done; fail when it fails or the deadline passes."""
        return wait_for_job(
            lambda: task if task.status in TASK_DONE else self.get_task_status(task.id),
            finished=lambda state: state.status in TASK_DONE,
            failed=lambda state: state.status == TASK_FAILED,
            deadline_seconds=deadline_seconds,
            describe=lambda state: f"{what}: task {state.id} (status {state.status!r})",
        )

    # -- push --------------------------------------------------------------------------------

    def submit(self, record_type: str, body: dict, idempotent: bool = True) -> str:
        """Submit one commerce record or behavior event; its `event_id`. Resending a record
        version is harmless (the latest timestamp wins), so a lost answer is retried; a
        behavior event is stored once per submission, so its caller says `idempotent=False`."""
        path = self._path(SUBMIT_OPERATIONS[record_type])
        answer = self.transport.request_json("POST", path, json_body=body, idempotent=idempotent)
        return answer["event_id"]

    def update_channel_contact_profile(self, body: dict) -> list[str]:
        """A partial profile update, paced to 6,000 per minute (the hub's limit)."""
        path = self._path("update_channel_contact_profile")
        answer = self.transport.request_json("PATCH", path, json_body=body, bucket="profile_update")
        return answer["updated_fields"]

    def import_members(self, import_key: str, data: list[dict]) -> Task:
        """Start an import of at most 10,000 rows, paced to 15 per minute (the hub's limits).
        Not retried once sent: a lost answer could mean a second import."""
        answer = self.transport.request_json(
            "POST",
            self._path("import_members"),
            json_body={"import_key": import_key, "data": data},
            bucket="import",
            idempotent=False,
        )
        return Task.model_validate(answer)

    def download_member_export(self, task_id: int, consume: Callable[[Iterator[bytes]], T]) -> T:
        """Stream the export file into `consume`; a cut stream runs `consume` again from the
        start. The path comes from `PATHS`, not the task's `download_url`, so the key is only
        ever sent to the connection's own base address."""
        path = self._path("download_member_export", task_id=task_id)
        return self.transport.download_with_retry(path, consume)


class DataHub(Service):
    """Connections are regions (`default`, `jp`), one key each."""

    service: ClassVar[str] = "datahub"
    #: The hub's documented limits; it documents none for reads, so they are unpaced. The push
    #: pipeline sends profile updates and imports through these buckets.
    rates: ClassVar[dict[str, Rate]] = {
        "profile_update": Rate(6_000),
        "import": Rate(15),
    }

    paths: dict[str, str] = {}
    #: How long a members export may take, from its start to `success`.
    export_deadline_seconds: float = 30 * 60

    @pydantic.field_validator("paths")
    @classmethod
    def _known_operations(cls, value: dict[str, str]) -> dict[str, str]:
        return check_path_overrides("datahub", value, PATHS)

    def client(self, transport: Transport) -> DataHubClient:
        return DataHubClient(transport, PATHS | self.paths)
