"""Member import and export tasks (spec sections 2 and 3).

A task is `pending`, then `processing`, each for `config.task_phase_seconds` (on the wall or the
data clock, whichever moved further: `clock.Stopwatch`), then `success` (or `failed` when the
sandbox was told to fail the next import). Its work (applying an import, snapshotting an
export) runs exactly once, whether or not anyone polls: `ContactHub.catch_up` finishes every
due task, in order of finish, on the contacts as of its finish moment, before it serves any
request or truth read of its region.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sandbox.clock import Stopwatch, iso


@dataclass
class Task:
    id: int
    category: str  # import_member or export_member
    stopwatch: Stopwatch
    phase_seconds: float
    # Runs once when the task succeeds, at the data moment it finished; returns its `result`.
    work: Callable[[Task, datetime], dict]
    fails: bool = False
    result: dict = field(default_factory=dict)
    finished_at: datetime | None = None
    detail: dict = field(default_factory=dict)  # what the admin routes show

    @property
    def created_at(self) -> datetime:
        return self.stopwatch.created_at

    def finish_moment(self, now: datetime) -> datetime | None:
        """When the task's last phase ended (data time), None while it runs."""
        return self.stopwatch.reached(2 * self.phase_seconds, now)

    def finish(self, at: datetime) -> None:
        if not self.fails:
            self.result = self.work(self, at)
        self.finished_at = at

    def status(self, now: datetime) -> str:
        if self.finished_at is not None:
            return "failed" if self.fails else "success"
        # Due but not yet finished by the hub: still processing until it is.
        return "pending" if self.stopwatch.age(now) < self.phase_seconds else "processing"

    def body(self, now: datetime) -> dict:
        return {
            "id": self.id,
            "category": self.category,
            "status": self.status(now),
            "result": self.result,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.finished_at or self.created_at),
        }
