"""The customer data hub, one instance per region (customer data hub spec).

Two parts, each in its own modules:
- `records`: commerce records and behavior events (spec sections 2 and 4), stored with
  latest-timestamp semantics, each accepted submission answered with an `event_id` and
  delivered as its `*.sync` webhook;
- `contacts`: contact profiles, profile updates, member import/export tasks, broadcasts and
  their reports, custom fields, and the simulated campaigns whose webhooks the hub sends.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from sandbox.context import Sandbox
from sandbox.datahub.contacts import ContactHub, contacts_admin, contacts_router
from sandbox.datahub.records import RecordStore, records_admin, records_router
from sandbox.service import apikey, service_app


class DataHubService:
    service = "datahub"

    def __init__(self, sandbox: Sandbox, region: str) -> None:
        self.region = region
        self.records = RecordStore(sandbox, region)
        self.hub = ContactHub(sandbox, region)
        self.app = service_app(f"Customer data hub ({region})")
        # Due tasks finish and live traffic arrives before any request is served.
        served = [Depends(apikey), Depends(self.catch_up)]
        self.app.include_router(records_router(self.records), dependencies=served)
        self.app.include_router(contacts_router(self.hub), dependencies=served)
        self.admin = APIRouter(tags=["sandbox"])
        self.admin.include_router(contacts_admin(self.hub))
        self.admin.include_router(records_admin(self.records))

    def catch_up(self) -> None:
        self.hub.catch_up()

    def truth(self) -> dict[str, dict[str, int]]:
        return {self.region: self.hub.truth()}

    def truth_ids(self, scope: str, stream: str) -> list:
        if scope != self.region:
            raise KeyError(scope)
        return self.hub.truth_ids(stream)

    def truth_days(self, scope: str, stream: str) -> dict[str, int]:
        # The hub's only daily stream, broadcast_report_history, holds what each sync saw.
        raise KeyError(f"{scope}/{stream}")

    def current_record(self, record_type: str, key: str) -> dict | None:
        return self.records.current(record_type, key)


def build(sandbox: Sandbox, region: str) -> DataHubService:
    return DataHubService(sandbox, region)
