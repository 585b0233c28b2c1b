"""A page of trigger logs read as Arrow: the fast reader and the general one agree, and what
the fast one cannot read exactly is read, named or asked again by the general one."""

import json

import pyarrow as pa
import pydantic
import pytest

from pipelines.clients import comment
from pipelines.clients.comment import LOG_SCHEMA, _log_rows_table, _log_table
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
    assert read.logs.schema.equals(LOG_SCHEMA)
    assert read.logs.equals(_log_rows_table([LOG, sparse]))
    # An offset is turned to UTC: 09:00 in Tokyo is midnight UTC.
    assert read.logs["created_at"][0].as_py().isoformat() == "2026-01-01T00:00:00+00:00"


def test_a_time_without_offset_is_read_as_utc():
    read = _log_table(page(LOG | {"created_at": "2026-01-01T09:00:00"}))
    assert read.logs["created_at"][0].as_py().isoformat() == "2026-01-01T09:00:00+00:00"


def test_a_missing_required_field_is_named():
    with pytest.raises(pydantic.ValidationError, match="account_id"):
        _log_table(page({k: v for k, v in LOG.items() if k != "account_id"}))


def test_a_cut_page_is_asked_again():
    with pytest.raises(TruncatedBody):
        _log_table(page(LOG)[:-30])


def test_an_empty_page_is_an_empty_table():
    read = _log_table(page())
    assert read.logs.num_rows == 0 and read.logs.schema.equals(LOG_SCHEMA)
    assert isinstance(read.logs, pa.Table)
