"""Commerce records and behavior events (customer data hub spec, sections 2, 4 and 6).

Every accepted submission is stored, answered with a fresh `event_id` and delivered as its
`*.sync` webhook. The current state of a record key is the submission with the latest
`timestamp`, whatever the arrival order (sections 2 and 3); on equal timestamps the later
arrival wins. Stale submissions are stored and synchronized too: the client cannot tell.
The spec shows no paths and no rate limits for these operations; see PATHS, and none apply.
"""

import itertools
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime

from fastapi import APIRouter, Body, HTTPException
from pydantic import BaseModel, ValidationError

from sandbox.clock import iso
from sandbox.context import Sandbox
from sandbox.datahub.record_models import (
    PARAMS_BY_BEHAVIOR,
    BehaviorEvent,
    CouponRecord,
    EventAccepted,
    MembershipTierRecord,
    OrderFulfillmentRecord,
    OrderRecord,
    PointRecord,
    ReservationRecord,
)
from sandbox.encoding import JSONResponse
from sandbox.errors import ApiError, invalid

# Method POST for all; the spec names the operations only (section 4).
PATHS = {
    "submit_behavior_event": "/v1/events/behavior",
    "submit_coupon_record": "/v1/records/coupon",
    "submit_order_record": "/v1/records/order",
    "submit_order_fulfillment_record": "/v1/records/order-fulfillment",
    "submit_membership_tier_record": "/v1/records/membership-tier",
    "submit_point_record": "/v1/records/point",
    "submit_reservation_record": "/v1/records/reservation",
}

# Which service the `*.sync` envelopes name as `source` (`maac` or `caac`): not shown.
WEBHOOK_SOURCE = "maac"
SOURCE_FIELDS = (
    "source_platform_name",
    "source_platform_customer_id",
    "source_store_type",
    "source_store_id",
)
# order.sync carries these of each item (section 6).
SYNC_ITEM_FIELDS = ("id", "name", "price", "count", "category", "variant")


@dataclass(frozen=True)
class RecordType:
    name: str  # as in /_sandbox/records/{record_type}/{key}
    model: type[BaseModel]
    event: str  # section 6
    key_fields: tuple[str, ...]  # joined with ":" into the record key
    sync_fields: tuple[str, ...]  # data of the event, besides SOURCE_FIELDS

    @property
    def operation_id(self) -> str:
        return f"submit_{self.name}_record"

    def key(self, record: dict) -> str:
        return ":".join(record[name] for name in self.key_fields)

    def sync_data(self, record: dict) -> dict:
        data = {name: record[name] for name in (*self.sync_fields, *SOURCE_FIELDS)}
        if "items" in data:
            data["items"] = [{f: item[f] for f in SYNC_ITEM_FIELDS} for item in data["items"]]
        return data


RECORD_TYPES = {
    kind.name: kind
    for kind in (
        RecordType(
            "coupon",
            CouponRecord,
            "coupon.sync",
            ("id",),
            ("id", "name", "code", "is_redeemable", "status", "discount_type", "discount_value"),
        ),
        RecordType(
            "order",
            OrderRecord,
            "order.sync",
            ("id",),
            (
                "id",
                "status",
                "total_amount",
                "currency",
                "items",
                "payment_method",
                "delivery_method",
                "shipping_location",
            ),
        ),
        RecordType(
            "order_fulfillment",
            OrderFulfillmentRecord,
            "order_fulfillment.sync",
            ("order_id",),
            (
                "order_id",
                "fulfillment_status",
                "shipping_location",
                "shipping_status",
                "estimated_delivery_date",
                "pickup_store_id",
            ),
        ),
        RecordType(
            "membership_tier",
            MembershipTierRecord,
            "membership.sync",
            ("source_platform_customer_id", "tier_id"),
            (
                "tier_id",
                "tier_name",
                "tier_status",
                "tier_effective_from",
                "tier_expiry_at",
                "lifetime_spend_amount",
                "currency",
            ),
        ),
        RecordType(
            "point",
            PointRecord,
            "point.sync",
            ("source_platform_customer_id", "type"),
            ("balance", "type", "currency", "expiry_at"),
        ),
        RecordType(
            "reservation",
            ReservationRecord,
            "reservation.sync",
            ("source_platform_customer_id", "id"),
            (
                "id",
                "status",
                "start_at",
                "end_at",
                "description",
                "service_type",
                "service_id",
                "service_name",
                "address",
                "staff_id",
                "staff_name",
            ),
        ),
    )
}


@dataclass(frozen=True)
class Submission:
    record: dict  # the fields sent, JSON-ready (date-times as UTC +00:00)
    timestamp: datetime  # full precision, for ordering
    arrival: int  # breaks timestamp ties: the later arrival wins
    event_id: str
    received_at: str

    def supersedes(self, other: "Submission") -> bool:
        return (self.timestamp, self.arrival) > (other.timestamp, other.arrival)

    def summary(self) -> dict:
        return {"event_id": self.event_id, "received_at": self.received_at, "record": self.record}


class RecordStore:
    """All accepted submissions of one region, and the current state of every record key."""

    def __init__(self, sandbox: Sandbox, region: str) -> None:
        self.region = region
        self._sandbox = sandbox
        self._lock = threading.Lock()
        self._arrivals = itertools.count()
        self._submissions: dict[str, list[Submission]] = {name: [] for name in RECORD_TYPES}
        self._current: dict[str, dict[str, Submission]] = {name: {} for name in RECORD_TYPES}
        self._per_key: dict[str, dict[str, int]] = {name: {} for name in RECORD_TYPES}
        self._behavior_events: list[dict] = []
        #: Record keys answered 422 as if the hub refused them (`PUT /_sandbox/…/refused`).
        self.refused: dict[str, set[str]] = {name: set() for name in RECORD_TYPES}

    def submit(self, kind: RecordType, body: BaseModel) -> str:
        """Store one record submission and emit its `*.sync` event; return its event_id."""
        full = body.model_dump(mode="json")
        if kind.key(full) in self.refused[kind.name]:
            raise ApiError(
                422,
                "record_refused",
                f"{kind.name} {kind.key(full)} refused (the sandbox was asked to refuse it)",
                field=kind.key_fields[0],
            )
        event_id = str(uuid.uuid4())
        now = self._sandbox.clock.now()
        with self._lock:
            submission = Submission(
                record=body.model_dump(mode="json", exclude_unset=True),
                timestamp=body.timestamp,
                arrival=next(self._arrivals),
                event_id=event_id,
                received_at=iso(now),
            )
            key = kind.key(full)
            self._submissions[kind.name].append(submission)
            self._per_key[kind.name][key] = self._per_key[kind.name].get(key, 0) + 1
            current = self._current[kind.name].get(key)
            if current is None or submission.supersedes(current):
                self._current[kind.name][key] = submission
            # Under the lock, so deliveries leave in arrival order.
            self._sandbox.webhooks.emit(
                kind.event, WEBHOOK_SOURCE, kind.sync_data(full), now, event_id=event_id
            )
        return event_id

    def submit_behavior(self, event: BehaviorEvent) -> str:
        """Store one behavior event (no webhook: section 6 lists none); return its event_id."""
        event_id = str(uuid.uuid4())
        with self._lock:
            self._behavior_events.append(
                {"event_id": event_id, "event": event.model_dump(mode="json", exclude_unset=True)}
            )
        return event_id

    def current(self, record_type: str, key: str) -> dict | None:
        """The current state of one record key, or None (unknown type or key)."""
        with self._lock:
            found = self._current.get(record_type, {}).get(key)
            if found is None:
                return None
            return {
                "record_type": record_type,
                "key": key,
                "current": found.record,
                "event_id": found.event_id,
                "submissions": self._per_key[record_type][key],
                "received_at": found.received_at,
            }

    def currents(self, record_type: str) -> list[dict]:
        """Current state of every key of one record type; KeyError for an unknown type."""
        with self._lock:
            keys = list(self._current[record_type])
        return [self.current(record_type, key) for key in keys]

    def submissions(self, record_type: str) -> list[dict]:
        """Every accepted submission of one record type, in arrival order."""
        with self._lock:
            return [s.summary() for s in self._submissions[record_type]]

    def behavior_events(self) -> list[dict]:
        """Every stored behavior event as submitted, with its event_id, in arrival order."""
        with self._lock:
            return list(self._behavior_events)

    def behavior_counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for stored in self._behavior_events:
                behavior = stored["event"]["behavior"]
                counts[behavior] = counts.get(behavior, 0) + 1
            return counts


def _accepted(event_id: str) -> JSONResponse:
    return JSONResponse({"event_id": event_id})


def _checked_params(event: BehaviorEvent) -> None:
    """Cross-field rule: the params an event needs depend on its behavior (section 4)."""
    try:
        PARAMS_BY_BEHAVIOR[event.behavior].model_validate(event.params)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(["params", *(str(part) for part in first["loc"])])
        raise invalid(field, first["msg"]) from None


def _add_record_route(router: APIRouter, store: RecordStore, kind: RecordType) -> None:
    model = kind.model  # evaluated now (no postponed annotations here), for FastAPI to read

    def submit(body: model) -> JSONResponse:
        return _accepted(store.submit(kind, body))

    router.add_api_route(
        PATHS[kind.operation_id],
        submit,
        methods=["POST"],
        operation_id=kind.operation_id,
        response_model=EventAccepted,
        summary=f"Submit {kind.name.replace('_', ' ')} record",
    )


def records_router(store: RecordStore) -> APIRouter:
    router = APIRouter(tags=["records"])

    @router.post(
        PATHS["submit_behavior_event"],
        operation_id="submit_behavior_event",
        response_model=EventAccepted,
        summary="Submit behavior event",
    )
    def submit_behavior_event(body: BehaviorEvent) -> JSONResponse:
        _checked_params(body)
        return _accepted(store.submit_behavior(body))

    for kind in RECORD_TYPES.values():
        _add_record_route(router, store, kind)
    return router


def records_admin(store: RecordStore) -> APIRouter:
    """Inspection routes, mounted under /_sandbox/datahub/{region} (plain HTTP errors there)."""
    router = APIRouter(tags=["sandbox"])

    @router.get("/records/{record_type}")
    def current_records(record_type: str) -> list[dict]:
        try:
            return store.currents(record_type)
        except KeyError:
            raise HTTPException(404, f"no record type {record_type!r}") from None

    @router.put("/records/{record_type}/refused")
    def refuse(record_type: str, keys: list[str] = Body(..., embed=True)) -> dict:  # noqa: B008
        """Answer the submissions of these record keys 422, until this is called again:
        a refusal the push keeps in `sync.rejected` and can send again."""
        if record_type not in store.refused:
            raise HTTPException(404, f"no record type {record_type!r}")
        store.refused[record_type] = set(keys)
        return {"refused": sorted(keys)}

    @router.get("/behavior-events")
    def behavior_events() -> dict[str, int]:
        return store.behavior_counts()

    @router.get("/behavior-events/all")
    def every_behavior_event() -> list[dict]:
        return store.behavior_events()

    return router
