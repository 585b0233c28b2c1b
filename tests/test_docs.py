"""What the docs show of the code is the code: the stream docs/development.md walks through
is the one `pipelines/streams/comment/snapshots.py` declares, word for word, and README's
table of relations names every relation the warehouse has."""

import re
from pathlib import Path

from pipelines.pull.landing import PulledStream
from pipelines.streams.comment import ACCOUNTS, STREAMS
from pipelines.warehouse.relations import warehouse_of

ROOT = Path(__file__).resolve().parent.parent


def test_adding_a_stream_shows_a_real_declaration_as_it_is():
    guide = (ROOT / "docs" / "development.md").read_text()
    section = guide[guide.index("### Adding a stream") :]
    (shown,) = re.findall(r"```python\n(.*?)```", section, re.S)
    source = (ROOT / "pipelines" / "streams" / "comment" / "snapshots.py").read_text()
    assert shown in source
    assert isinstance(ACCOUNTS, PulledStream) and ACCOUNTS in STREAMS
    for named in re.findall(r"`((?:pipelines|tests)/[\w/]+\.py)`", section):
        assert (ROOT / named).is_file(), named


def readme_relations() -> dict[str, set[str]]:
    """README's table of relations: each schema's backquoted names."""
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", readme, re.M)
    return {schema: set(re.findall(r"`(\w+)`", names)) for schema, names in rows}


def test_readme_names_every_relation_the_warehouse_has(tmp_path):
    """The table is written by hand: a relation added to the warehouse (a stream, a view of
    `sql/`) and left out of it fails here."""
    warehouse = warehouse_of(tmp_path / "lake", tmp_path / "warehouse.duckdb", [])
    with warehouse.in_memory() as con:
        views = con.execute(
            "SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    built: dict[str, set[str]] = {}
    for schema, view in views:
        built.setdefault(schema, set()).add(view)
    assert {"comment", "conversation", "datahub", "marts", "sync"} <= built.keys()
    shown = readme_relations()
    missing = sorted(
        f"{schema}.{view}"
        for schema, views in built.items()
        for view in views - shown.get(schema, set())
    )
    assert missing == [], f"README's table of relations lacks {', '.join(missing)}"
