"""Schema drift: what a service sends that a stream's declared schema does not hold.

Services add fields, drop them and change their types without notice. Nothing of it is lost
and nothing of it fails a load: each row keeps it in the lake's last column, `_extra`
(`EXTRA`, `pipelines/stream.py`), one JSON object per row, null when the row matched:

    {"new": {"tag": "x", "stats.shares": 3},   fields the declaration lacks, by path
     "retyped": {"points": "12"},              values as sent that did not fit their
                                               column (which holds the converted value, or null)
     "missing": ["title"]}                     declared fields the row did not carry (null)

Where it comes from: a response model notices new fields and retyped values itself
(`Model` in `pipelines/clients/base.py`), and any declared field an answer left out is
missing (`extra_of`); a trigger log's, only a required one (`tolerated`). The trigger logs'
Arrow path, the member export and the message backup compare what they read with their
schemas (`extra_column`). The landing then applies the stream's contract and tallies what
it saw (`Drift`), which each materialization reports (never a value: its JSON type) and
the `schema_matches` check warns on.

Contracts (`Contract`), per stream in `sync.toml`, as dlt's schema contracts:

- `evolve` (the default): keep everything in `_extra`, report it;
- `freeze`: a new or retyped field fails the stream's connection; nothing of it is written;
- `discard`: new fields and retyped values are dropped from `_extra`, still reported.

A missing field is null whatever the contract (there is nothing to keep), and reported.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pydantic

from pipelines.errors import SetupError
from pipelines.lake import Lake
from pipelines.stream import EXTRA, Stream

#: The sections of an `_extra` object, in the order they are reported.
KINDS = ("new", "retyped", "missing")


class Contract(StrEnum):
    EVOLVE = "evolve"
    FREEZE = "freeze"
    DISCARD = "discard"


class Frozen(SetupError):
    """A stream under `freeze` met a new or retyped field: the user's setting stops it."""


def extra_of(record: pydantic.BaseModel, own_new: bool = True) -> str | None:
    """`record`'s drift, nested models' included, as `_extra` JSON (None: it matched).
    `own_new`: False where the record's own undeclared fields are expected and kept
    elsewhere (a broadcast report's `report`)."""
    drift: dict[str, Any] = {"new": {}, "retyped": {}, "missing": []}
    _collect(record, "", drift)
    if not own_new:
        drift["new"] = {path: v for path, v in drift["new"].items() if "." in path}
    return as_extra(drift["new"], drift["retyped"], drift["missing"])


def as_extra(
    new: Mapping[str, Any], retyped: Mapping[str, Any], missing: Iterable[str]
) -> str | None:
    """The `_extra` JSON of what was found; None when nothing was."""
    sections = {"new": dict(new), "retyped": dict(retyped), "missing": list(missing)}
    present = {kind: found for kind, found in sections.items() if found}
    return json.dumps(present, ensure_ascii=False, default=str) if present else None


def _collect(record: pydantic.BaseModel, prefix: str, drift: dict[str, Any]) -> None:
    """What `Model` (`pipelines/clients/base.py`) noticed, of `record` and its nested ones."""
    for name, value in (record.model_extra or {}).items():
        drift["new"][prefix + name] = value
    for name, value in getattr(record, "retyped", {}).items():
        drift["retyped"][prefix + name] = value
    # Any declared field the answer left out, optional ones too: a service that stops
    # sending a field is drift, whether or not the model could do without it.
    drift["missing"] += [
        prefix + name for name in type(record).model_fields if name not in record.model_fields_set
    ]
    for name in type(record).model_fields:
        value = getattr(record, name, None)
        if isinstance(value, pydantic.BaseModel):
            _collect(value, f"{prefix}{name}.", drift)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, pydantic.BaseModel):
                    _collect(item, f"{prefix}{name}[{index}].", drift)


def tolerated(
    adapter: pydantic.TypeAdapter, fields: Collection[str], item: dict
) -> tuple[dict, str | None]:
    """An item of a TypedDict of plain fields (`TriggerLog`) checked field by field, as
    `Model` does for models: the checked item, a field that does not fit strictly or is
    required and absent as None, and its `_extra` JSON."""
    new = {name: value for name, value in item.items() if name not in fields}
    try:
        return adapter.validate_python(item, strict=True), as_extra(new, {}, ())
    except pydantic.ValidationError as error:
        unfit = {e["loc"][0] for e in error.errors() if e["loc"]}
    checked = {name: value for name, value in item.items() if name in fields}
    retyped = {name: checked.pop(name) for name in unfit if name in checked}
    missing = sorted(name for name in unfit if name not in item)
    return checked | dict.fromkeys(unfit), as_extra(new, retyped, missing)


def extra_column(
    new: pa.Table | None, retyped: pa.Table | None, missing: Iterable[str], rows: int
) -> pa.Array:
    """`_extra` of a table's rows read without a model: `new` holds the columns the schema
    lacks, `retyped` the values as sent of cells that did not fit (null where they did), and
    `missing` the declared columns the file or page did not have. Costs nothing when there
    is nothing."""
    missing = list(missing)
    if (
        not missing
        and (new is None or not new.num_columns)
        and (retyped is None or not retyped.num_columns)
    ):
        return pa.nulls(rows, EXTRA.type)
    news = new.to_pylist() if new is not None and new.num_columns else [{}] * rows
    retypes = retyped.to_pylist() if retyped is not None and retyped.num_columns else [{}] * rows
    return pa.array(
        [
            as_extra(
                {k: v for k, v in n.items() if v is not None},
                {k: v for k, v in r.items() if v is not None},
                missing,
            )
            for n, r in zip(news, retypes, strict=True)
        ],
        EXTRA.type,
    )


def cast_texts(texts: pa.Array, arrow_type: pa.DataType) -> tuple[pa.Array, pa.Array | None]:
    """Texts of a file as their column's type; where one does not read as it (a number
    column holding "n/a"), it is null, and the second array holds it as sent (else None)."""
    try:
        return texts.cast(arrow_type), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        read, unread = [], []
        for text in texts.to_pylist():
            try:
                read.append(pa.scalar(text, pa.string()).cast(arrow_type).as_py())
                unread.append(None)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                read.append(None)
                unread.append(text)
        return pa.array(read, arrow_type), pa.array(unread, pa.string())


def json_type(value: Any) -> str:
    """The JSON type of a value, which is all a report says of it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


@dataclass
class Drift:
    """What one landing's rows held in `_extra`: per kind, per path, the rows and the JSON
    types of the values (never the values)."""

    rows: Counter = field(default_factory=Counter)
    types: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    #: A landing's connections tally into one `Drift` from threads of their own.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def see(self, extra: str) -> None:
        found = json.loads(extra)
        with self._lock:
            for kind in ("new", "retyped"):
                for path, value in found.get(kind, {}).items():
                    self.rows[kind, path] += 1
                    self.types[kind, path].add(json_type(value))
            for path in found.get("missing", ()):
                self.rows["missing", path] += 1

    def __bool__(self) -> bool:
        return bool(self.rows)

    def report(self) -> dict[str, dict[str, str]]:
        """Per kind, per path: "<rows> rows, <types>" (what the metadata shows)."""
        described: dict[str, dict[str, str]] = {}
        for (kind, path), rows in sorted(
            self.rows.items(), key=lambda i: (KINDS.index(i[0][0]), i[0][1])
        ):
            types = ", ".join(sorted(self.types.get((kind, path), ())))
            described.setdefault(kind, {})[path] = f"{rows} rows" + (f", {types}" if types else "")
        return described

    def summary(self) -> str:
        """One line naming what changed, for a warning or a failure."""
        return "; ".join(f"{kind}: {', '.join(paths)}" for kind, paths in self.report().items())


def place(service: str, connection: str, relation: str) -> str:
    """Where drift was met, as a `Frozen` message names it."""
    return f"{service} connection {connection!r}, stream {relation}"


def under_contract(extra: str, contract: Contract, where: str) -> str | None:
    """`extra` as the contract keeps it (see the module's docstring); `where` names the
    stream and connection in a `Frozen` message."""
    if contract is Contract.EVOLVE:
        return extra
    found = json.loads(extra)
    changed = [path for kind in ("new", "retyped") for path in found.get(kind, {})]
    if not changed:
        return extra
    if contract is Contract.FREEZE:
        raise Frozen(
            f"{where}: the service sent fields the stream's schema does not hold "
            f"({', '.join(sorted(changed))}) and its contract is freeze, so nothing was "
            "written. Set its contract to evolve or discard in sync.toml to land them."
        )
    kept = {"missing": found["missing"]} if "missing" in found else {}
    return json.dumps(kept) if kept else None


def watched_rows(
    rows: Iterable[dict | pa.Table], drift: Drift, contract: Contract, where: str
) -> Iterator[dict | pa.Table]:
    """Rows on their way to the lake: their `_extra` tallied into `drift` and kept as the
    contract says."""
    name = EXTRA.name
    for row in rows:
        if isinstance(row, pa.Table):
            yield watched_table(row, drift, contract, where)
            continue
        extra = row.get(name)
        if extra is not None:
            drift.see(extra)
            row[name] = under_contract(extra, contract, where)
        yield row


def watched_table(table: pa.Table, drift: Drift, contract: Contract, where: str) -> pa.Table:
    """`table` with its `_extra` tallied into `drift` and kept as the contract says."""
    if EXTRA.name not in table.column_names:
        return table
    column = table[EXTRA.name]
    if column.null_count == len(column):
        return table
    kept = []
    for extra in column.to_pylist():
        if extra is not None:
            drift.see(extra)
            extra = under_contract(extra, contract, where)
        kept.append(extra)
    index = table.column_names.index(EXTRA.name)
    return table.set_column(index, EXTRA.name, pa.array(kept, EXTRA.type))


#: Rows per kind and path of drift among a relation's `_extra` (`{relation}`: `Lake.relation`).
DRIFT_IN_LAKE = """
WITH drifted AS (SELECT _extra::JSON AS x FROM {relation} WHERE _extra IS NOT NULL)
SELECT kind, path, count(*) FROM (
    SELECT 'new' AS kind, unnest(json_keys(x, '$.new')) AS path FROM drifted
    UNION ALL SELECT 'retyped', unnest(json_keys(x, '$.retyped')) FROM drifted
    UNION ALL SELECT 'missing', unnest(json_extract_string(x, '$.missing[*]')) FROM drifted
) GROUP BY ALL ORDER BY ALL
"""


def drift_in_lake(
    lake: Lake, stream: Stream, days: Collection[date] | None = None
) -> tuple[int, dict[str, dict[str, int]]]:
    """The stream's landed rows (of `days` only, where given), and per kind and path how
    many of them hold drift in `_extra` (what the `schema_matches` check reports)."""
    relation = lake.relation(stream, days)
    if relation is None:
        return 0, {}
    found: dict[str, dict[str, int]] = {}
    # Both in one DuckDB: opening one costs more than counting (bench: peer).
    with lake.connect(spill=True) as con:
        [(rows,)] = con.execute(f"SELECT count(*) FROM {relation}").fetchall()
        for kind, path, count in con.execute(DRIFT_IN_LAKE.format(relation=relation)).fetchall():
            found.setdefault(kind, {})[path] = count
    return rows, {kind: found[kind] for kind in KINDS if kind in found}
