"""Every relation the warehouse shows, and the one way to bring its views up to date."""

from collections.abc import Sequence
from pathlib import Path

from pipelines.lake import Lake
from pipelines.push import ledger
from pipelines.streams import comment, conversation, datahub
from pipelines.warehouse import Warehouse, WarehouseBusy
from pipelines.webhooks.compaction import WEBHOOK_EVENTS, WEBHOOK_QUARANTINE

#: The streams the pull lands, service by service.
PULLED = [*comment.STREAMS, *conversation.STREAMS, *datahub.STREAMS]
#: Every stream the product defines, so `sql/` may name it as a source: pulled streams, the
#: push ledger, the webhook events and the ones the lake could not represent. The SQL of
#: `WAREHOUSE_SQL` may also name streams written by others (pipelines/warehouse.py).
WAREHOUSE_STREAMS = [
    *PULLED,
    *ledger.STREAMS,
    WEBHOOK_EVENTS,
    WEBHOOK_QUARANTINE,
]


def refresh_warehouse(
    lake_root: str | Path, warehouse_path: str | Path, extra_sql: Sequence[str | Path]
) -> str:
    """Rewrite the views if a definition changed; says what happened. A warehouse held by
    another process is reported, not raised: the lake has the data either way. `extra_sql`:
    the `WAREHOUSE_SQL` folders (`Settings.warehouse_sql`, `LakeResource.warehouse_sql`),
    required so that no build leaves them out."""
    warehouse = Warehouse(warehouse_path, Lake(lake_root), WAREHOUSE_STREAMS, extra_sql=extra_sql)
    try:
        rewritten = warehouse.refresh()
    except WarehouseBusy as busy:
        return str(busy)
    return f"{warehouse_path} ({'views rewritten' if rewritten else 'views up to date'})"
