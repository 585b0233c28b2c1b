"""The push ledger kept to few files: each push ends by merging the ledger's files
(`pipelines/lake/merge.py`, under its lease), so the ledger holds a file for each
`FILE_BYTES` of rows and the few written since the last push, not one per journal file of
every push. What the merge guarantees (nothing lost or doubled however it is stopped, each
row read once meanwhile) is that module's; this one adds what only the journal knows: which
ledger files a compaction may still write again with other rows (`moving`), which wait."""

from pipelines.lake import Lake
from pipelines.lake.merge import GRACE_SECONDS, Merged, merge_folder
from pipelines.push.journal import Journal
from pipelines.push.shared_journal import PostgresJournal
from pipelines.streams.pushed import PUSHED


def merge_ledger(
    lake: Lake, journal: Journal | PostgresJournal, grace: float = GRACE_SECONDS
) -> Merged:
    """Merge the ledger's small files into one, and delete what earlier merges replaced."""
    return merge_folder(lake, PUSHED, moving=journal.moving, grace=grace)
