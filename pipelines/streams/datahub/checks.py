"""What the data hub's own checks compare in the lake, and their verdicts; the asset checks
(`assets/datahub.py`) only report these to Dagster."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from pipelines.lake import Lake, read_columns
from pipelines.streams.datahub import BROADCAST_REPORTS, BROADCASTS, MEMBERS
from pipelines.streams.datahub.export import EXPORT_ROW_COUNT


@dataclass(frozen=True)
class ExportRowCounts:
    """Per connection, the rows of its latest members file and the `row_count` its export
    task announced (-1 when the file does not say)."""

    landed: dict[str, int]
    announced: dict[str, int]

    @property
    def passed(self) -> bool:
        return self.landed == self.announced


def export_row_counts(lake: Lake) -> ExportRowCounts:
    """Each connection's latest export holds the rows its task announced."""
    landed: dict[str, int] = {}
    announced: dict[str, int] = {}
    for path in lake.files(MEMBERS):  # sorted by day: the latest file of each wins
        landed[path.stem] = pq.read_metadata(path).num_rows
        announced[path.stem] = int(lake.read_metadata(path).get(EXPORT_ROW_COUNT, -1))
    return ExportRowCounts(landed, announced)


@dataclass(frozen=True)
class ReportCoverage:
    """Per connection, the broadcasts listed without a report, and the reports of broadcasts
    not listed."""

    missing: dict[str, int]
    unknown: dict[str, int]

    @property
    def passed(self) -> bool:
        return not any(self.missing.values()) and not any(self.unknown.values())


def _ids_per_connection(files: list[Path], column: str) -> dict[str, set[int]]:
    if not files:
        return {}
    table = read_columns(files, [column, "connection"])
    found: dict[str, set[int]] = {}
    for connection, row_id in zip(
        table["connection"].to_pylist(), table[column].to_pylist(), strict=True
    ):
        found.setdefault(connection, set()).add(row_id)
    return found


def report_coverage(lake: Lake) -> ReportCoverage:
    """The snapshots (whose latest ones the `datahub.broadcast_reports` view shows) hold a
    row for each broadcast of the `broadcasts` snapshot, and none for another."""
    listed = _ids_per_connection(lake.files(BROADCASTS), "id")
    reported = _ids_per_connection(lake.files(BROADCAST_REPORTS), "broadcast_id")
    connections = sorted(set(listed) | set(reported))
    return ReportCoverage(
        missing={c: len(listed.get(c, set()) - reported.get(c, set())) for c in connections},
        unknown={c: len(reported.get(c, set()) - listed.get(c, set())) for c in connections},
    )
