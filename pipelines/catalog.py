"""Every relation the warehouse shows, and the one way to bring its views up to date."""

from pathlib import Path

from pipelines.lake import Lake
from pipelines.push import ledger, shop
from pipelines.streams import comment, conversation, datahub
from pipelines.warehouse import Warehouse, WarehouseBusy
from pipelines.webhooks.compaction import WEBHOOK_EVENTS, WEBHOOK_QUARANTINE

#: The streams the pull lands, service by service.
PULLED = [*comment.STREAMS, *conversation.STREAMS, *datahub.STREAMS]
#: Everything `sql/` may name as a source: pulled streams, the demo shop, the push ledger,
#: the webhook events and the ones the lake could not represent.
WAREHOUSE_STREAMS = [
    *PULLED,
    *shop.SHOP_STREAMS,
    *ledger.STREAMS,
    WEBHOOK_EVENTS,
    WEBHOOK_QUARANTINE,
]


def refresh_warehouse(lake_root: str | Path, warehouse_path: str | Path) -> str:
    """Rewrite the views if a definition changed; says what happened. A warehouse held by
    another process is reported, not raised: the lake has the data either way."""
    try:
        rewritten = Warehouse(warehouse_path, Lake(lake_root), WAREHOUSE_STREAMS).refresh()
    except WarehouseBusy as busy:
        return str(busy)
    return f"{warehouse_path} ({'views rewritten' if rewritten else 'views up to date'})"
