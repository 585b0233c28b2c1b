"""A page of trigger logs read as Arrow: the fast reader and the general one agree, and what
the fast one cannot read exactly is read, named or asked again by the general one."""

import json

import pyarrow as pa
import pytest

from pipelines.clients import comment
from pipelines.clients.comment import LOG_TABLE, _log_rows_table, _log_table, log_tables
from pipelines.streams.comment.trigger_logs import _Listing
from pipelines.transport import TruncatedBody

LOG = {
    "id": "l1",
    "activity_id": "a1",
    "activity_name": '週末限定セール, "quoted"\nline',
    "account_id": "acc",
    "trigger": "comment",
    "username": None,
    "comment_text": "hi",
    "post_id": "p1",
    "action": "dm",
    "status": "failed",
    "error": "rate limited",
    "created_at": "2026-01-01T09:00:00+09:00",
}


def page(*logs: dict, indent: int | None = None) -> bytes:
    body = {"logs": list(logs), "total": 40, "page": 0, "limit": 200, "later_field": 1}
    return json.dumps(body, indent=indent, ensure_ascii=False).encode()


@pytest.mark.parametrize("indent", [None, 2])
def test_the_fast_reader_and_the_general_one_agree(indent, monkeypatch):
    sparse = {k: v for k, v in LOG.items() if k not in ("username", "error")} | {"id": "l2"}
    with monkeypatch.context() as patched:
        patched.setattr(comment, "LOGS_PAGE", None)  # the general reader would fail
        read = _log_table(page(LOG, sparse, indent=indent))
    assert read.total == 40
    assert read.logs.schema.equals(LOG_TABLE)
    assert read.logs.equals(_log_rows_table([LOG, sparse]))
    assert read.logs["_extra"].null_count == 2  # nothing beyond the schema
    # An offset is turned to UTC: 09:00 in Tokyo is midnight UTC.
    assert read.logs["created_at"][0].as_py().isoformat() == "2026-01-01T00:00:00+00:00"


def test_a_time_without_offset_is_read_as_utc():
    read = _log_table(page(LOG | {"created_at": "2026-01-01T09:00:00"}))
    assert read.logs["created_at"][0].as_py().isoformat() == "2026-01-01T09:00:00+00:00"


def test_a_missing_required_field_is_null_and_named_in_extra():
    read = _log_table(page({k: v for k, v in LOG.items() if k != "account_id"}, LOG))
    assert read.logs["account_id"].to_pylist() == [None, "acc"]
    assert [extra(e) for e in read.logs["_extra"].to_pylist()] == [
        {"missing": ["account_id"]},
        None,
    ]


def extra(text: str | None) -> dict | None:
    return None if text is None else json.loads(text)


@pytest.mark.parametrize("general", [False, True])
def test_a_new_field_is_kept_in_extra_by_either_reader(general, monkeypatch):
    """Both readers keep a field the service added, nested values included; the fast one
    (Arrow) as long as it can read the page, the general one (when a log does not fit)."""
    added = LOG | {"tag": 7, "place": {"city": "Osaka"}}
    odd = [LOG | {"id": "l3", "created_at": "2026-01-01T09:00:00"}] if general else []
    if not general:
        monkeypatch.setattr(comment, "LOGS_PAGE", None)  # the fast reader must do it
    read = _log_table(page(added, LOG | {"id": "l2"}, *odd))
    assert extra(read.logs["_extra"][0].as_py()) == {"new": {"tag": 7, "place": {"city": "Osaka"}}}
    assert read.logs["_extra"][1].as_py() is None
    assert read.logs["id"].to_pylist()[:2] == ["l1", "l2"]


def test_a_value_of_another_type_is_null_and_kept_as_sent():
    read = _log_table(page(LOG | {"post_id": 42}, LOG | {"id": "l2"}))
    assert read.logs["post_id"].to_pylist() == [None, "p1"]
    assert extra(read.logs["_extra"][0].as_py()) == {"retyped": {"post_id": 42}}
    assert read.logs["id"].to_pylist() == ["l1", "l2"]  # the other fields and logs as they were


def test_a_cut_page_is_asked_again():
    with pytest.raises(TruncatedBody):
        _log_table(page(LOG)[:-30])


def test_an_empty_page_is_an_empty_table():
    read = _log_table(page())
    assert read.logs.num_rows == 0 and read.logs.schema.equals(LOG_TABLE)
    assert isinstance(read.logs, pa.Table)


def test_pages_read_together_are_each_page_as_read_alone(monkeypatch):
    """Several answers read in one call (`log_tables`): each page its own logs, in order,
    with its own total, a new field kept, an empty page empty."""
    bodies = [
        page(LOG, LOG | {"id": "l2"}),
        page(),
        page(LOG | {"id": "l3", "tag": 7}).replace(b'"total": 40', b'"total": 41'),
    ]
    alone = [_log_table(body) for body in bodies]
    with monkeypatch.context() as patched:
        patched.setattr(comment, "LOGS_PAGE", None)  # the general reader would fail
        together = log_tables(bodies)
    assert [read.total for read in together] == [40, 40, 41]
    assert [read.logs.num_rows for read in together] == [2, 0, 1]
    for read, expected in zip(together, alone, strict=True):
        assert read.logs.schema.equals(LOG_TABLE) and read.logs.equals(expected.logs)
    assert extra(together[2].logs["_extra"][0].as_py()) == {"new": {"tag": 7}}


def test_a_page_arrow_cannot_read_leaves_the_others_read():
    """A time without offset cannot be read by Arrow: that page is None (its caller reads
    it the general way), the pages beside it are read, a pretty-printed one alone."""
    odd = page(LOG | {"created_at": "2026-01-01T09:00:00"})
    pretty = page(LOG | {"id": "l4"}, indent=2)
    first, second, third = log_tables([page(LOG), odd, pretty])
    assert second is None
    assert first.logs["id"].to_pylist() == ["l1"] and third.logs["id"].to_pylist() == ["l4"]
    assert log_tables([page(LOG)[:-30]]) == [None]


def test_a_listed_page_arrow_cannot_read_is_asked_again_and_read_the_general_way():
    """In a walk of the list (`pipelines/streams/comment/trigger_logs.py`), the answers read
    together; one Arrow cannot read is asked for again, by the call that reads it log by
    log."""
    odd = page(LOG | {"id": "l5", "created_at": "2026-01-01T09:00:00"})
    asked = []

    class Client:
        def log_table(self, *, days: int, page: int):
            asked.append((days, page))
            return _log_table(odd)

    first = _log_table(page(LOG))
    listing = _Listing(Client(), 30, first)
    pages = listing.decode([listing.fetch(0), (1, page(LOG | {"id": "l2"})), (2, odd)])
    assert asked == [(30, 2)]
    assert [[listed[0] for listed in p.rows] for p in pages] == [["l1"], ["l2"], ["l5"]]
