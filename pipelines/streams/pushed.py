"""The product's own streams, in the warehouse's `sync` schema: the push ledger
(`sync.pushed`: each row the data hub accepted) and the rows refused (`sync.rejected`), both
written by the push (`pipelines/push/ledger.py`).

The ledger gains a file per journal file at every push that sent something; the push merges
them at its end (`pipelines/push/ledger_merge.py`), so it holds few files whatever the number
of pushes. The rejected rows are a file per record type, replaced at each push: as many files
as record types (`OUTBOUND`, `pipelines/push/plan.py`), never more."""

import pyarrow as pa

from pipelines.errors import Damaged
from pipelines.lake import Lake
from pipelines.pull.damaged import damaged_files
from pipelines.stream import TIMESTAMP, Stream

PUSHED = Stream(
    "sync",
    "pushed",
    pa.schema(
        [
            ("record_type", pa.string()),
            ("key", pa.string()),
            ("timestamp", TIMESTAMP),  # the record's own, for latest-timestamp-wins
            ("content_hash", pa.string()),
            ("content", pa.string()),  # the body sent, JSON (profile diffs read it back)
            ("state", pa.string()),  # accepted; imports: submitted, then accepted or failed
            ("event_id", pa.string()),
            ("task_id", pa.int64()),
            ("updated_contact_size", pa.int64()),
            ("connection", pa.string()),
            ("pushed_at", TIMESTAMP),
        ]
    ),
    key=("record_type", "key", "pushed_at"),
    merged=True,
)

REJECTED = Stream(
    "sync",
    "rejected",
    pa.schema(
        [
            ("record_type", pa.string()),
            ("key", pa.string()),
            ("field", pa.string()),
            ("reason", pa.string()),
            ("source", pa.string()),  # validation, conflict, or service (refused when sent)
            ("row", pa.string()),  # the row as JSON
            ("first_seen", TIMESTAMP),
            ("last_seen", TIMESTAMP),
        ]
    ),
    key=("record_type", "key", "field", "reason", "row"),
)
STREAMS = [PUSHED, REJECTED]

#: What a push decided for each key without a request, so that the next one plans only what
#: changed (`pipelines/push/changes.py`): one file per record type, replaced by each push
#: that decides anything anew. Not a relation of the warehouse: the push's own bookkeeping.
PUSH_STATE = Stream(
    "sync",
    "push_state",
    pa.schema(
        [
            ("key", pa.string()),
            ("fingerprint", pa.uint64()),  # the hash of the key's rows in the view
            ("mark", pa.uint64()),  # the hash of its latest ledger entry; null: none
            ("outcome", pa.string()),  # unchanged, stale, waiting, rejected or refused
            ("rejected", pa.int64()),  # its rows counted rejected
            ("refusals", pa.int64()),  # the service's refusals of these rows in a row
            ("retry_at", TIMESTAMP),  # when a refused key is sent again
            ("context", pa.string()),  # the rules and definitions it was decided under
        ]
    ),
    key=("key",),
)


class LedgerDamaged(Damaged):
    """A file of the push ledger cannot be read: it alone says what the hub accepted."""


def refuse_if_damaged(lake: Lake) -> None:
    """Raise `LedgerDamaged` naming each file of `sync.pushed` that cannot be read. Unlike
    a pulled stream's, such a file is not set aside by itself: it is the only record of
    what was sent, and without it the next push would send its rows again (behavior
    events among them stored twice)."""
    damaged = damaged_files(lake, PUSHED)
    if damaged:
        files = "; ".join(f"{path} ({reason})" for path, reason in damaged.items())
        raise LedgerDamaged(
            f"the push ledger cannot be read, so nothing was sent: {files}. Restore the "
            "file(s) from a backup of the lake; or move them out of the lake and push "
            "again, which sends their rows again (a behavior event among them may then be "
            "stored twice)"
        )
