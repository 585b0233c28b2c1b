"""The data hub's webhooks: the receiver (`receiver.py`, served by `python -m pipelines.webhooks`),
its durable inbox (`inbox.py`, or `postgres_inbox.py` where `SYNC_STORE` is set; `events.py`: the
rows both keep), the envelope rules (`envelope.py`) and the compaction of the
inbox into the lake (`compaction.py`, run by the Dagster asset in `assets/webhooks.py`): each
event into `datahub/webhook_events`, or, if the lake cannot represent it, into
`datahub/webhook_quarantine` with the reason and its raw body. What it shares with the agent
(storage, compaction and receiver plumbing) is `pipelines/inbox/`."""
