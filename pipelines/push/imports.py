"""Bulk member imports (the data hub's "Import members": 1..10,000 rows, 15 imports per
minute): chunks of at most 10,000 rows per import_key, several tasks in flight at once, the
task id saved in the ledger before polling, so a restart polls the task it started instead of
importing twice."""

import threading
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from pipelines.clients.datahub import DataHubClient, Task
from pipelines.clients.polling import JobFailed
from pipelines.push.lease import Lease
from pipelines.push.ledger import Ledger
from pipelines.push.plan import Plan, Planned
from pipelines.push.send import Sent

#: The hub's documented batch size: 1..10000 objects in `data`.
MAX_ROWS = 10_000
#: A failed task is imported again this many times in all, then its rows are reported.
MAX_ATTEMPTS = 3
#: Import tasks in flight at once. A task takes a while to finish once its import is
#: accepted: waiting for each one before the next import left part of the 15-per-minute
#: budget unused (bench: push, imports). The imports themselves are still spaced by the
#: transport's pacer, shared by every thread, so this bounds the tasks polled at once, not the
#: rate: 4 keep the budget full while a task takes up to four pacer intervals (~16 s).
IMPORTS_IN_FLIGHT = 4


def _entries(rows: list[Planned], state: str, task: Task) -> list[dict]:
    size = (task.result or {}).get("updated_contact_size")
    return [
        {
            "key": row.key,
            "content_hash": row.content_hash,
            "content": row.content,
            "state": state,
            "task_id": task.id,
            "updated_contact_size": size,
            "connection": row.connection,
        }
        for row in rows
    ]


def _wait(client: DataHubClient, task: Task, deadline_seconds: float) -> Task | None:
    """The finished task, or None if it failed on the service."""
    try:
        return client.wait_for_task(
            task, deadline_seconds=deadline_seconds, what=f"member import task {task.id}"
        )
    except JobFailed:
        return None


def resume_imports(
    record_type: str,
    clients: Mapping[str, DataHubClient],
    ledger: Ledger,
    deadline_seconds: float,
) -> int:
    """Poll the tasks a killed run started and record how they ended; returns their count."""
    pending: dict[tuple[str, int], list[Planned]] = defaultdict(list)
    for key, entry in ledger.latest(record_type, state="submitted").items():
        row = Planned(key, {}, entry.content_hash, None, entry.connection, content=entry.content)
        pending[(entry.connection, entry.task_id)].append(row)
    for (connection, task_id), rows in pending.items():
        client = clients[connection]
        done = _wait(client, client.get_task_status(task_id), deadline_seconds)
        if done is None:
            failed = Task(id=task_id, category="import_member", status="failed")
            ledger.record(record_type, _entries(rows, "failed", failed))
        else:
            ledger.record(record_type, _entries(rows, "accepted", done))
    return len(pending)


def send_imports(
    plan: Plan,
    clients: Mapping[str, DataHubClient],
    ledger: Ledger,
    deadline_seconds: float,
    max_rows: int = MAX_ROWS,
    lease: Lease | None = None,
    sent: Sent | None = None,
) -> Sent:
    """Import each (connection, import_key) group in chunks, `IMPORTS_IN_FLIGHT` tasks at
    once. Chunks start in order, each only once the one before is in the ledger; groups go
    one after another, as before (rows of two import keys may match the same contact, and the
    order they apply in decides its fields). A worker's error fails the run once the chunks
    in flight have ended and been recorded; no chunk starts after it is seen. `sent`: the
    counts to add each group's outcome to, where a live display reads them
    (`pipelines/push/progress.py`)."""
    sent = Sent() if sent is None else sent
    groups: dict[tuple[str, str], list[Planned]] = defaultdict(list)
    for row in plan.to_send:
        groups[(row.connection, row.import_key)].append(row)
    # Held from an import's request until its task id is in the ledger: as with one chunk at
    # a time, a run killed at any moment has at most one import the ledger does not name.
    # `Ledger.record` itself needs no lock: each call writes a file of its own (a unique
    # name, written aside then renamed), and a chunk's keys are written by one thread only.
    starting = threading.Lock()
    with ThreadPoolExecutor(IMPORTS_IN_FLIGHT, thread_name_prefix="member-import") as pool:
        for (connection, import_key), rows in groups.items():
            client = clients[connection]
            in_flight: list[tuple[list[Planned], Future[Task | None]]] = []
            for start in range(0, len(rows), max_rows):
                chunk = rows[start : start + max_rows]
                submitted = threading.Event()
                future = pool.submit(
                    _import_chunk,
                    plan.record_type,
                    client,
                    ledger,
                    import_key,
                    chunk,
                    deadline_seconds,
                    starting,
                    submitted,
                    lease,
                )
                # Also set when the worker ends before submitting (it raised).
                future.add_done_callback(lambda _, submitted=submitted: submitted.set())
                submitted.wait()  # and for a free worker, while IMPORTS_IN_FLIGHT are busy
                in_flight.append((chunk, future))
                for _, earlier in in_flight:
                    if earlier.done():
                        earlier.result()  # a worker's error: no more imports, fail the run
            for chunk, future in in_flight:
                done = future.result()
                if done is None:
                    sent.refused += len(chunk)
                    sent.rejections += [
                        {
                            "key": row.key,
                            "field": "data",
                            "reason": f"the import task failed {MAX_ATTEMPTS} times",
                            "source": "service",
                            "row": row.content,
                        }
                        for row in chunk
                    ]
                else:
                    sent.accepted += len(chunk)
    return sent


def _import_chunk(
    record_type: str,
    client: DataHubClient,
    ledger: Ledger,
    import_key: str,
    chunk: list[Planned],
    deadline_seconds: float,
    starting: threading.Lock,
    submitted: threading.Event,
    lease: Lease | None,
) -> Task | None:
    """Import one chunk, up to MAX_ATTEMPTS times; the task that succeeded, or None. Runs
    in a worker thread: `submitted` is set once the first task id is in the ledger. No import
    starts once the `lease` is lost."""
    for _ in range(MAX_ATTEMPTS):
        with starting:
            if lease is not None:
                lease.check()
            task = client.import_members(import_key, [row.body for row in chunk])
            ledger.record(record_type, _entries(chunk, "submitted", task))
        submitted.set()
        done = _wait(client, task, deadline_seconds)
        if done is not None:
            ledger.record(record_type, _entries(chunk, "accepted", done))
            return done
        ledger.record(record_type, _entries(chunk, "failed", task))
    return None
