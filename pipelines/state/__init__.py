"""What runs and hosts share beside the lake: the keys' request budgets (`budget.py`), the
deployment's Postgres (`shared_store.py`, `SYNC_STORE`), SQLite files (`sqlite_file.py`) and
where a host keeps its own (`local_data.py`)."""
