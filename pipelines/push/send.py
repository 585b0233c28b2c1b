"""Send a plan: records, events and profile updates several at a time, to the data hub or the
conversation service (`Outbound.service`). A record or an event
is marked `sending` in the ledger's journal, under the push's lease, before its request, and
each worker writes the service's answer before it sends its next row, so a run killed at any
moment leaves at most the `WORKERS` requests that were in flight unanswered (`plan.py` says
what the next push does with them); rows the service refuses are kept as rejected. The first
failure that is not a refusal of the row (the journal cannot be written, the lease is lost,
the service keeps failing) stops every worker before its next request: the rows already
handed to the pool are not sent. A row a killed push marked and had no answer for is first
looked up where the service can be asked (`Outbound.asks_arrival`: the conversation service's
assignment and member), and sent again only if it did not arrive."""

import threading
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from pipelines.clients.conversation import ConversationClient
from pipelines.clients.datahub import DataHubClient
from pipelines.errors import Retriable
from pipelines.push.lease import Lease
from pipelines.push.ledger import Ledger
from pipelines.push.plan import OUTBOUND, SENDING, Outbound, Plan, Planned, Sending
from pipelines.transport import ServiceError

#: Requests in flight at once: profile updates are paced per key (6,000/min) whatever this
#: is; records have no documented limit, so this bounds what one run asks of the service. It
#: is also what a killed run may send twice (docs/push.md).
WORKERS = 8
#: Answers that refuse the row itself (not the moment): kept as rejected, never retried.
REFUSED = frozenset({400, 403, 404, 409, 413, 422})
#: Rows handed to the workers ahead of the oldest unanswered one: after a failure no more
#: than these are tried.
WINDOW = 500
#: A client of the service a record type goes to.
Client = DataHubClient | ConversationClient


@dataclass
class Sent:
    accepted: int = 0
    refused: int = 0
    rejections: list[dict] = field(default_factory=list)


def _send_one(record_type: str, client: Client, planned: Planned) -> str | None:
    """The row's `event_id`; a profile update has none."""
    outbound = OUTBOUND[record_type]
    if outbound.sending is Sending.PROFILE_UPDATE:
        client.update_channel_contact_profile(planned.body)
        return None
    return client.submit(record_type, planned.body, idempotent=not outbound.at_most_once)


class NotSent(Retriable):
    """A row left unsent because the run had stopped before its turn."""


def send_plan(
    plan: Plan,
    clients: Mapping[str, Client],
    ledger: Ledger,
    workers: int = WORKERS,
    lease: Lease | None = None,
    sent: Sent | None = None,
) -> Sent:
    """Send every planned row; a refusal (4xx) becomes a rejection naming the service's
    field; any other failure stops the run once the rows in flight have ended, every
    acceptance recorded, so a re-run resumes there. With a `lease`, no row is sent once it
    is no longer held. `sent`: the counts to add each answer to as it is settled, where a
    live display reads them (`pipelines/push/progress.py`)."""
    sent = Sent() if sent is None else sent
    outbound = OUTBOUND[plan.record_type]
    stopped = threading.Event()

    def attempt(planned: Planned) -> Exception | None:
        try:
            return attempt_one(planned)
        except Exception as error:  # the journal or the lease: nothing more goes
            stopped.set()
            return error

    def attempt_one(planned: Planned) -> Exception | None:
        if stopped.is_set():
            return NotSent()
        if lease is not None:
            lease.check()
        client = clients.get(planned.connection)
        if client is None:
            unknown = {"error": {"code": "unknown_connection", "field": "connection"}}
            return ServiceError("push to", planned.connection, 400, unknown)
        if planned.in_doubt and outbound.asks_arrival:
            try:
                arrived = client.arrived(plan.record_type, planned.body)
            except Exception as error:  # sorted below, as a send's failure is
                if not _refused(error):
                    stopped.set()
                return error
            if arrived:  # what the killed push sent: recorded, not sent again
                ledger.record(plan.record_type, [_entry(planned, None, "accepted")])
                return None
        if outbound.sending is Sending.RECORD:
            # Under the lease, in the same statement (`Lease.fence`): a push stalled past
            # its lease sends nothing it had not marked under it. Fsynced where a resend
            # would be stored twice.
            sending = [_entry(planned, None, SENDING)]
            ledger.record(plan.record_type, sending, fsync=outbound.at_most_once, fenced=True)
        try:
            event_id = _send_one(plan.record_type, client, planned)
        except Exception as error:  # sorted below: a refusal of the row, or the run's end
            if outbound.sending is Sending.RECORD and _not_taken(error, outbound):
                ledger.record(plan.record_type, [_entry(planned, None, "failed")])
            if not _refused(error):
                stopped.set()
            return error
        ledger.record(plan.record_type, [_entry(planned, event_id, "accepted")])
        return None

    failure: Exception | None = None

    def settle(planned: Planned, outcome: Future[Exception | None]) -> None:
        nonlocal failure
        error = outcome.result()
        if error is None:
            sent.accepted += 1
        elif _refused(error):
            sent.refused += 1
            sent.rejections.append(_refusal(planned, error))
        elif not isinstance(error, NotSent):
            failure = failure or error

    # A sliding window, not batches: the workers never wait for the slowest of a batch.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        queued: deque[tuple[Planned, Future[Exception | None]]] = deque()
        for planned in plan.to_send:
            if failure is not None or stopped.is_set():
                break
            queued.append((planned, pool.submit(attempt, planned)))
            if len(queued) >= WINDOW:
                settle(*queued.popleft())
        while queued:
            settle(*queued.popleft())
    if failure is not None:
        raise failure
    return sent


def _refused(error: Exception) -> bool:
    """The service refused the row itself: a rejection, not a reason to stop."""
    return isinstance(error, ServiceError) and error.status in REFUSED


def _not_taken(error: Exception, outbound: Outbound) -> bool:
    """The row is to be sent again by the next push: the service answered that it did not
    take it, or it is a record, whose resend changes nothing the hub holds as current (the
    latest timestamp wins). After a 5xx or a lost answer an at-most-once row may have been
    stored: it stays in doubt."""
    if not outbound.at_most_once:
        return True
    return isinstance(error, ServiceError) and (error.status in REFUSED or error.status == 429)


def _entry(planned: Planned, event_id: str | None, state: str) -> dict:
    return {
        "key": planned.key,
        "timestamp": planned.timestamp,
        "content_hash": planned.content_hash,
        "content": planned.content,
        "state": state,
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
