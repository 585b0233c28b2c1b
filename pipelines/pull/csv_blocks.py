"""A CSV file read as it downloads: its header, then blocks of whole records, each parsed by
Arrow as its own small file (the message backup, `pipelines/streams/conversation/backups.py`;
the member export, `pipelines/streams/datahub/export.py`).

A block is cut after the last line end outside quotes (RFC 4180: a quote only opens or
closes a quoted field, and an escaped one, `""`, toggles twice), so each block parses alone.
That lets a caller read a block with its columns' types and, when one value does not read
as its type, read that same block again as text, instead of reading the whole file as text
and converting every value afterwards. A record must fit in a block; memory holds a block
and the download's chunks ahead, whatever the file's size.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.csv as pacsv

from pipelines.errors import DataRefused


class RecordTooLong(DataRefused):
    """A record of the file is longer than the block it must fit in; the caller says which
    setting bounds it."""


class CsvFile:
    """A CSV file arriving in chunks: `header` (its column names), then `blocks()` of whole
    records. `records` counts the data records that passed, from the bytes alone (line ends
    outside quotes), so a record the parser got wrong shows as a mismatch."""

    def __init__(self, chunks: Iterable[bytes], block_bytes: int) -> None:
        self._chunks = iter(chunks)
        self._block_bytes = block_bytes
        self.records = 0
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.header: list[str] = self._read_header()
        #: Physical lines before the block being read (the header's included).
        self.lines_before = 1

    def _more(self) -> bool:
        chunk = next(self._chunks, None)
        if chunk is None:
            return False
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        return True

    def _read_header(self) -> list[str]:
        while not any(b"\n" in part for part in self._pending) and self._more():
            pass
        data = b"".join(self._pending)
        line, newline, rest = data.partition(b"\n")
        self._pending, self._pending_bytes = [rest], len(rest)
        if not line and not newline:
            return []
        return next(csv.reader([line.decode("utf-8-sig", "replace").rstrip("\r")]), [])

    def blocks(self) -> Iterator[bytes]:
        """The data records, at most `block_bytes` at a time, in file order."""
        while True:
            while self._pending_bytes < self._block_bytes and self._more():
                pass
            data = b"".join(self._pending)
            if len(data) < self._block_bytes:  # the file's end: what is left is one block
                if data:
                    self.records += _records(data)
                    yield data
                return
            cut = _record_end(data, self._block_bytes)
            if cut is None:
                raise RecordTooLong(f"a record is longer than {self._block_bytes} bytes")
            self._pending, self._pending_bytes = [data[cut:]], len(data) - cut
            self.records += _records(data[:cut])
            yield data[:cut]
            self.lines_before += data.count(b"\n", 0, cut)


def _record_end(data: bytes, limit: int) -> int | None:
    """The offset after the last line end outside quotes within `data[:limit]`, if any
    (`data` starts at a record's start)."""
    end = data.rfind(b"\n", 0, limit)
    quotes = data.count(b'"', 0, end) if end >= 0 else 0
    while end >= 0:
        if quotes % 2 == 0:
            return end + 1
        previous = data.rfind(b"\n", 0, end)
        quotes -= data.count(b'"', previous + 1, end)
        end = previous
    return None


def _records(block: bytes) -> int:
    """The records of a block of whole ones: its line ends outside quotes, and a last record
    without one. A block starts outside quotes, so the pieces between its quotes alternate
    outside, inside: the odd ones are what is quoted, and their line ends are in values."""
    quoted = b"".join(block.split(b'"')[1::2]).count(b"\n")
    return block.count(b"\n") - quoted + (not block.endswith(b"\n"))


def read_block(
    block: bytes, header: list[str], types: Mapping[str, pa.DataType], *, check_utf8: bool
) -> pa.Table:
    """One block's records as a table of the header's columns, each of its type in `types`
    (text when not named), an empty value null except in a text column. Raises
    `pa.ArrowInvalid` when a value does not read as its type, or (with `check_utf8`) a text
    is not UTF-8."""
    return pacsv.read_csv(
        io.BytesIO(block),
        read_options=pacsv.ReadOptions(column_names=header, block_size=len(block) + 1),
        # Texts hold commas, quotes and line breaks.
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types={name: types.get(name, pa.string()) for name in header},
            null_values=[""],
            strings_can_be_null=False,
            check_utf8=check_utf8,
        ),
    )


def read_texts(block: bytes, header: list[str]) -> pa.Table:
    """One block's records with every column text, what is not UTF-8 read as U+FFFD (as the
    transport reads JSON): for a caller to convert value by value."""
    return valid_text(read_block(block, header, {}, check_utf8=False))


def valid_text(table: pa.Table) -> pa.Table:
    """`table` with each byte sequence that is not UTF-8 in its texts as U+FFFD; a column
    that is valid is left as it is."""
    for index, column_field in enumerate(table.schema):
        if not pa.types.is_string(column_field.type):
            continue
        column = table.column(index).combine_chunks()
        try:
            column.validate(full=True)
        except pa.ArrowInvalid:
            raw = column.view(pa.binary()).to_pylist()
            texts = [None if b is None else b.decode("utf-8", "replace") for b in raw]
            table = table.set_column(index, column_field, pa.array(texts, pa.string()))
    return table
