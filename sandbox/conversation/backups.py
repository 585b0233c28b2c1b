"""Message backups: an asynchronous task, then a CSV file streamed in chunks.

States (only `initiated` is shown by the spec): `initiated`, `processing`, `completed`, each
intermediate state lasting `config.task_phase_seconds` on the wall or the data clock, whichever
moved further (`clock.Stopwatch`). The rows are those of the window [started_at, ended_at) as
they stood when the backup completed, oldest first, whenever it is downloaded: messages are
only ever appended, in order of arrival, so the rows as of that moment are the table's first
`Messages.rows_at(moment)`; nothing needs copying when it completes.
"""

from __future__ import annotations

import csv
import io
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from sandbox.clock import Stopwatch, iso
from sandbox.context import Sandbox
from sandbox.conversation.messages import BACKUP_COLUMNS, Messages
from sandbox.conversation.models import BACKUP_STATES
from sandbox.encoding import csv_bytes
from sandbox.errors import ApiError, not_found

BLOCK = 5000  # message rows scanned per streamed chunk


@dataclass(frozen=True)
class Backup:
    backup_id: int
    stopwatch: Stopwatch
    started_at: float  # the window, epoch seconds
    ended_at: float
    channel: int | None  # channel index filter
    member: int | None  # member row filter


class Backups:
    def __init__(
        self, sandbox: Sandbox, region: str, messages: Messages, download_url: str
    ) -> None:
        self._sandbox = sandbox
        self._messages = messages
        self._download_url = download_url  # with a `{backup_id}` placeholder
        rng = np.random.default_rng(sandbox.seed_for("conversation", region, "backups"))
        self._ids = itertools.count(int(rng.integers(1, 9)) * 100_000 + 1)
        self._items: dict[int, Backup] = {}
        self._lock = threading.Lock()

    def trigger(
        self, started_at: float, ended_at: float, channel: int | None, member: int | None
    ) -> int:
        with self._lock:
            backup_id = next(self._ids)
            stopwatch = Stopwatch(self._sandbox.clock.now())
            self._items[backup_id] = Backup(
                backup_id, stopwatch, started_at, ended_at, channel, member
            )
        return backup_id

    def detail(self, backup_id: int) -> dict:
        backup = self._get(backup_id)
        state = self._state(backup)
        url = self._download_url.format(backup_id=backup_id) if state == "completed" else ""
        return {
            "backup_id": backup_id,
            "created_at": iso(backup.stopwatch.created_at),
            "download_url": url,
            "state": state,
        }

    def completed(self, backup_id: int) -> tuple[Backup, range]:
        """The backup and its window's message rows as of its completion; 409 before."""
        backup = self._get(backup_id)
        finished = self._finished(backup)
        if finished is None:
            raise ApiError(409, "backup_not_ready", f"backup {backup_id} is {self._state(backup)}")
        lo, hi = self._messages.window(backup.started_at, backup.ended_at)
        hi = min(hi, self._messages.rows_at(finished))
        return backup, range(min(lo, hi), hi)

    def csv_chunks(self, backup: Backup, rows: range) -> Iterator[bytes]:
        """The CSV file (UTF-8, RFC 4180 quoting): a header, then one chunk per block scanned."""
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(BACKUP_COLUMNS)
        table = self._messages.table
        for start in range(rows.start, rows.stop, BLOCK):
            stop = min(rows.stop, start + BLOCK)
            keep = np.ones(stop - start, bool)
            if backup.channel is not None:
                keep &= table["channel"][start:stop] == backup.channel
            if backup.member is not None:
                keep &= table["member"][start:stop] == backup.member
            writer.writerows(self._messages.backup_rows(start + np.flatnonzero(keep)))
            if buffer.tell():
                yield csv_bytes(buffer.getvalue())
                buffer.seek(0)
                buffer.truncate()
        if buffer.tell():
            yield csv_bytes(buffer.getvalue())

    def _get(self, backup_id: int) -> Backup:
        backup = self._items.get(backup_id)
        if backup is None:
            raise not_found(f"backup {backup_id}")
        return backup

    def _finished(self, backup: Backup) -> datetime | None:
        """The data moment the backup completed, None before."""
        phases = len(BACKUP_STATES) - 1
        return backup.stopwatch.reached(phases * self._phase, self._sandbox.clock.now())

    @property
    def _phase(self) -> float:
        return self._sandbox.config.task_phase_seconds

    def _state(self, backup: Backup) -> str:
        if self._finished(backup) is not None:
            return BACKUP_STATES[-1]
        age = backup.stopwatch.age(self._sandbox.clock.now())
        return BACKUP_STATES[min(int(age / self._phase), len(BACKUP_STATES) - 2)]
