"""What the conversation streams' checks compare in the lake, and their verdicts."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

import pyarrow.parquet as pq

from pipelines.lake import Lake, Stream
from pipelines.streams.conversation import MESSAGES
from pipelines.streams.conversation.members import count_members_seen


@dataclass(frozen=True)
class Verdict:
    passed: bool
    #: What was compared, by name: shown beside the verdict.
    figures: dict


def _landed_rows(lake: Lake, connection: str, days: Iterable[date]) -> int:
    total = 0
    for day in days:
        path = lake.path(MESSAGES, connection, day)
        total += pq.ParquetFile(path).metadata.num_rows if path.exists() else 0
    return total


def rows_match_backup(
    lake: Lake, connections: Iterable[str], first: date, last: date, backup_rows: dict[str, int]
) -> Verdict:
    """The lake still holds, for the days `first` to `last`, each connection's row count of
    the backup file they were landed from."""
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    in_lake = {name: _landed_rows(lake, name, days) for name in connections}
    return Verdict(
        passed=in_lake == backup_rows,
        figures={"rows_in_lake": in_lake, "backup_rows": backup_rows, "first_day": str(first)},
    )


def members_match_messages(lake: Lake, stream: Stream, connections: Iterable[str]) -> Verdict:
    """One row of the per-member `stream` per distinct member of the connection's landed
    messages."""
    landed, seen = {}, {}
    for name in connections:
        path = lake.path(stream, name)
        landed[name] = pq.ParquetFile(path).metadata.num_rows if path.exists() else 0
        seen[name] = count_members_seen(lake, name)
    return Verdict(passed=landed == seen, figures={"rows": landed, "members_in_messages": seen})
