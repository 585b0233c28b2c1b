"""What the data hub's own checks compare in the lake, and their verdicts; the asset checks
(`assets/datahub.py`) only report these to Dagster."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pipelines.lake import Lake, file_stem
from pipelines.streams.datahub import BROADCAST_REPORTS, BROADCASTS, MEMBERS
from pipelines.streams.datahub.export import EXPORT_ROW_COUNT


def pulled_at(lake: Lake, path: str) -> datetime | None:
    """When a file's rows were pulled (`pulled_at`, written by `pipelines/pull/landing.py`), or
    None if the file does not say."""
    written = lake.read_metadata(path).get("pulled_at")
    return datetime.fromisoformat(written) if written else None


@dataclass(frozen=True)
class ExportRowCounts:
    """Per connection, the rows of its latest members file and the `row_count` its export
    task announced; connections whose file does not say are listed apart, not compared."""

    landed: dict[str, int]
    announced: dict[str, int]
    not_announced: list[str]

    @property
    def figures(self) -> dict:
        """What was compared, by name: shown beside the verdict."""
        return {
            "rows_landed": self.landed,
            "export_row_count": self.announced,
            "files_without_row_count": self.not_announced,
        }

    @property
    def nothing_compared(self) -> str | None:
        """Why nothing was compared, or None."""
        if self.landed:
            return None
        return "no file says its count" if self.not_announced else "members not landed"

    @property
    def passed(self) -> bool:
        return self.landed == self.announced


def export_row_counts(lake: Lake) -> ExportRowCounts:
    """Each connection's latest export holds the rows its task announced: the file and the
    figure are of one export, so they are of the same moment."""
    latest: dict[str, str] = {}
    for path in lake.files(MEMBERS):  # sorted by day: the latest file of each wins
        latest[file_stem(path)] = path
    landed: dict[str, int] = {}
    announced: dict[str, int] = {}
    not_announced = []
    for connection, path in latest.items():
        row_count = lake.read_metadata(path).get(EXPORT_ROW_COUNT)
        if row_count is None:
            not_announced.append(connection)
            continue
        landed[connection] = lake.footer(path).num_rows
        announced[connection] = int(row_count)
    return ExportRowCounts(landed, announced, not_announced)


@dataclass(frozen=True)
class ReportCoverage:
    """Per connection, the broadcasts listed without a report, and the reports of
    broadcasts not listed, each counted only where the two pulls make it meaningful; what
    was not compared, and why."""

    missing: dict[str, int]
    unknown: dict[str, int]
    not_compared: dict[str, list[str]]

    @property
    def figures(self) -> dict:
        """What was compared, by name: shown beside the verdict."""
        return {
            "broadcasts_without_report": self.missing,
            "reports_of_unknown_broadcasts": self.unknown,
            "not_compared": self.not_compared,
        }

    @property
    def nothing_compared(self) -> str | None:
        """Why nothing was compared (each connection's reasons, once), or None."""
        if self.missing or self.unknown:
            return None
        reasons = sorted({reason for found in self.not_compared.values() for reason in found})
        return "; ".join(reasons) or "no broadcasts landed"

    @property
    def passed(self) -> bool:
        return (
            self.nothing_compared is None
            and not any(self.missing.values())
            and not any(self.unknown.values())
        )


def _report_ids(lake: Lake, files: list[str]) -> set[int]:
    return set(lake.read_columns(files, ["broadcast_id"])["broadcast_id"].to_pylist())


def report_coverage(lake: Lake) -> ReportCoverage:
    """The report snapshots (whose latest ones the `datahub.broadcast_reports` view shows)
    hold a row for each broadcast of the `broadcasts` snapshot, and none for another,
    compared like with like by when each file was pulled (`pulled_at`):

    - a listed broadcast must have a report once a report file was pulled after the list
      (its run listed the broadcasts again, later) for a day on or after the broadcast's
      creation (a day's snapshot leaves out broadcasts created after it,
      `pipelines/streams/datahub/reports.py`). Reports pulled only before the list say
      nothing of broadcasts that appeared in between; their `created_at` cannot tell either,
      as the hub may list a broadcast after the moment it gives as its creation.
    - a report must be of a listed broadcast if its file was pulled before the list: its
      broadcast existed then. A report pulled after the list may be of a broadcast created
      since.

    Pulled in the same second (`pulled_at`'s precision), the reports count as pulled before
    the list: a broadcast appearing within that second could only be missed, never
    reported without being listed."""
    connections = sorted(
        {file_stem(path) for path in lake.files(BROADCASTS)}
        | {file_stem(path) for path in lake.files(BROADCAST_REPORTS)}
    )
    missing: dict[str, int] = {}
    unknown: dict[str, int] = {}
    not_compared: dict[str, list[str]] = {}
    for connection in connections:
        skipped = not_compared.setdefault(connection, [])
        listing = lake.path(BROADCASTS, connection)
        listed_at = pulled_at(lake, listing) if lake.exists(listing) else None
        reports = [
            (lake.path(BROADCAST_REPORTS, connection, day), day)
            for day in lake.days(BROADCAST_REPORTS, connection)
        ]
        if listed_at is None:
            skipped.append("broadcasts not landed (or their file does not say when)")
            continue
        if not reports:
            skipped.append("broadcast reports not landed")
            continue
        broadcasts = lake.read_columns([listing], ["id", "created_at"]).to_pylist()
        report_times = [(path, day, pulled_at(lake, path)) for path, day in reports]
        later_days = [day for _, day, at in report_times if at is not None and at > listed_at]
        if later_days:
            expected = {
                broadcast["id"]
                for broadcast in broadcasts
                if broadcast["created_at"] is None
                or broadcast["created_at"].date() <= max(later_days)
            }
            missing[connection] = len(expected - _report_ids(lake, [path for path, _ in reports]))
        else:
            skipped.append("broadcasts without a report: every report was pulled before the list")
        earlier = [path for path, _, at in report_times if at is not None and at <= listed_at]
        if earlier:
            listed = {broadcast["id"] for broadcast in broadcasts}
            unknown[connection] = len(_report_ids(lake, earlier) - listed)
        else:
            skipped.append("reports of unknown broadcasts: every report was pulled after the list")
    return ReportCoverage(
        missing=missing,
        unknown=unknown,
        not_compared={c: reasons for c, reasons in not_compared.items() if reasons},
    )
