"""What the two receivers' inboxes share (the data hub's webhooks, `pipelines/webhooks/`, and
the AI agent's turns, `pipelines/agent/`): where an inbox lives and its storage on SQLite or
Postgres (`storage.py`), the plumbing of their compaction into the lake (`compaction.py`),
and of the receiver (`receiver.py`: its settings, server start, log hygiene and shutdown).
Each receiver keeps what differs: its tables and rows, its request handling and its
compaction of rows."""
