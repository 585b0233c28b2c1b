"""The AI agent's conversations in the lake: the asset that compacts the agent inbox into
`conversation.agent_requests` and `conversation.agent_messages`
(`pipelines/agent/compaction.py`), and the sensor that runs it when the inbox holds turns or
answers the lake lacks (docs/agent.md). `python -m cli sync` runs it too."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations.
import dagster as dg

from assets.factory import views_after
from assets.failures import tells_errors
from assets.inbox import compaction, landed
from assets.resources import LakeResource
from pipelines.agent.compaction import (
    AGENT_COMPACTION,
    AGENT_MESSAGES,
    AGENT_REQUESTS,
    compact_inbox,
)

DESCRIPTIONS = {
    AGENT_REQUESTS: (
        "Every turn the conversation service sent the AI agent (`python -m pipelines.agent`), "
        "once each, with the answer it was given: the reply function's, or the handover and "
        "why. By the UTC day it was first received; days holding turns or answers the lake "
        "lacks are rewritten whole from the agent inbox."
    ),
    AGENT_MESSAGES: (
        "The messages each turn carried, a row per message and turn (the view keeps one row "
        "per message): joinable with `conversation.messages` by `message_uuid`."
    ),
}


@dg.multi_asset(
    specs=[
        dg.AssetSpec(**landed(stream, DESCRIPTIONS[stream]))
        for stream in (AGENT_REQUESTS, AGENT_MESSAGES)
    ],
)
@tells_errors
def agent_conversations(context: dg.AssetExecutionContext, lake: LakeResource):
    done = compact_inbox(lake.lake_root, lake.lake(), context.log.info, context.log.warning)
    if not done.found:
        for stream in (AGENT_REQUESTS, AGENT_MESSAGES):
            yield dg.MaterializeResult(
                asset_key=[stream.service, stream.name],
                metadata={"rows": 0, "days": 0, "inbox": done.inbox},
            )
        return
    warehouse = views_after(context, done.written())
    days = [day.isoformat() for day in done.days]
    common = {"days": len(days), "days_rewritten": days, "inbox": done.inbox}
    counts = done.inbox_counts
    yield dg.MaterializeResult(
        asset_key=[AGENT_REQUESTS.service, AGENT_REQUESTS.name],
        metadata={
            "rows": done.requests,
            **common,
            "inbox_requests": counts["requests"],
            "inbox_answers": counts["answers"],
            "inbox_rejected": counts["rejected"],
            "warehouse": warehouse,
        },
    )
    yield dg.MaterializeResult(
        asset_key=[AGENT_MESSAGES.service, AGENT_MESSAGES.name],
        metadata={"rows": done.messages, **common},
    )


conversation_agent, conversation_agent_sensor = compaction(
    "conversation_agent", agent_conversations, AGENT_COMPACTION
)


ASSETS = [agent_conversations]
JOBS = [conversation_agent]
SENSORS = [conversation_agent_sensor]
