"""A failed run alerts once per change of the job's state (assets/alerts.py): the first
failure, not the next ones nor a retry's, and a success after it once; never a secret."""

# No `from __future__ import annotations`: Dagster reads the op's config annotation.
import os
import socket

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType
from dagster._core.storage.tags import WILL_RETRY_TAG

from assets.alerts import alert_on_run_failure, alert_on_run_success
from assets.definitions import STREAM_ASSETS
from assets.resources import build_resources
from pipelines.alerts import alert_settings
from pipelines.errors import SetupError
from pipelines.settings import load_settings
from tests.alerts.conftest import TOKEN


class Outcome(dg.Config):
    fail: bool = True


@dg.op
def land(config: Outcome) -> None:
    if config.fail:
        # An error that quotes a key: the message must not.
        key = os.environ["COMMENT_AUTOMATION_API_KEY"]
        raise ValueError(f"the service refused the key {key}\nsecond line, not sent")


@dg.job
def nightly() -> None:
    land()


def run(instance: dg.DagsterInstance, fail: bool, tags: dict | None = None) -> dg.DagsterRun:
    result = nightly.execute_in_process(
        instance=instance,
        raise_on_error=False,
        run_config={"ops": {"land": {"config": {"fail": fail}}}},
        tags=tags,
    )
    assert result.success is not fail
    return instance.get_run_by_id(result.run_id)


def evaluate(instance: dg.DagsterInstance, run_: dg.DagsterRun) -> None:
    """The sensor that watches the run's end, as the daemon calls it."""
    event_type = DagsterEventType.RUN_FAILURE if run_.is_failure else DagsterEventType.RUN_SUCCESS
    (entry,) = instance.all_logs(run_.run_id, of_type=event_type)
    context = dg.build_run_status_sensor_context(
        sensor_name="alert_on_run_failure" if run_.is_failure else "alert_on_run_success",
        dagster_event=entry.dagster_event,
        dagster_instance=instance,
        dagster_run=run_,
    )
    if run_.is_failure:
        alert_on_run_failure(context.for_run_failure())
    else:
        alert_on_run_success(context)


def test_a_failed_run_sends_one_message_with_the_job_run_step_and_error(alert_env, instance, said):
    failed = run(instance, fail=True)
    evaluate(instance, failed)
    (body,) = alert_env.bodies
    assert body["type"] == "failure"
    assert body["title"] == "warehouse-sync: job nightly failed"
    message = body["message"]
    assert f"Run {failed.run_id} (job nightly) failed." in message
    assert "Step land: ValueError: the service refused the key ***" in message
    assert "second line" not in message
    assert "Next: open the run in the Dagster UI" in message
    everything = said()
    assert "warehouse-sync: job nightly failed: sent to 1 destination(s)" in everything
    assert TOKEN not in message
    # The key was said by the step's own failure (Dagster's log), never by the alerts.
    alert_lines = [line for line in everything.splitlines() if "warehouse-sync" in line]
    assert alert_lines and all(TOKEN not in line for line in alert_lines)
    assert f"hooks/{TOKEN}" not in everything and f"token={TOKEN}" not in everything


def test_a_job_that_keeps_failing_is_told_once_and_its_recovery_once(alert_env, instance):
    for _ in range(3):
        evaluate(instance, run(instance, fail=True))
    assert [b["title"] for b in alert_env.bodies] == ["warehouse-sync: job nightly failed"]
    recovered = run(instance, fail=False)
    evaluate(instance, recovered)
    evaluate(instance, run(instance, fail=False))  # still passing: nothing more
    assert [b["title"] for b in alert_env.bodies] == [
        "warehouse-sync: job nightly failed",
        "warehouse-sync: job nightly succeeded again",
    ]
    assert recovered.run_id in alert_env.bodies[1]["message"]
    assert alert_env.bodies[1]["type"] == "success"
    evaluate(instance, run(instance, fail=True))  # failing again: told again
    assert len(alert_env.bodies) == 3


def test_a_success_with_no_failure_before_it_sends_nothing(alert_env, instance):
    evaluate(instance, run(instance, fail=False))
    evaluate(instance, run(instance, fail=False))
    assert alert_env.bodies == []


def test_a_failure_dagster_retries_waits_for_its_retry(alert_env, instance):
    retried = run(instance, fail=True, tags={WILL_RETRY_TAG: "true"})
    evaluate(instance, retried)
    assert alert_env.bodies == []
    evaluate(instance, run(instance, fail=True))  # the retry failed too: told, once
    assert len(alert_env.bodies) == 1


def test_without_alert_urls_nothing_is_sent_and_it_says_alerting_is_off(
    alert_env, instance, monkeypatch, said
):
    monkeypatch.delenv("ALERT_URLS")
    evaluate(instance, run(instance, fail=True))
    assert alert_env.bodies == []
    assert "alerting is off: ALERT_URLS is not set" in said()


FAILING: set[str] = set()


@dg.asset
def posts() -> None:
    if "posts" in FAILING:
        raise ValueError("posts could not land")


@dg.asset
def channels() -> None:
    return None


def test_runs_of_assets_picked_in_the_ui_keep_a_state_per_selection(alert_env, instance):
    """Dagster runs a selection of assets as one hidden job: a success of other assets is no
    recovery of these."""

    def materialize(asset: dg.AssetsDefinition) -> None:
        result = dg.materialize([asset], instance=instance, raise_on_error=False)
        evaluate(instance, instance.get_run_by_id(result.run_id))

    FAILING.add("posts")
    materialize(posts)
    materialize(channels)
    assert [b["title"] for b in alert_env.bodies] == [
        "warehouse-sync: the materialization of posts failed"
    ]
    assert "Step posts: ValueError: posts could not land" in alert_env.bodies[0]["message"]
    FAILING.clear()
    materialize(posts)
    assert alert_env.bodies[-1]["title"] == (
        "warehouse-sync: the materialization of posts succeeded again"
    )
    assert len(alert_env.bodies) == 2


def test_a_failed_landing_alerts_with_each_connections_reason_and_setting_and_links_the_run(
    alert_env, instance, monkeypatch, tmp_path
):
    """A real stream's step, its service out of reach: the message carries the product's
    words whole (which connection, why, the setting to fix) and the run's address in the UI."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    monkeypatch.setenv("COMMENT_AUTOMATION_URL", f"http://127.0.0.1:{closed}/comment/api/v1")
    monkeypatch.setenv("LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.setenv("WAREHOUSE_PATH", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("SYNC_CONFIG", str(tmp_path / "sync.toml"))
    (tmp_path / "sync.toml").write_text("[service.comment]\npace = false\n")
    monkeypatch.setenv("DAGSTER_UI_URL", "http://dagster.example.com:3000/")
    (accounts,) = [a for a in STREAM_ASSETS if a.key == dg.AssetKey(["comment", "accounts"])]

    result = dg.materialize(
        [accounts],
        instance=instance,
        resources=build_resources(load_settings()),
        raise_on_error=False,
    )

    assert not result.success
    evaluate(instance, instance.get_run_by_id(result.run_id))
    (body,) = alert_env.bodies
    message = body["message"]
    assert "Step comment__accounts: comment.accounts: 1 connection(s) failed" in message
    reasons = [line for line in message.splitlines() if line.startswith("  - ")]
    assert reasons and all("COMMENT_AUTOMATION_URL" in line for line in reasons), message
    assert f"Next: open http://dagster.example.com:3000/runs/{result.run_id} " in message
    assert TOKEN not in message


def test_a_dagster_ui_url_that_is_no_address_is_one_error_naming_it(monkeypatch):
    monkeypatch.setenv("DAGSTER_UI_URL", "dagster.example.com")
    with pytest.raises(SetupError, match="DAGSTER_UI_URL='dagster.example.com' is not an http"):
        alert_settings()
