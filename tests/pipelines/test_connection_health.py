"""Whether a connection is failing is decided by one view, `sync.connection_health`, which
the Dagster asset's table reads too (pipelines/warehouse/health.py)."""

from datetime import UTC, datetime, timedelta

from pipelines.warehouse.health import connection_health

START = datetime(2026, 10, 1, tzinfo=UTC)


def run(minute: int, connection: str, outcome: str) -> dict:
    error = "access denied" if outcome == "failed" else None
    part = {"connection": connection, "outcome": outcome, "rows": 1, "error": error}
    return {
        "relation": "test.things",
        "ended_at": START + timedelta(minutes=minute),
        "connections": [part],
    }


def test_a_connection_is_failing_until_it_lands_after_its_last_failure():
    runs = [
        run(0, "landed then failed", "landed"),
        run(1, "landed then failed", "failed"),
        run(0, "failed then landed", "failed"),
        run(1, "failed then landed", "landed"),
        run(0, "never landed", "failed"),
        run(0, "never failed", "landed"),
    ]
    found = {row["connection"]: row for row in connection_health(runs)}
    assert {name: row["failing"] for name, row in found.items()} == {
        "failed then landed": False,
        "landed then failed": True,
        "never failed": False,
        "never landed": True,
    }
    assert found["landed then failed"]["last_failed_at"] == START + timedelta(minutes=1)
    assert found["landed then failed"]["last_error"] == "access denied"
