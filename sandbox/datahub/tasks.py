"""Member import and export tasks (spec sections 2 and 3).

A task is `pending`, then `processing`, each for `config.task_phase_seconds` of wall time,
then `success` (or `failed` when the sandbox was told to fail the next import). The status is
computed when read; the work (applying an import, snapshotting an export) runs exactly once,
at the first read that finds the task finished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sandbox.clock import iso


@dataclass
class Task:
    id: int
    category: str  # import_member or export_member
    created_at: datetime
    phase_seconds: float
    # Runs once when the task succeeds; returns the task's `result`.
    work: Callable[[], dict]
    fails: bool = False
    status: str = "pending"
    result: dict = field(default_factory=dict)
    updated_at: datetime | None = None
    started: float = field(default_factory=time.monotonic)
    detail: dict = field(default_factory=dict)  # what the admin routes show
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def refresh(self, now: datetime) -> None:
        """Move the task to the state its age implies; finish it at most once."""
        age = time.monotonic() - self.started
        with self._lock:
            if self.status in ("success", "failed"):
                return
            if age < self.phase_seconds:
                wanted = "pending"
            elif age < 2 * self.phase_seconds:
                wanted = "processing"
            else:
                wanted = "failed" if self.fails else "success"
            if wanted == self.status:
                return
            if wanted == "success":
                self.result = self.work()
            self.status = wanted
            self.updated_at = now

    def body(self) -> dict:
        return {
            "id": self.id,
            "category": self.category,
            "status": self.status,
            "result": self.result,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at or self.created_at),
        }
