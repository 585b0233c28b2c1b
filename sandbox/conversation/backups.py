"""Message backups: an asynchronous task, then a CSV file streamed in chunks.

States (only `initiated` is shown by the spec): `initiated`, `processing`, `completed`, each
intermediate state lasting `config.task_phase_seconds` of wall time. The rows are those of the
window [started_at, ended_at) as they stood when the backup was triggered, oldest first.
"""

from __future__ import annotations

import csv
import io
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from sandbox.clock import iso
from sandbox.context import Sandbox
from sandbox.conversation.messages import BACKUP_COLUMNS, Messages
from sandbox.conversation.models import BACKUP_STATES
from sandbox.errors import ApiError, not_found

BLOCK = 5000  # message rows scanned per streamed chunk


@dataclass(frozen=True)
class Backup:
    backup_id: int
    created_at: str
    started: float  # time.monotonic() at trigger
    lo: int  # message rows lo..hi fall in the window
    hi: int
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

    def trigger(self, lo: int, hi: int, channel: int | None, member: int | None) -> int:
        with self._lock:
            backup_id = next(self._ids)
            self._items[backup_id] = Backup(
                backup_id, iso(self._sandbox.clock.now()), time.monotonic(), lo, hi, channel, member
            )
        return backup_id

    def detail(self, backup_id: int) -> dict:
        backup = self._get(backup_id)
        state = self._state(backup)
        url = self._download_url.format(backup_id=backup_id) if state == "completed" else ""
        return {
            "backup_id": backup_id,
            "created_at": backup.created_at,
            "download_url": url,
            "state": state,
        }

    def completed(self, backup_id: int) -> Backup:
        backup = self._get(backup_id)
        state = self._state(backup)
        if state != "completed":
            raise ApiError(409, "backup_not_ready", f"backup {backup_id} is {state}")
        return backup

    def csv_chunks(self, backup: Backup) -> Iterator[bytes]:
        """The CSV file (UTF-8, RFC 4180 quoting): a header, then one chunk per block scanned."""
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(BACKUP_COLUMNS)
        table = self._messages.table
        for start in range(backup.lo, backup.hi, BLOCK):
            stop = min(backup.hi, start + BLOCK)
            keep = np.ones(stop - start, bool)
            if backup.channel is not None:
                keep &= table["channel"][start:stop] == backup.channel
            if backup.member is not None:
                keep &= table["member"][start:stop] == backup.member
            writer.writerows(self._messages.backup_rows(start + np.flatnonzero(keep)))
            if buffer.tell():
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
        if buffer.tell():
            yield buffer.getvalue().encode()

    def _get(self, backup_id: int) -> Backup:
        backup = self._items.get(backup_id)
        if backup is None:
            raise not_found(f"backup {backup_id}")
        return backup

    def _state(self, backup: Backup) -> str:
        phase = self._sandbox.config.task_phase_seconds
        elapsed = time.monotonic() - backup.started
        step = len(BACKUP_STATES) - 1 if phase <= 0 else int(elapsed / phase)
        return BACKUP_STATES[min(step, len(BACKUP_STATES) - 1)]
