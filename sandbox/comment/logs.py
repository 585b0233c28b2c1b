"""Trigger logs as compact numpy columns, one immutable snapshot per state.

A million rows cost a few arrays; the dicts of one page are built on demand. Rows are kept in
ascending (created_at, serial) order, so "newest first" is the reverse order and a time window
is one `searchsorted`. Changes (live arrivals, deleting an activity) build a new snapshot, so a
reader holding the old one never sees a half-written table.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

ACTIONS = ("public_reply", "dm")
PUBLIC_REPLY, DM = 0, 1
STATUSES = ("success", "failed")
SUCCESS, FAILED = 0, 1

# Log ids look like uuids: a workspace prefix and the row's serial mixed over 48 bits by
# xor-shifts and odd multipliers (each step a bijection, so ids stay unique).
_ID_BITS = np.uint64((1 << 48) - 1)
_ID_MULTIPLIERS = (np.uint64(0x9E3779B97F4B), np.uint64(0xC2B2AE3D27D5))
_ID_SHIFT = np.uint64(23)
_ID_OFFSET = np.uint64(0x1F2E3D4C5B6A)


@dataclass(frozen=True)
class LogTable:
    t: np.ndarray  # created_at, epoch seconds, int64, ascending
    serial: np.ndarray  # int64, unique per workspace, gives the id
    activity: np.ndarray  # int32, index into the workspace's activities
    trigger: np.ndarray  # int8, index into models.TRIGGERS (kept: a trigger may be updated)
    action: np.ndarray  # int8, index into ACTIONS
    status: np.ndarray  # int8, index into STATUSES
    user: np.ndarray  # int32, index into the username pool
    text: np.ndarray  # int16, index into fakedata.COMMENT_TEXTS, -1 = null
    post: np.ndarray  # int32, index into the workspace's post ids, -1 = null
    error: np.ndarray  # int16, index into the error texts, -1 = null

    DTYPES = {
        "t": np.int64,
        "serial": np.int64,
        "activity": np.int32,
        "trigger": np.int8,
        "action": np.int8,
        "status": np.int8,
        "user": np.int32,
        "text": np.int16,
        "post": np.int32,
        "error": np.int16,
    }

    @classmethod
    def from_columns(cls, columns: dict[str, np.ndarray]) -> LogTable:
        return cls(
            **{name: np.asarray(columns[name], dtype=dtype) for name, dtype in cls.DTYPES.items()}
        )

    def __len__(self) -> int:
        return len(self.t)

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def take(self, rows: np.ndarray) -> LogTable:
        """Rows by index array or boolean mask, order kept."""
        return LogTable(**{name: column[rows] for name, column in self.columns().items()})

    def append(self, more: LogTable) -> LogTable:
        """`more` must be no older than the last row (live arrivals are)."""
        return LogTable(
            **{
                name: np.concatenate([column, getattr(more, name)])
                for name, column in self.columns().items()
            }
        )

    def start(self, epoch: int) -> int:
        """Index of the first row created at or after `epoch`."""
        return int(np.searchsorted(self.t, epoch, side="left"))


def sort_rows(columns: dict[str, np.ndarray]) -> LogTable:
    """Order freshly generated rows by time and number them (serial = position)."""
    order = np.argsort(columns["t"], kind="stable")
    ordered = {name: column[order] for name, column in columns.items()}
    ordered["serial"] = np.arange(len(order), dtype=np.int64)
    return LogTable.from_columns(ordered)


def log_ids(prefix: str, serials: np.ndarray) -> list[str]:
    mixed = (serials.astype(np.uint64) + _ID_OFFSET) & _ID_BITS
    for multiplier in _ID_MULTIPLIERS:
        mixed = ((mixed ^ (mixed >> _ID_SHIFT)) * multiplier) & _ID_BITS
    mixed ^= mixed >> _ID_SHIFT
    return [f"{prefix}{value:012x}" for value in mixed.tolist()]
