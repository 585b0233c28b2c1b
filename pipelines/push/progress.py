"""What a push is doing while it runs, per record type, for a live display to read
(`cli/live.py`) and for the line the push logs as each record type ends: its phase, the
keys DuckDB handed to planning (`pipelines/push/changes.py`) and how many are planned, the
rows rejected and to send so far, the service's answers (accepted, refused) and the requests
sent since the record type began.

The push (`pipelines/push/run.py`) makes one for each record type it was asked for, in its
order, on the board of the display watching, if one does (`pipelines/progress.py`). Its
figures are progress, not the outcome: the push's figures (new, changed, ...) are its
report's, printed once, as the command line's table."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pipelines.progress import duration, shown
from pipelines.push.plan import Plan
from pipelines.push.send import Sent
from pipelines.transport import CallStats

#: Its phases, in the order they come (planning and sending alternate, a batch of keys at a
#: time; a bulk member import is `importing`).
WAITING, PLANNING, SENDING, IMPORTING, DONE = "waiting", "planning", "sending", "importing", "done"
#: Where it ended otherwise: it failed, or it has no outbound view and nothing to plan.
FAILED, NO_VIEW = "failed", "no view"


@dataclass
class RecordTypeProgress:
    """One record type of one push, as it goes."""

    record_type: str
    #: The push's calls, of which this record type's are those since it began (a push sends
    #: one record type at a time, on clients it shares).
    run_stats: CallStats = field(default_factory=CallStats, repr=False)
    phase: str = WAITING
    #: Keys DuckDB handed to planning (changed since the last push); None while it is not
    #: known, or where the view is planned whole (`Changes.differs`).
    handed: int | None = None
    planned: int = 0
    rejected: int = 0
    to_send: int = 0
    #: What each batch's sending has had answered so far (`send.py`, `imports.py` fill it).
    sends: list[Sent] = field(default_factory=list)
    started: float | None = None
    ended: float | None = None
    _requests_before: int = 0
    _requests_after: int | None = None

    def begin(self) -> None:
        self.phase, self.started = PLANNING, time.monotonic()
        self._requests_before = self.run_stats.requests

    def handed_keys(self, keys: int | None) -> None:
        """The keys to plan (None: the whole view, its count unknown); counted anew."""
        self.handed, self.planned, self.rejected = keys, 0, 0

    def plan_made(self, plan: Plan) -> None:
        self.planned += len(plan.decided.keys() | plan.rejected_rows.keys())
        self.rejected += plan.counts["rejected"]
        self.to_send += len(plan.to_send)
        self.phase = PLANNING

    def sending(self, importing: bool) -> Sent:
        """The counts a batch's sending adds its answers to as they come."""
        self.phase = IMPORTING if importing else SENDING
        sent = Sent()
        self.sends.append(sent)
        return sent

    @property
    def accepted(self) -> int:
        return sum(sent.accepted for sent in self.sends)

    @property
    def refused(self) -> int:
        return sum(sent.refused for sent in self.sends)

    @property
    def requests(self) -> int:
        if self.started is None:
            return 0
        now = self.run_stats.requests if self._requests_after is None else self._requests_after
        return now - self._requests_before

    def end(self, phase: str = DONE) -> None:
        if self.started is None:  # ended before it began: no view
            self.begin()
        self._requests_after = self.run_stats.requests
        self.phase, self.ended = phase, time.monotonic()

    def line(self, dry_run: bool) -> str:
        """What the push logs as the record type ends: not its figures (the table's), how
        far it went and how long it took."""
        taken = duration((self.ended or time.monotonic()) - (self.started or time.monotonic()))
        if self.handed == 0:
            return f"push {self.record_type}: no key changed since the last push; done in {taken}"
        keys = f"{self.planned:,} key(s) planned"
        if dry_run:
            return f"push {self.record_type} (dry run): {keys}; done in {taken}"
        answered = self.accepted + self.refused
        return (
            f"push {self.record_type}: {keys}, {answered:,} row(s) sent in "
            f"{self.requests:,} request(s); done in {taken}"
        )


def record_types_begun(
    record_types: list[str], run_stats: CallStats
) -> dict[str, RecordTypeProgress]:
    """The progress of each record type a push was asked for, waiting, on the board of the
    display watching, if one does."""
    return {t: shown(RecordTypeProgress(t, run_stats)) for t in record_types}
