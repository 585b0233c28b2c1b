"""`sync.runs`: one row per run of a pulled stream, written by the run itself whatever started
it (a schedule, a sensor, a backfill, the Dagster UI, the command line), so the warehouse says
when each stream last landed, how many rows each run brought and what the services answered.

Each row is written as a file of its own,
`<lake>/sync/runs/date=<day it started>/<service>_<stream>-<run id>.parquet`: runs at once
never write the same file, and a run killed before its end leaves no row (its run in Dagster
says so). Every run then merges the days before today that hold more than one file into one
file a day (`merge_history`, `pipelines/lake/merge.py`), so the history holds a file a day
and today's runs' files, not a file per stream per run for good, and what a reader lists
stays bounded. Today's files stay a file per run until the
first run of tomorrow merges them (a run that started before midnight and ends after it
writes into yesterday, and the next run merges it in)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from datetime import date, datetime

import pyarrow as pa

from pipelines.lake import MAX_NAME, Lake, file_day
from pipelines.lake.merge import GRACE_SECONDS, merge_folder
from pipelines.stream import TIMESTAMP, Stream, described

#: One connection's part of a run (the column `connections`).
CONNECTION_OUTCOME = pa.struct(
    [
        ("connection", pa.string()),
        ("outcome", pa.string()),
        ("rows", pa.int64()),
        ("error", pa.string()),
    ]
)

RUNS = Stream(
    "sync",
    "runs",
    pa.schema(
        [
            described("run_id", pa.string(), "The Dagster run's id."),
            described("relation", pa.string(), "The stream, as `<service>.<stream>`."),
            described(
                "started_by",
                pa.string(),
                "What started the run: `schedule <name>`, `sensor <name>`, `backfill <id>`, "
                "`automation`, `command line`, or `UI or API` (a run launched by hand).",
            ),
            described("started_at", TIMESTAMP, "When the stream's step started (UTC)."),
            described("ended_at", TIMESTAMP, "When it ended (UTC)."),
            described(
                "first_day", pa.date32(), "A daily stream's first day of the run; null else."
            ),
            described("last_day", pa.date32(), "A daily stream's last day of the run; null else."),
            described("rows", pa.int64(), "Rows the run landed, every connection."),
            described("requests", pa.int64(), "Requests sent to the service, retries included."),
            described("throttled", pa.int64(), "Answers 429 (rate limited) among them."),
            described("retries", pa.int64(), "Requests sent again after a failure or a 429."),
            described(
                "budget_wait_seconds",
                pa.float64(),
                "Seconds its requests waited for the key's rate budget (pacing, 429 holds).",
            ),
            described(
                "outcome",
                pa.string(),
                "`succeeded`; `partly failed` (some connections landed, others failed); `failed`.",
            ),
            described(
                "error",
                pa.string(),
                "What failed, with what to do, for each connection that failed; null when none.",
            ),
            described(
                "connections",
                pa.list_(CONNECTION_OUTCOME),
                "Each connection's part of the run: `connection`, `outcome` (`landed` or "
                "`failed`), the `rows` it landed, and for a failed one the `error` with what "
                "to do. Empty when the run failed before its connections' turns; null in rows "
                "written before it was recorded. `sync.connection_health` reads it.",
            ),
        ]
    ),
    daily=True,
    merged=True,
    key=("run_id", "relation"),
    day="The UTC day the run started (the partition).",
)


@dataclass(frozen=True)
class RunRecord:
    """One row of `sync.runs`."""

    run_id: str
    relation: str
    started_by: str
    started_at: datetime
    ended_at: datetime
    first_day: date | None
    last_day: date | None
    rows: int
    requests: int
    throttled: int
    retries: int
    budget_wait_seconds: float
    outcome: str
    error: str | None
    connections: list[dict]


def connection_outcomes(rows: dict[str, int], failed: dict[str, str]) -> list[dict]:
    """The `connections` of a run from what each connection landed and which failed, in the
    order given (landed ones first)."""
    return [
        {"connection": name, "outcome": "landed", "rows": count, "error": None}
        for name, count in rows.items()
        if name not in failed
    ] + [
        {"connection": name, "outcome": "failed", "rows": rows.get(name, 0), "error": reason}
        for name, reason in failed.items()
    ]


def outcome_of(landed_connections: int, failed_connections: int) -> str:
    if not failed_connections:
        return "succeeded"
    return "partly failed" if landed_connections else "failed"


def record_run(lake: Lake, record: RunRecord) -> None:
    """Write the run's row as a file of its own, in the folder of the day it started, named
    `<relation>-<run id>`: the run id whole (it makes the name unique), the relation cut to
    what the lake's 64 characters of a file's name leave (it is only there for a person)."""
    room = MAX_NAME - len(record.run_id) - 1
    name = f"{record.relation.replace('.', '_')[:room]}-{record.run_id}"
    lake.write(RUNS, name, [asdict(record)], day=record.started_at.date())


def merge_history(lake: Lake, today: date, grace: float = GRACE_SECONDS) -> int:
    """Merge each day before `today` that holds more than one file into one file, and
    delete what earlier merges replaced (`merge_folder`); the days merged. One listing of
    the history: a day already merged costs nothing more."""
    files_a_day = Counter(file_day(path) for path in lake.files(RUNS))
    days = sorted(day for day, files in files_a_day.items() if day < today and files > 1)
    return sum(merge_folder(lake, RUNS, day, grace=grace).written is not None for day in days)
