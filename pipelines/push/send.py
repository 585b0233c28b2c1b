"""Send a plan: records, events and profile updates several at a time, each accepted batch
written to the ledger before the next goes; rows the service refuses are kept as rejected."""

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pipelines.clients.datahub import DataHubClient
from pipelines.push.ledger import Ledger
from pipelines.push.plan import Plan, Planned
from pipelines.transport import ServiceError

#: Requests in flight at once: profile updates are paced per key (6,000/min) whatever this
#: is; records have no documented limit, so this bounds what one run asks of the service.
WORKERS = 8
#: Answers that refuse the row itself (not the moment): kept as rejected, never retried.
REFUSED = frozenset({400, 403, 404, 409, 413, 422})
#: Rows accepted between two ledger writes: what a killed run may have to check again.
LEDGER_BATCH = 500


@dataclass
class Sent:
    accepted: int = 0
    refused: int = 0
    rejections: list[dict] = field(default_factory=list)


def _chunks(items: Sequence[Planned], size: int) -> Iterator[Sequence[Planned]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _send_one(record_type: str, client: DataHubClient, planned: Planned) -> str | None:
    if record_type == "contact_profile":
        client.update_channel_contact_profile(planned.body)
        return None
    return client.submit(record_type, planned.body)


def send_plan(
    plan: Plan, clients: Mapping[str, DataHubClient], ledger: Ledger, workers: int = WORKERS
) -> Sent:
    """Send every planned row; a refusal (4xx) becomes a rejection naming the service's
    field; any other failure stops the run after the batch's accepted rows are recorded, so
    a re-run resumes there."""
    sent = Sent()
    failure: Exception | None = None

    def attempt(planned: Planned):
        client = clients.get(planned.connection)
        if client is None:
            unknown = {"error": {"code": "unknown_connection", "field": "connection"}}
            return planned, None, ServiceError("push to", planned.connection, 400, unknown)
        try:
            return planned, _send_one(plan.record_type, client, planned), None
        except Exception as error:  # recorded below, after the batch's accepted rows
            return planned, None, error

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for chunk in _chunks(plan.to_send, LEDGER_BATCH):
            accepted = []
            for planned, event_id, error in pool.map(attempt, chunk):
                if error is None:
                    accepted.append(_entry(planned, event_id))
                elif isinstance(error, ServiceError) and error.status in REFUSED:
                    sent.refused += 1
                    sent.rejections.append(_refusal(planned, error))
                else:
                    failure = failure or error
            sent.accepted += ledger.record(plan.record_type, accepted)
            if failure is not None:
                raise failure
    return sent


def _entry(planned: Planned, event_id: str | None) -> dict:
    return {
        "key": planned.key,
        "timestamp": planned.timestamp,
        "content_hash": planned.content_hash,
        "content": planned.content,
        "state": "accepted",
        "event_id": event_id,
        "connection": planned.connection,
    }


def _refusal(planned: Planned, error: ServiceError) -> dict:
    return {
        "key": planned.key,
        "field": error.field or "",
        "reason": f"refused by the service: {error.status} {error.code or ''}".strip(),
        "source": "service",
        "row": planned.content,
    }
