"""A service's connections land at once (`each_connection`, pipelines/clients/failures.py):
the two regions' message backups and member exports are started, waited for and downloaded
side by side, not one region after the other, and each lands what its region holds."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import httpx

from cli.main import run_sync
from pipelines.pull.landing import today
from pipelines.settings import load_settings

#: Regions as the sandbox serves them (tests/pipelines/conftest.py, `environment`).
REGIONS = {"default": "", "jp": "-jp"}


def _region_spans(url: str, service: str) -> dict[str, tuple[float, float]]:
    """Per region, the first and last moment the sandbox saw a request to it."""
    paths = httpx.get(f"{url}/_sandbox/requests", timeout=30).json()["paths"]
    spans = {}
    for region, suffix in REGIONS.items():
        prefix = f"/{service}{suffix}/"
        seen = [p for p in paths if p["path"].startswith(prefix)]
        spans[region] = (min(p["first"] for p in seen), max(p["last"] for p in seen))
    return spans


def test_regions_land_side_by_side(start_sandbox, sync_env, tmp_path):
    # Each task phase of a backup or an export takes half a second at the sandbox, so a
    # region's job spans seconds: one after the other, the spans could not overlap.
    sandbox = start_sandbox(task_phase_seconds=0.5)
    sync_env(sandbox)
    yesterday = today() - timedelta(days=1)

    report = run_sync(["conversation.messages", "datahub.members"], yesterday, today())

    assert report.ok, report.failed
    for service in ("conversation", "datahub"):
        spans = _region_spans(sandbox.url, service)
        started_last = max(first for first, _ in spans.values())
        ended_first = min(last for _, last in spans.values())
        assert started_last < ended_first, f"{service}: regions one after the other: {spans}"
    # What each region landed is its own: the messages of each region equal its truth.
    with duckdb.connect(str(load_settings().warehouse_path), read_only=True) as con:
        landed = dict(
            con.execute(
                "SELECT connection, count(*) FROM conversation.messages "
                "WHERE date BETWEEN ? AND ? GROUP BY 1",
                [yesterday, today()],
            ).fetchall()
        )
    for region in REGIONS:
        days = httpx.get(
            f"{sandbox.url}/_sandbox/truth/conversation/{region}/messages/days", timeout=30
        ).json()["days"]
        expected = sum(n for day, n in days.items() if day >= yesterday.isoformat())
        assert expected > 0 and landed.get(region) == expected, (region, landed, expected)


def test_connections_at_once_is_a_setting(start_sandbox, sync_env):
    """`connections_at_once = 1` lands the regions in turn (0 is refused naming the setting:
    tests/pipelines/test_misconfiguration.py)."""
    sandbox = start_sandbox(task_phase_seconds=0.5)
    sync_env(sandbox, sync_toml="[service.datahub]\nconnections_at_once = 1\n")

    report = run_sync(["datahub.members"])

    assert report.ok, report.failed
    spans = _region_spans(sandbox.url, "datahub")
    assert spans["default"][1] < spans["jp"][0] or spans["jp"][1] < spans["default"][0], spans
