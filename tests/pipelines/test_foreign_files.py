"""Files the lake did not write (`stream_file`, pipelines/lake/__init__.py): what people and
other tools leave in a bucket stops no stream and changes no relation, a `.parquet` of
another tool a view would read is set aside and named once, `check` names the rest; and a
relation is said short of a day only while it is."""

from __future__ import annotations

import os
from datetime import date, timedelta
from pathlib import Path

import pytest
from pyarrow.fs import FileType

from cli.main import main
from pipelines.lake import Lake
from pipelines.pull.damaged import FOREIGN
from pipelines.pull.landing import today
from pipelines.streams.comment import ACCOUNTS, TRIGGER_LOGS
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_damaged import damage
from tests.pipelines.test_object_store import s3_endpoint, s3_root  # noqa: F401 - fixtures

STREAMS = ["trigger_logs", "accounts"]
#: What people and other tools leave in a bucket, planted in every folder of the lake.
LEFT = ["README.md", "_SUCCESS", ".DS_Store", "x.parquet.tmp"]
#: A folder made by hand, with something in it.
HAND_MADE = "notes"
#: Days a sync lands here (today included): a closed day among them, and the sync's look
#: over its service's whole window still lists more than a folder a day.
DAYS = 4


def put(lake: Lake, path: str, data: bytes = b"left here by someone else\n") -> None:
    lake.fs.create_dir(path.rpartition("/")[0], recursive=True)
    with lake.fs.open_output_stream(path) as out:
        out.write(data)


def plant(lake: Lake, days: list[date]) -> list[str]:
    """Every name of `LEFT` and a folder at the lake's root, in a service's folder, in a
    daily and a snapshot stream's, in a closed day's and in today's; what `check` should
    name (a folder once, not what it holds)."""
    stream = lake.stream_dir(TRIGGER_LOGS)
    folders = [
        lake.root,
        f"{lake.root}/{TRIGGER_LOGS.service}",
        stream,
        lake.stream_dir(ACCOUNTS),
        *(f"{stream}/date={day.isoformat()}" for day in days),
    ]
    planted = []
    for folder in folders:
        for name in LEFT:
            put(lake, f"{folder}/{name}")
        lake.fs.create_dir(f"{folder}/{HAND_MADE}")  # an object store's empty "folder"
        put(lake, f"{folder}/{HAND_MADE}/draft.parquet")
        planted += [lake.uri(f"{folder}/{name}") for name in [*LEFT, HAND_MADE]]
    return planted


def plant_strays(lake: Lake, day: date) -> list[str]:
    """Copies of landed files under names the lake never writes, where the views' globs
    would read them: each would double its rows."""
    strays = {
        lake.path(TRIGGER_LOGS, "default", day): f"{lake.stream_dir(TRIGGER_LOGS)}/"
        f"date={day.isoformat()}/Export 2026.parquet",
        lake.path(ACCOUNTS, "default"): f"{lake.stream_dir(ACCOUNTS)}/part-0.snappy.parquet",
    }
    for source, stray in strays.items():
        lake.fs.copy_file(source, stray)
    return [lake.uri(stray) for stray in strays.values()]


def relations(lake: Lake) -> tuple[dict[str, int], int]:
    """Trigger logs per day and accounts, as the warehouse's views read them."""
    with lake.connect(os.environ["WAREHOUSE_PATH"], read_only=True) as con:
        days = con.execute(
            "SELECT date::VARCHAR, count(*) FROM comment.trigger_logs GROUP BY ALL"
        ).fetchall()
        [(accounts,)] = con.execute("SELECT count(*) FROM comment.accounts").fetchall()
    return dict(days), accounts


def truth(sandbox, first: date) -> tuple[dict[str, int], int]:
    scope = workspace_id(sandbox)
    days = sandbox.truth_days("comment", scope, "trigger_logs")
    accounts = sandbox.truth()["comment"][scope]["accounts"]
    return {day: n for day, n in days.items() if n and day >= first.isoformat()}, accounts


@pytest.fixture(params=["local", "object store"])
def lake_root(request) -> str:
    """Where the lake is: a folder of the test's (`sync_env`'s), or a bucket."""
    return request.getfixturevalue("s3_root") if request.param == "object store" else ""


def test_what_others_left_in_the_lake_stops_nothing_and_check_names_it(
    frozen_sandbox, sync_env, monkeypatch, capsys, lake_root
):
    """Regression: a `README.md` in `comment/trigger_logs/` made every sync of the stream
    exit 1 with `Invalid isoformat string: 'trigger_logs'`, naming no file."""
    sync_env(frozen_sandbox, lake_root=lake_root)
    first = today() - timedelta(days=DAYS - 1)
    monkeypatch.setenv("SYNC_START_DATE", first.isoformat())
    assert main(["sync", "--streams", *STREAMS]) == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    planted = plant(lake, [first, today()])
    strays = plant_strays(lake, today())
    capsys.readouterr()

    assert main(["sync", "--streams", *STREAMS]) == 0
    said = capsys.readouterr()
    told = said.out + said.err
    assert "FAILED" not in told, told
    for stray in strays:  # named once, where it went with it
        assert told.count(stray) == 1, told
        assert f"file the lake did not write set aside: {stray}: " in told
    assert relations(lake) == truth(frozen_sandbox, first)
    left = [lake.root + path.removeprefix(lake.place.uri) for path in planted]
    assert all(info.type != FileType.NotFound for info in lake.fs.get_file_info(left))

    assert main(["check"]) == 0
    checked = capsys.readouterr()
    [line] = [line for line in checked.err.splitlines() if line.startswith("WARN lake LAKE_ROOT")]
    assert f"{len(planted)} file(s) or folder(s) the lake did not write" in line
    for path in planted:
        assert f"{path}," in line or f"{path}." in line, path
    assert f"/{HAND_MADE}/draft.parquet" not in line  # the folder is named, not its files
    assert "2 file(s) the lake did not write, which a view would have read, set aside" in line
    assert f"{lake.place.uri}/{FOREIGN}/" in line

    assert main(["sync", "--streams", *STREAMS]) == 0  # nothing is named again
    again = capsys.readouterr()
    assert "set aside" not in again.out + again.err
    assert relations(lake) == truth(frozen_sandbox, first)


def short_line(out: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith("comment.trigger_logs ")]
    return line


def test_a_day_is_said_short_while_it_is_and_never_for_a_file_of_no_connection(
    frozen_sandbox, sync_env, capsys
):
    """Regression: a junk `extra.parquet` in a day's folder, set aside, had that day said
    `short of day … (damaged, set aside; the next sync lands it)` by every sync after the
    day landed whole again, the relation equal to the truth."""
    sync_env(frozen_sandbox)
    first = today() - timedelta(days=8)
    sync = ["sync", "--streams", "trigger_logs", "--start", first.isoformat()]
    assert main(sync) == 0
    lake = Lake(os.environ["LAKE_ROOT"])
    short, extra = first + timedelta(days=2), first + timedelta(days=4)  # closed days
    damage(Path(lake.path(TRIGGER_LOGS, "default", short)), "truncated")
    put(lake, f"{lake.stream_dir(TRIGGER_LOGS)}/date={extra}/extra.parquet", b"junk\n" * 40)
    capsys.readouterr()

    assert main(["warehouse"]) == 0  # its build finds both, and sets both aside
    out = capsys.readouterr().out
    assert f"date={extra}/extra.parquet (day {extra})" in out, out
    assert short_line(out).endswith(
        f"short of day {short} (damaged, set aside; the next sync lands it)"
    )

    for command in (sync, ["warehouse"]):
        assert main(command) == 0
        assert "short of" not in short_line(capsys.readouterr().out)
    days, _ = relations(lake)
    assert days == truth(frozen_sandbox, first)[0]
