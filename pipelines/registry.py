"""Every stream the product declares, in one list per use: what the pull lands (`PULLED`,
service by service), what the warehouse may name as a source (`WAREHOUSE_STREAMS`) and what
the product writes in the lake (`LAKE_STREAMS`). A stream is declared beside its service's
code (`pipelines/streams/`, the receivers' compaction, the push's ledger); it is listed here
once, and the warehouse, the command line, Dagster's code location, the checks and the tests
read these lists."""

from pipelines.activities.state import CHANGES as ACTIVITY_CHANGES
from pipelines.agent.compaction import STREAMS as AGENT_STREAMS
from pipelines.lake.run_history import RUNS
from pipelines.streams import comment, conversation, datahub, pushed
from pipelines.webhooks.compaction import WEBHOOK_EVENTS, WEBHOOK_QUARANTINE

#: The streams the pull lands, service by service.
PULLED = [*comment.STREAMS, *conversation.STREAMS, *datahub.STREAMS]
#: Every stream the product defines, so `sql/` may name it as a source: pulled streams, the
#: push ledger, the runs' history, the webhook events and the ones the lake could not
#: represent, the AI agent's turns and the activities' apply log. The SQL of
#: `WAREHOUSE_SQL` may also name streams written by others (pipelines/warehouse/__init__.py).
WAREHOUSE_STREAMS = [
    *PULLED,
    *pushed.STREAMS,
    RUNS,
    WEBHOOK_EVENTS,
    WEBHOOK_QUARANTINE,
    *AGENT_STREAMS,
    ACTIVITY_CHANGES,
]
#: Every stream whose files the product writes in the lake: the warehouse's, and the push's
#: own bookkeeping.
LAKE_STREAMS = [*WAREHOUSE_STREAMS, pushed.PUSH_STATE]
