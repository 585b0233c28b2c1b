"""What the conversation streams' checks compare in the lake, and their verdicts.

Both compare files landed at different moments, so each compares only what was landed
before the other side was taken: a message file written later (its modification time,
what `pipelines/streams/conversation/members.py` orders by too) is not held against a
snapshot or a backup that came before it."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta

from pipelines.lake import Lake
from pipelines.stream import Stream
from pipelines.streams.conversation import MESSAGES
from pipelines.streams.conversation.members import MEMBERS_SEEN, MESSAGES_THROUGH


@dataclass(frozen=True)
class Verdict:
    passed: bool
    #: What was compared, by name: shown beside the verdict.
    figures: dict
    #: Why nothing was compared, or None.
    nothing_compared: str | None = None
    #: Connections left out, and why.
    not_compared: dict[str, str] = field(default_factory=dict)


def _message_files(lake: Lake, connection: str, days: Iterable[date]) -> dict[str, int]:
    """The connection's landed message files of `days` and when each was written (ns)."""
    wanted = {lake.path(MESSAGES, connection, day) for day in days}
    return {path: ns for path, ns in lake.written(MESSAGES).items() if path in wanted}


def _members_seen(files: Iterable, parameter: str) -> str:
    """The distinct (channel, member) pairs of the files in `$parameter`; none without files,
    which read_parquet refuses."""
    if not files:
        return "SELECT NULL::BIGINT AS channel_id, NULL::BIGINT AS member_id WHERE false"
    return MEMBERS_SEEN.replace("$files", f"${parameter}")


def _verdict(compared: dict, passed: bool, figures: dict, not_compared: dict) -> Verdict:
    if not compared:
        reasons = "; ".join(f"{name}: {why}" for name, why in not_compared.items())
        return Verdict(False, figures, reasons or "no connection", not_compared)
    return Verdict(passed, figures, None, not_compared)


def rows_match_backup(
    lake: Lake,
    connections: Iterable[str],
    first: date,
    last: date,
    backup_rows: dict[str, int],
    materialized_ns: int,
) -> Verdict:
    """The lake still holds, for the days `first` to `last`, each connection's row count of
    the backup file they were landed from (in the run that ended at `materialized_ns`). A
    connection whose files of those days were written again since (a later run) holds a
    later backup's rows: it is left out."""
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    in_lake, expected, not_compared = {}, {}, {}
    for name in connections:
        files = _message_files(lake, name, days)
        if any(written > materialized_ns for written in files.values()):
            not_compared[name] = "landed again since the backup"
            continue
        in_lake[name] = sum(lake.footer(path).num_rows for path in files)
        expected[name] = backup_rows.get(name, 0)
    figures = {
        "rows_in_lake": in_lake,
        "backup_rows": expected,
        "first_day": str(first),
        "not_compared": not_compared,
    }
    return _verdict(in_lake, in_lake == expected, figures, not_compared)


def members_match_messages(lake: Lake, stream: Stream, connections: Iterable[str]) -> Verdict:
    """Per connection, the per-member `stream`'s snapshot holds a row for every distinct
    member of the messages landed before it (the files its `MESSAGES_THROUGH` mark
    covers), and none for a member of no landed message. Members of messages landed after
    it are looked up by the next pull, not missed."""
    member_id = stream.key[1]
    rows, missing, extra, landed_since, not_compared = {}, {}, {}, {}, {}
    for name in connections:
        snapshot = lake.path(stream, name)
        if not lake.exists(snapshot):
            not_compared[name] = f"{stream.relation} not landed"
            continue
        through = int(lake.read_metadata(snapshot).get(MESSAGES_THROUGH, 0))
        files = _message_files(lake, name, lake.days(MESSAGES, name))
        before = [lake.uri(path) for path, written in files.items() if written <= through]
        every = [lake.uri(path) for path in files]
        parameters = {"snapshot": lake.uri(snapshot), "before": before, "every": every}
        [(count, not_landed, unseen)] = lake.query(
            f"""
            WITH landed AS (
                SELECT DISTINCT channel_id, {member_id} AS member_id
                FROM read_parquet($snapshot)
            ),
            settled AS ({_members_seen(before, "before")}),
            seen AS ({_members_seen(files, "every")})
            SELECT
                (SELECT count(*) FROM read_parquet($snapshot)),
                (SELECT count(*) FROM settled ANTI JOIN landed USING (channel_id, member_id)),
                (SELECT count(*) FROM landed ANTI JOIN seen USING (channel_id, member_id))
            """,
            {key: value for key, value in parameters.items() if value},
            spill=True,
        )
        rows[name], missing[name], extra[name] = count, not_landed, unseen
        landed_since[name] = len(files) - len(before)
    figures = {
        "rows": rows,
        "members_missing": missing,
        "members_in_no_message": extra,
        "message_files_landed_since": landed_since,
        "not_compared": not_compared,
    }
    passed = not any(missing.values()) and not any(extra.values())
    return _verdict(rows, passed, figures, not_compared)
