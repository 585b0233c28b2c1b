"""The conversation service's AI agent callback, hosted for the brand: the receiver
(`receiver.py`, served by `python -m pipelines.agent`), the request it reads (`request.py`),
the answer (`reply.py`), the durable inbox every call is kept in (`inbox.py`, or
`postgres_inbox.py` where `SYNC_STORE` is set; `turns.py`: the rows both keep) and its
compaction into the lake (`compaction.py`), on what it shares with the webhooks
(`pipelines/inbox/`). docs/agent.md says how to run it."""
