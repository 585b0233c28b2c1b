"""The data hub's contacts side: profiles, updates, member import/export, broadcasts, custom
fields, and the simulated campaigns whose webhooks the hub sends (customer data hub spec).

`ContactHub` holds one region's state; `contacts_router` serves the API (apikey applied by the
package), `contacts_admin` the `/_sandbox/datahub/{region}` routes. `catch_up` runs before
every request and truth read of the region: it finishes the import and export tasks that are
due and derives the live traffic (profile changes, a campaign every `config.campaign_minutes`,
only when the clock is not frozen), all in time order, so the result is the same as if a
background thread had done each at its moment.
"""

from __future__ import annotations

import csv
import io
import itertools
import threading
from collections.abc import Iterator
from datetime import date, datetime, timedelta

import numpy as np
from fastapi import APIRouter, Body, HTTPException, Path, Query, Request
from fastapi.responses import StreamingResponse

from sandbox.clock import Stopwatch
from sandbox.context import MOUNTS, Sandbox
from sandbox.datahub import contact_models as models
from sandbox.datahub.broadcasts import NAMES, Broadcast, generate
from sandbox.datahub.campaigns import LEAD, run_campaign
from sandbox.datahub.contact_data import (
    ACCOUNT_MANAGERS,
    EXPORT_FIELDS,
    MEMBER_LEVELS,
    ContactTable,
    Snapshot,
)
from sandbox.datahub.custom_fields import PREFIX, checked_value, definitions
from sandbox.datahub.tasks import Task
from sandbox.encoding import JSONResponse, csv_bytes
from sandbox.errors import ApiError, invalid, not_found

# Paths the spec does not show are the sandbox's choice; the two it shows are used as given.
OPERATIONS: dict[str, tuple[str, str]] = {
    "update_channel_contact_profile": ("PATCH", "/v1/contacts/profile"),
    "import_members": ("POST", "/v1/members/import"),
    "get_task_status": ("GET", "/task/{task_id}"),  # spec section 4
    "export_members": ("POST", "/v1/members/export"),
    "download_member_export": ("GET", "/v1/members/export/{task_id}/file"),
    "get_broadcast_report": ("GET", "/v1/broadcasts/{broadcast_id}/report"),
    "list_broadcasts": ("GET", "/v1/broadcasts"),
    "list_custom_fields": ("GET", "/cdh/v1/custom-fields/"),  # spec section 4
}
PROFILE_RATE = 6_000  # per minute per API key (spec section 8)
IMPORT_RATE = 15  # per minute per API key (spec section 8)
REPORT_MAX_DAYS = 60  # inclusive: end_date - start_date + 1 (spec section 8)
# Fields live traffic changes; account_manager is export-only, so only the hub changes it.
LIVE_FIELDS = (
    "city",
    "address",
    "company",
    "member_level",
    "display_name",
    "region",
    "account_manager",
)
EXPORT_CHUNK = 2_000


class ContactHub:
    def __init__(self, sandbox: Sandbox, region: str) -> None:
        self.sandbox = sandbox
        self.region = region
        self.lock = threading.RLock()
        self.contacts = ContactTable(sandbox, region)
        self.custom_fields = definitions(sandbox, region)
        self.active_fields = {PREFIX + d["key"]: d for d in self.custom_fields if d["active"]}
        self.custom_values = self._initial_custom_values()
        self.broadcasts = generate(sandbox, region, self.contacts.base_size)
        rng = np.random.default_rng(sandbox.seed_for("datahub", region, "tasks"))
        self._task_ids = itertools.count(int(rng.integers(5_000, 50_000)))
        self.tasks: dict[int, Task] = {}
        self._running: list[Task] = []  # not finished yet
        self.exports: dict[int, Snapshot] = {}
        self.fail_next_import = False
        self.profile_updates = 0  # accepted update_channel_contact_profile calls
        self.live_changes = 0
        self.campaigns_run = 0
        self.auto_campaigns = 0
        self._live_rng = np.random.default_rng(sandbox.seed_for("datahub", region, "live"))

    # -- ground truth -------------------------------------------------------------------

    def truth(self) -> dict[str, int]:
        self.catch_up()
        with self.lock:
            return {
                "members": self.contacts.size,
                "custom_fields": len(self.custom_fields),
                "broadcasts": len(self.broadcasts),
                # The pipeline snapshots the report of every broadcast.
                "broadcast_reports": len(self.broadcasts),
            }

    def truth_ids(self, stream: str) -> list:
        self.catch_up()
        with self.lock:
            if stream == "members":
                return self.contacts.member_ids()
            if stream == "custom_fields":
                return [d["id"] for d in self.custom_fields]
            if stream in ("broadcasts", "broadcast_reports"):
                return [b.id for b in self.broadcasts]
        raise KeyError(stream)

    # -- live traffic ---------------------------------------------------------------------

    def catch_up(self) -> None:
        """Bring the region up to the clock: each due task finishes on the contacts as they
        stood at its finish moment (live traffic derived up to it, none after it), then the
        live traffic runs on to now."""
        with self.lock:
            now = self.sandbox.clock.now()
            due = [(task.finish_moment(now), task.id, task) for task in self._running]
            for at, _, task in sorted(entry for entry in due if entry[0] is not None):
                self._live_until(at)
                task.finish(at)
                self._running.remove(task)
            self._live_until(now)

    def _live_until(self, moment: datetime) -> None:
        """Derive the live changes and campaigns due by `moment` (none when frozen)."""
        clock, config = self.sandbox.clock, self.sandbox.config
        if clock.frozen:
            return
        elapsed = (moment - clock.anchor).total_seconds()
        per_minute = config.arrivals_per_minute
        if per_minute > 0:
            while self.live_changes < int(elapsed * per_minute / 60):
                at = clock.anchor + timedelta(seconds=(self.live_changes + 1) * 60 / per_minute)
                self._live_change(at)
        every = config.campaign_minutes
        # Each kind in time order; within one step the changes come before the campaigns
        # (every webhook envelope carries its own time).
        while every > 0 and self.auto_campaigns < int(elapsed // (every * 60)):
            self.auto_campaigns += 1
            at = clock.anchor + timedelta(minutes=self.auto_campaigns * every)
            source = "maac" if self.auto_campaigns % 2 else "caac"
            self.run_campaign(at, "broadcast", source)

    def _live_change(self, at: datetime) -> None:
        rng, pools = self._live_rng, self.contacts.pools
        row = int(rng.integers(self.contacts.base_size))
        name = LIVE_FIELDS[int(rng.integers(len(LIVE_FIELDS)))]
        pick = int(rng.integers(len(pools.names)))
        value = {
            "city": pools.cities[pick],
            "address": pools.addresses[pick],
            "company": pools.companies[pick],
            "member_level": MEMBER_LEVELS[pick % len(MEMBER_LEVELS)],
            "display_name": pools.usernames[pick],
            "region": self.contacts.markets[pick % len(self.contacts.markets)][0],
            "account_manager": pools.names[pick % ACCOUNT_MANAGERS],
        }[name]
        self.live_changes += 1
        self._apply(row, {name: value}, at)

    # -- profiles -------------------------------------------------------------------------

    def _initial_custom_values(self) -> dict[int, dict]:
        """A fifth of the members hold a preferred store and loyalty points."""
        rng = np.random.default_rng(self.sandbox.seed_for("datahub", self.region, "custom"))
        rows = np.flatnonzero(rng.random(self.contacts.base_size) < 0.2).tolist()
        store = self.active_fields[PREFIX + "preferred_store"]
        keys = [o["key"] for o in store["options"] if o["active"]]
        stores = rng.integers(0, len(keys), len(rows)).tolist()
        points = rng.integers(0, 20_000, len(rows)).tolist()
        return {
            row: {PREFIX + "preferred_store": keys[s], PREFIX + "loyalty_points": p}
            for row, s, p in zip(rows, stores, points, strict=True)
        }

    def member(self, member_id: int) -> dict | None:
        with self.lock:
            row = self.contacts.row_of_member(member_id)
            if row is None:
                return None
            return self.contacts.profile(row) | {"custom_fields": self.custom_values.get(row, {})}

    def update_profile(self, body: models.UpdateProfileRequest) -> list[str]:
        if body.channel_type not in models.SUPPORTED_CHANNEL_TYPES:
            raise invalid(
                "channel_type",
                f"channel type {body.channel_type!r} is not supported "
                f"by profile updates; use one of {', '.join(models.SUPPORTED_CHANNEL_TYPES)}",
            )
        custom = self._checked_custom_fields(body.data.custom_fields or {})
        values = {
            name: getattr(body.data, name)
            for name in body.data.model_fields_set
            if name != "custom_fields"
        }
        with self.lock:
            row = self.contacts.find_by_channel(
                body.channel_type, body.external_channel_id, body.external_member_id
            )
            if row is None:
                raise ApiError(
                    404,
                    "member_not_found",
                    "no contact with this channel_type, external_channel_id and external_member_id",
                )
            changed = self._apply(row, values, self.sandbox.clock.now())
            changed += self._set_custom(row, custom)
            self.profile_updates += 1
            return changed

    def _checked_custom_fields(self, given: dict) -> dict:
        checked = {}
        for key, value in given.items():
            field = f"data.custom_fields.{key}"
            definition = self.active_fields.get(key)
            if definition is None:
                raise invalid(field, f"no active custom field {key!r} (keys are {PREFIX}<key>)")
            checked[key] = checked_value(definition, value, field)
        return checked

    def _set_custom(self, row: int, values: dict) -> list[str]:
        current = self.custom_values.get(row, {})
        changed = [key for key, value in values.items() if current.get(key) != value]
        if changed:
            merged = current | {key: values[key] for key in changed}
            self.custom_values[row] = {k: v for k, v in merged.items() if v is not None}
        return changed

    def _apply(self, row: int, values: dict, at: datetime) -> list[str]:
        """Change a contact and send a profile event for each changed field (spec section 6)."""
        changed = self.contacts.set_fields(row, values)
        if changed:
            contact = self.contacts.profile(row)
            for name in changed:
                self._emit_profile_event(name, contact, at)
        return changed

    def _emit_profile_event(self, name: str, contact: dict, at: datetime) -> None:
        if name == "line_uid":
            return  # section 6 has no event for it
        if name == "customer_id":
            data = {"customer_id": contact["customer_id"], "line_uid": contact["line_uid"]}
        else:
            data = {
                "external_member_id": contact["external_member_id"],
                "channel_type": contact["channel_type"],
                "customer_id": contact["customer_id"],
                name: contact[name],
            }
        self.sandbox.webhooks.emit(f"contact.profile.{name}.update", contact["source"], data, at)

    # -- tasks ----------------------------------------------------------------------------

    def _new_task(self, category: str, work, fails: bool = False) -> Task:
        with self.lock:
            task = Task(
                id=next(self._task_ids),
                category=category,
                stopwatch=Stopwatch(self.sandbox.clock.now()),
                phase_seconds=self.sandbox.config.task_phase_seconds,
                work=work,
                fails=fails,
            )
            self.tasks[task.id] = task
            self._running.append(task)
            return task

    def task(self, task_id: int) -> Task | None:
        return self.tasks.get(task_id)

    def start_import(self, body: models.ImportRequest) -> Task:
        key = body.import_key
        for position, row in enumerate(body.data):
            # Each row must carry the attribute it is matched on (a choice; spec: not shown).
            if getattr(row, key) is None:
                raise invalid(f"data.{position}.{key}", f"every row needs the import key {key}")
        rows = [row.model_dump(exclude_unset=True) for row in body.data]
        with self.lock:
            fails, self.fail_next_import = self.fail_next_import, False
            task = self._new_task(
                "import_member", lambda _, at: self._apply_import(key, rows, at), fails
            )
        task.detail = {"import_key": key, "rows": len(rows)}
        return task

    def _apply_import(self, key: str, rows: list[dict], at: datetime) -> dict:
        """Matching rows update their contacts, the others create contacts."""
        with self.lock:
            matches = self.contacts.rows_by(key)
            touched: set[int] = set()
            for values in rows:
                found = matches.get(values[key])
                if found is None:
                    matches[values[key]] = [self.contacts.create(values)]
                    touched.add(matches[values[key]][0])
                    continue
                for row in found:
                    if self._apply(row, values, at):
                        touched.add(row)
            return {"updated_contact_size": len(touched)}

    def start_export(self) -> Task:
        return self._new_task("export_member", lambda task, _: self._finish_export(task))

    def _finish_export(self, task: Task) -> dict:
        with self.lock:
            snapshot = self.exports[task.id] = self.contacts.snapshot()
        mount = MOUNTS[("datahub", self.region)]
        url = f"{self.sandbox.config.public_url}{mount}{OPERATIONS['export_members'][1]}"
        return {"download_url": f"{url}/{task.id}/file", "row_count": snapshot.size}

    # -- broadcasts and campaigns ---------------------------------------------------------

    def broadcast(self, broadcast_id: int) -> Broadcast | None:
        with self.lock:
            return next((b for b in self.broadcasts if b.id == broadcast_id), None)

    def run_campaign(self, at: datetime, kind: str, source: str) -> dict:
        """One simulated broadcast whose events end at `at`."""
        with self.lock:
            seed = self.sandbox.seed_for(
                "datahub", self.region, "campaign", str(self.campaigns_run)
            )
            rng = np.random.default_rng(seed)
            self.campaigns_run += 1
            broadcast = Broadcast(
                id=max(b.id for b in self.broadcasts) + 1,
                source=source,
                name=NAMES[int(rng.integers(len(NAMES)))],
                segment_name="Simulated audience",
                sent_date=at - LEAD,
                created_at=at - LEAD,
            )
            self.broadcasts.append(broadcast)
            events = run_campaign(rng, broadcast, kind, self.contacts, self.sandbox.webhooks.emit)
            return {"broadcast_id": broadcast.id, "source": source, "events": events}


# -- API ----------------------------------------------------------------------------------


def contacts_router(hub: ContactHub) -> APIRouter:
    router = APIRouter(tags=["contacts"])

    def route(operation: str, **options):
        method, path = OPERATIONS[operation]
        return router.api_route(path, methods=[method], operation_id=operation, **options)

    @route("update_channel_contact_profile", response_model=models.UpdatedFields)
    def update_channel_contact_profile(request: Request, body: models.UpdateProfileRequest):
        hub.sandbox.rate_limit(
            ("datahub", hub.region, _key(request), "profile"), PROFILE_RATE, header=True
        )
        return JSONResponse({"updated_fields": hub.update_profile(body)})

    @route("import_members", response_model=models.Task)
    def import_members(request: Request, body: models.ImportRequest):
        hub.sandbox.rate_limit(
            ("datahub", hub.region, _key(request), "import"), IMPORT_RATE, header=True
        )
        return JSONResponse(hub.start_import(body).body(hub.sandbox.clock.now()))

    @route("get_task_status", response_model=models.Task)
    def get_task_status(task_id: int = Path()):
        task = hub.task(task_id)
        if task is None:
            raise not_found(f"task {task_id}")
        return JSONResponse(task.body(hub.sandbox.clock.now()))

    @route("export_members", response_model=models.Task)
    def export_members(body: models.ExportRequest | None = Body(None)):  # noqa: B008
        return JSONResponse(hub.start_export().body(hub.sandbox.clock.now()))

    @route(
        "download_member_export",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/csv": {}}}, 409: {"description": "not finished"}},
    )
    def download_member_export(task_id: int = Path()):
        task = hub.task(task_id)
        if task is None or task.category != "export_member":
            raise not_found(f"export task {task_id}")
        status = task.status(hub.sandbox.clock.now())
        if status != "success":
            raise ApiError(409, "export_not_ready", f"export task {task_id} is {status}")
        return StreamingResponse(
            _csv_chunks(hub.exports[task_id]),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="members-{task_id}.csv"'},
        )

    @route("get_broadcast_report", response_model=models.BroadcastReport)
    def get_broadcast_report(
        broadcast_id: int = Path(),
        start_date: str = Query(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
        end_date: str = Query(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
    ):
        start, end = _day("start_date", start_date), _day("end_date", end_date)
        if end < start:
            raise invalid("end_date", "end_date is before start_date")
        if (end - start).days + 1 > REPORT_MAX_DAYS:
            raise invalid("end_date", f"the range spans at most {REPORT_MAX_DAYS} days")
        broadcast = hub.broadcast(broadcast_id)
        if broadcast is None:
            raise not_found(f"broadcast {broadcast_id}")
        with hub.lock:
            return JSONResponse(broadcast.report(start, end, hub.sandbox.clock.now()))

    @route("list_broadcasts", response_model=list[models.Broadcast])
    def list_broadcasts():
        now = hub.sandbox.clock.now()
        with hub.lock:
            return JSONResponse([b.item(now) for b in hub.broadcasts])

    @route("list_custom_fields", response_model=list[models.CustomField])
    def list_custom_fields(active: bool | None = Query(None)):  # noqa: B008
        chosen = [d for d in hub.custom_fields if active is None or d["active"] == active]
        return JSONResponse(chosen)

    return router


def _key(request: Request) -> str:
    return request.headers.get("apikey", "")


def _day(field: str, text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise invalid(field, f"{text!r} is not a date (YYYY-MM-DD)") from None


def _csv_chunks(snapshot: Snapshot) -> Iterator[bytes]:
    """The export file, a chunk of rows at a time (CSV, UTF-8, header of EXPORT_FIELDS)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=EXPORT_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for page in snapshot.rows(EXPORT_CHUNK):
        writer.writerows(page)
        yield csv_bytes(buffer.getvalue())
        buffer.seek(0)
        buffer.truncate()
    if buffer.tell():
        yield csv_bytes(buffer.getvalue())


# -- admin --------------------------------------------------------------------------------


def contacts_admin(hub: ContactHub) -> APIRouter:
    """`/_sandbox/datahub/{region}`: campaigns, imports, contacts, profile update counts."""
    router = APIRouter()

    @router.post("/campaigns")
    def run_campaign(body: models.CampaignRequest | None = Body(None)) -> dict:  # noqa: B008
        body = body or models.CampaignRequest()
        hub.catch_up()
        return hub.run_campaign(hub.sandbox.clock.now(), body.kind, body.source)

    @router.get("/imports")
    def imports() -> list[dict]:
        hub.catch_up()
        now = hub.sandbox.clock.now()
        found = []
        for task in list(hub.tasks.values()):
            if task.category == "import_member":
                found.append(
                    {
                        "task_id": task.id,
                        **task.detail,
                        "status": task.status(now),
                        "updated_contact_size": task.result.get("updated_contact_size"),
                    }
                )
        return found

    @router.post("/imports/fail-next")
    def fail_next_import() -> dict:
        with hub.lock:
            hub.fail_next_import = True
        return {"fail_next_import": True}

    @router.get("/contacts/{member_id}")
    def contact(member_id: int) -> dict:
        hub.catch_up()
        found = hub.member(member_id)
        if found is None:
            raise HTTPException(404, f"no member {member_id} in {hub.region}")
        return found

    @router.get("/profile-updates")
    def profile_updates() -> dict:
        hub.catch_up()
        return {
            "accepted": hub.profile_updates,
            "live_changes": hub.live_changes,
            "campaigns": hub.campaigns_run,
        }

    return router
