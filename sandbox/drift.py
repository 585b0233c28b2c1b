"""Schema drift on demand: chosen streams change their shape from a given moment.

Spec (`--drift`, `SandboxConfig.drift`), comma-separated `<stream>:<kind>=<arguments>`:

    comment.trigger_logs:add=channel_tag:number    a new top-level field: number, string or object
    comment.activities:nest=stats.shares:number    a new field inside an object field of the item
    conversation.channels:rename=name>title        the old name gone, the new carries its value
    datahub.members:retype=member_id:string        the value served as text (string) or as null
    datahub.members:remove=city                    the field (in a CSV file, the column) disappears

Streams are named as the pipeline names them (`STREAMS` below). The changes apply to the
answers served once the sandbox's clock is at or after `DriftSpec.start` (None: always), in
the order written; the services themselves are untouched: `DriftInjector` reshapes their
answers on the way out, so with no drift configured it is not in the chain at all.

What each served item gets is derivable from the item alone: `added_value` (add, nest) and
`retyped_value` (retype) are the one place those values are made; a renamed field carries
the value it had. `GET /_sandbox/drift` (and `drift` in `/_sandbox/truth`) counts what was
served drifted.
"""

from __future__ import annotations

import codecs
import csv
import importlib
import io
import json
import re
import threading
import zlib
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel

from sandbox.clock import Clock, iso
from sandbox.encoding import csv_bytes, json_bytes

KINDS = ("add", "nest", "rename", "retype", "remove")
ADD_TYPES = ("number", "string", "object")
RETYPE_TYPES = ("string", "null")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Served:
    """Where a stream is served: its paths under the service's mount(s), each with the key
    of the answer's items (None: the answer is the list, or the one item); the field that
    identifies an item; what names its fields (a response model or the CSV header)."""

    service: str
    paths: tuple[tuple[str, str | None], ...]
    id_field: str
    fields: str  # "module:attribute", imported when a spec is checked
    csv: bool = False


STREAMS: dict[str, Served] = {
    "comment.accounts": Served(
        "comment", (("/accounts", "accounts"),), "id", "sandbox.comment.models:Account"
    ),
    "comment.posts": Served(
        "comment", (("/accounts/{id}/posts", "posts"),), "id", "sandbox.comment.models:Post"
    ),
    "comment.activities": Served(
        "comment",
        (("/activities", "activities"), ("/activities/{id}", "activity")),
        "id",
        "sandbox.comment.models:Activity",
    ),
    "comment.trigger_logs": Served(
        "comment", (("/logs", "logs"),), "id", "sandbox.comment.models:TriggerLog"
    ),
    "conversation.channels": Served(
        "conversation",
        (("/v1/channels", "channels"), ("/v2/channels", "channels")),
        "id",
        "sandbox.conversation.models:Channel",
    ),
    "conversation.teams": Served(
        "conversation", (("/v2/teams", "teams"),), "id", "sandbox.conversation.models:TeamSummary"
    ),
    "conversation.users": Served(
        "conversation", (("/v2/users", "users"),), "id", "sandbox.conversation.models:UserSummary"
    ),
    "conversation.messages": Served(
        "conversation",
        (("/v1/backups/{backup_id}/download", None),),
        "message_uuid",
        "sandbox.conversation.messages:BACKUP_COLUMNS",
        csv=True,
    ),
    "datahub.custom_fields": Served(
        "datahub",
        (("/cdh/v1/custom-fields/", None),),
        "id",
        "sandbox.datahub.contact_models:CustomField",
    ),
    "datahub.broadcasts": Served(
        "datahub", (("/v1/broadcasts", None),), "id", "sandbox.datahub.contact_models:Broadcast"
    ),
    "datahub.members": Served(
        "datahub",
        (("/v1/members/export/{task_id}/file", None),),
        "member_id",
        "sandbox.datahub.contact_data:EXPORT_FIELDS",
        csv=True,
    ),
}


# --- the values drifted items carry -----------------------------------------------------


def added_value(
    stream: str, field: str, type_: str, item_id: object, *, csv: bool = False
) -> int | str | dict:
    """The value `add` or `nest` gives an item: derived from the stream, the field (dotted
    for `nest`, e.g. `stats.shares`), the type and the item's id (its text: `12` and `"12"`
    give the same), so a test can compute what every item carries. `csv`: as a CSV file
    serves it, the number or string as text, the object as compact JSON."""
    n = zlib.crc32(f"{stream}/{field}/{item_id}".encode()) % 1000
    if type_ == "number":
        value: int | str | dict = n
    elif type_ == "string":
        value = f"{field.rpartition('.')[2]}-{n:03d}"
    else:
        value = {"item": str(item_id), "score": n}
    if csv and not isinstance(value, str):
        return json.dumps(value, separators=(",", ":"))
    return value


def retyped_value(value: object, type_: str, *, csv: bool = False) -> object:
    """The value `retype` serves instead of `value`.

    `null`: null (in a CSV file, the empty value). `string` in JSON: a number, boolean,
    object or list as its JSON text (`12` → `"12"`), a string or null as it was; in a CSV
    file, where every value is text, a value marked as text the way spreadsheets do, with a
    leading apostrophe (`12` → `'12`), so it no longer reads as a number or a date; empty
    stays empty.
    """
    if type_ == "null":
        return "" if csv else None
    if csv:
        return f"'{value}" if value else value
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- the spec ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One change of one stream. `field`: the field changed (`nest`: `parent.name`);
    `argument`: the type (`add`, `nest`, `retype`) or the new name (`rename`)."""

    stream: str
    kind: str
    field: str
    argument: str = ""

    @property
    def text(self) -> str:
        """The change as written in a spec, without its stream."""
        if self.kind == "rename":
            return f"rename={self.field}>{self.argument}"
        if self.kind == "remove":
            return f"remove={self.field}"
        return f"{self.kind}={self.field}:{self.argument}"

    def __str__(self) -> str:
        return f"{self.stream}:{self.text}"


@dataclass(frozen=True)
class DriftSpec:
    changes: tuple[Change, ...] = ()
    # Answers served once the data clock is at or after this moment drift; None: from start.
    start: datetime | None = None

    def __bool__(self) -> bool:
        return bool(self.changes)

    @classmethod
    def parse(cls, text: str | None, start: datetime | None = None) -> DriftSpec:
        """A spec from its text (module docstring); ValueError naming what is wrong."""
        if start is not None and start.tzinfo is None:
            raise ValueError(f"the drift moment {start.isoformat()} needs a timezone")
        changes: list[Change] = []
        known: dict[str, set[str]] = {}  # fields of each stream as the changes so far left them
        for item in filter(None, (part.strip() for part in (text or "").split(","))):
            change = _change(item)
            fields = known.setdefault(change.stream, set(_fields(STREAMS[change.stream])))
            _check(item, change, fields)
            changes.append(change)
        return cls(tuple(changes), start)

    def of(self, stream: str) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.stream == stream)

    def streams(self) -> list[str]:
        return list(dict.fromkeys(c.stream for c in self.changes))


def _change(item: str) -> Change:
    stream, _, rest = item.partition(":")
    kind, equals, arguments = rest.partition("=")
    stream, kind, arguments = stream.strip(), kind.strip(), arguments.strip()
    if stream not in STREAMS:
        raise ValueError(f"drift {item!r}: unknown stream {stream!r}; known: {', '.join(STREAMS)}")
    if kind not in KINDS or not equals:
        raise ValueError(
            f"drift {item!r}: write <stream>:<kind>=<arguments>, kind one of {', '.join(KINDS)}"
        )
    forms = {
        "add": "add=<field>:<number|string|object>",
        "nest": "nest=<object field>.<field>:<number|string|object>",
        "rename": "rename=<field>><new name>",
        "retype": "retype=<field>:<string|null>",
        "remove": "remove=<field>",
    }
    if kind == "remove":
        field, argument, names = arguments, "", [arguments]
    else:
        field, sep, argument = arguments.partition(">" if kind == "rename" else ":")
        names = field.split(".") if kind == "nest" else [field]
        if kind == "rename":
            names.append(argument)
        if not sep:
            names = []
    well_formed = names and all(_NAME.match(name) for name in names)
    if not well_formed or (kind == "nest" and len(names) != 2):
        raise ValueError(f"drift {item!r}: write {forms[kind]}")
    types = {"add": ADD_TYPES, "nest": ADD_TYPES, "retype": RETYPE_TYPES}.get(kind)
    if types and argument not in types:
        raise ValueError(
            f"drift {item!r}: {kind} takes the types {', '.join(types)}, not {argument!r}"
        )
    return Change(stream, kind, field, argument)


def _check(item: str, change: Change, fields: set[str]) -> None:
    """Against the fields the stream serves (as earlier changes left them)."""
    served = STREAMS[change.stream]
    where = "columns" if served.csv else "fields"
    listed = ", ".join(sorted(fields))
    if change.kind == "nest":
        if served.csv:
            raise ValueError(f"drift {item!r}: nest needs a JSON stream; {change.stream} is CSV")
        parent, _, name = change.field.partition(".")
        inner = _object_fields(served, parent)
        if inner is None:
            objects = [f for f in sorted(fields) if _object_fields(served, f) is not None]
            raise ValueError(
                f"drift {item!r}: {parent!r} is not an object field of {change.stream}; "
                f"its object fields: {', '.join(objects) or 'none'}"
            )
        if name in inner:
            raise ValueError(f"drift {item!r}: {change.stream} {parent} already has {name!r}")
        return
    new = change.field if change.kind == "add" else change.argument
    if change.kind != "add" and change.field not in fields:
        raise ValueError(
            f"drift {item!r}: {change.stream} serves no {change.field!r}; its {where}: {listed}"
        )
    if change.kind in ("add", "rename") and new in fields:
        raise ValueError(f"drift {item!r}: {change.stream} already serves {new!r}")
    if change.kind in ("rename", "remove"):
        fields.discard(change.field)
    if change.kind in ("add", "rename"):
        fields.add(new)


def _resolve(served: Served) -> object:
    # Imported on demand: the services' modules import sandbox.context, which imports the
    # config, which imports this module.
    module, _, name = served.fields.partition(":")
    return getattr(importlib.import_module(module), name)


def _fields(served: Served) -> tuple[str, ...]:
    found = _resolve(served)
    return tuple(found.model_fields) if isinstance(found, type) else tuple(found)


def _object_fields(served: Served, name: str) -> tuple[str, ...] | None:
    """The fields of an object field of a JSON stream's items; None if it is not one."""
    model = _resolve(served)
    info = model.model_fields.get(name) if isinstance(model, type) else None
    kind = info.annotation if info is not None else None
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return tuple(kind.model_fields)
    return None


# --- reshaping answers ------------------------------------------------------------------


def drift_item(stream: str, changes: tuple[Change, ...], item: dict, counts: dict) -> dict:
    """A JSON item as drifted (a new dict); `counts[change]` += 1 for each change applied."""
    item_id = item.get(STREAMS[stream].id_field)
    for change in changes:
        kind, field = change.kind, change.field
        if kind == "add":
            item = {**item, field: added_value(stream, field, change.argument, item_id)}
        elif kind == "nest":
            parent, _, name = field.partition(".")
            inner = item.get(parent)
            if not isinstance(inner, dict):
                continue
            value = added_value(stream, field, change.argument, item_id)
            item = {**item, parent: {**inner, name: value}}
        elif field not in item:
            continue
        elif kind == "rename":
            item = {(change.argument if k == field else k): v for k, v in item.items()}
        elif kind == "retype":
            item = {**item, field: retyped_value(item[field], change.argument)}
        else:  # remove
            item = {k: v for k, v in item.items() if k != field}
        counts[change] += 1
    return item


class CsvDrift:
    """One CSV file as drifted, fed in chunks: whole records are reshaped as they come."""

    def __init__(self, stream: str, changes: tuple[Change, ...], counts: dict) -> None:
        self.stream, self.changes, self.counts = stream, changes, counts
        self.rows = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._steps: list[tuple[Change, int]] | None = None  # (change, column position)
        self._id_at = -1

    def feed(self, chunk: bytes, last: bool = False) -> bytes:
        text = self._pending + self._decoder.decode(chunk, final=last)
        cut = len(text) if last else _records_end(text)
        self._pending = text[cut:]
        return self._reshape(text[:cut]) if cut else b""

    def _reshape(self, text: str) -> bytes:
        reader = csv.reader(io.StringIO(text, newline=""))
        out = io.StringIO()
        writer = csv.writer(out)
        if self._steps is None:
            header = next(reader, None)
            if header is None:
                return b""
            writer.writerow(self._plan(header))
        for row in reader:
            if row:
                writer.writerow(self._row(row))
        return csv_bytes(out.getvalue())

    def _plan(self, header: list[str]) -> list[str]:
        """The drifted header; the steps each row takes to match it."""
        self._id_at = header.index(self.stream_id) if self.stream_id in header else -1
        self._steps = []
        for change in self.changes:
            if change.kind == "add":
                header.append(change.field)
                self._steps.append((change, len(header) - 1))
                continue
            if change.field not in header:
                continue
            at = header.index(change.field)
            if change.kind == "rename":
                header[at] = change.argument
            elif change.kind == "remove":
                del header[at]
            self._steps.append((change, at))
        return header

    @property
    def stream_id(self) -> str:
        return STREAMS[self.stream].id_field

    def _row(self, row: list[str]) -> list[str]:
        item_id = row[self._id_at] if 0 <= self._id_at < len(row) else None
        self.rows += 1
        for change, at in self._steps or ():
            if change.kind == "add":
                row.append(
                    added_value(self.stream, change.field, change.argument, item_id, csv=True)
                )
            elif at >= len(row):
                continue
            elif change.kind == "retype":
                row[at] = retyped_value(row[at], change.argument, csv=True)
            elif change.kind == "remove":
                del row[at]
            self.counts[change] += 1
        return row


def _records_end(text: str) -> int:
    """Where the last whole CSV record of `text` ends (after a line break outside quotes)."""
    end = len(text)
    while (cut := text.rfind("\n", 0, end)) >= 0:
        if text.count('"', 0, cut) % 2 == 0:
            return cut + 1
        end = cut
    return 0


class DriftInjector:
    """ASGI middleware: GET answers (200) of the drifted streams, reshaped once the data
    clock reached the spec's start. Other requests pass through untouched."""

    def __init__(
        self, app, spec: DriftSpec, clock: Clock, mounts: dict[tuple[str, str], str]
    ) -> None:
        self.app = app
        self.spec = spec
        self.clock = clock
        self._routes: list[tuple[re.Pattern, str, str | None]] = []
        for stream in spec.streams():
            served = STREAMS[stream]
            for (service, _), mount in mounts.items():
                if service == served.service:
                    for path, items in served.paths:
                        self._routes.append((_path_pattern(mount + path), stream, items))
        self._lock = threading.Lock()
        self._answers = dict.fromkeys(spec.streams(), 0)
        self._items = dict.fromkeys(spec.streams(), 0)
        self._applied = dict.fromkeys(spec.changes, 0)

    def active(self) -> bool:
        return self.spec.start is None or self.clock.now() >= self.spec.start

    async def __call__(self, scope, receive, send) -> None:
        found = None
        if scope["type"] == "http" and scope["method"] == "GET":
            path = scope["path"]
            found = next(((s, i) for p, s, i in self._routes if p.match(path)), None)
        if found is None or not self.active():
            await self.app(scope, receive, send)
            return
        stream, items = found
        reshape = self._csv if STREAMS[stream].csv else self._json
        await self.app(scope, receive, reshape(stream, items, send))

    def _json(self, stream: str, items: str | None, send):
        """Hold the head and body of the answer; send them drifted, with the new length."""
        held: dict = {}
        chunks: list[bytes] = []

        async def wrapped(message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                held["start"] = message
                return
            if "start" not in held or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = self._drift_json(stream, items, b"".join(chunks))
            start = held["start"]
            headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return wrapped

    def _drift_json(self, stream: str, items: str | None, body: bytes) -> bytes:
        answer = json.loads(body)
        found = answer if items is None else answer.get(items)
        changes = self.spec.of(stream)
        counts = dict.fromkeys(changes, 0)
        if isinstance(found, dict):  # one item
            drifted = drift_item(stream, changes, found, counts)
            answer, served = (drifted if items is None else {**answer, items: drifted}), 1
        elif isinstance(found, list):
            found[:] = [drift_item(stream, changes, i, counts) for i in found]
            served = len(found)
        else:
            return body
        self._count(stream, served, counts)
        return json_bytes(answer)

    def _csv(self, stream: str, _: str | None, send):
        """Pass the head on; reshape the file's records as its chunks come."""
        counts = dict.fromkeys(self.spec.of(stream), 0)
        file = CsvDrift(stream, self.spec.of(stream), counts)
        state = {"drift": False}

        async def wrapped(message) -> None:
            if message["type"] == "http.response.start":
                state["drift"] = message["status"] == 200
            if not state["drift"] or message["type"] != "http.response.body":
                await send(message)
                return
            last = not message.get("more_body")
            body = file.feed(message.get("body", b""), last=last)
            await send({**message, "body": body})
            if last:
                self._count(stream, file.rows, counts)

        return wrapped

    def _count(self, stream: str, items: int, counts: dict[Change, int]) -> None:
        with self._lock:
            self._answers[stream] += 1
            self._items[stream] += items
            for change, count in counts.items():
                self._applied[change] += count

    def report(self) -> dict:
        """The spec and what was served drifted so far: answers, items (rows) in them, and
        per change the items it applied to (a field to rename, retype or remove, an object
        to nest in, was there)."""
        with self._lock:
            return {
                "from": iso(self.spec.start) if self.spec.start else None,
                "active": self.active(),
                "streams": {
                    stream: {
                        "changes": [c.text for c in self.spec.of(stream)],
                        "answers": self._answers[stream],
                        "items": self._items[stream],
                        "applied": {c.text: self._applied[c] for c in self.spec.of(stream)},
                    }
                    for stream in self.spec.streams()
                },
            }


def _path_pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{[^}]+\}", template)
    return re.compile("[^/]+".join(re.escape(part) for part in parts) + r"\Z")
