"""`alert_on_state_changes` (assets/alerts.py): an asset check in ERROR, a push that leaves
rows in `sync.rejected`, a compaction that quarantines webhook events; one message when each
starts failing and one when it recovers, however often the sensor looks. A tiny asset and
check of the test's own stand in for the product's; a push's and a compaction's figures are
the materializations they record (`assets/push.py`, `assets/webhooks.py`), reported to the
instance as they would be."""

import os

import dagster as dg
import pytest

from assets import alerts
from assets.alerts import alert_on_state_changes
from tests.alerts.conftest import TOKEN

#: What the next materialization reports; each test sets it.
NEXT: dict = {}


@pytest.fixture(autouse=True)
def passing() -> None:
    NEXT.clear()
    NEXT.update(passed=True, severity=dg.AssetCheckSeverity.ERROR, landed=True)


@dg.asset(key=["comment", "posts"])
def posts() -> None:
    if not NEXT["landed"]:
        raise dg.Failure("the landing failed")
    return None


@dg.asset_check(asset=posts)
def ids_unique() -> dg.AssetCheckResult:
    key = os.environ["COMMENT_AUTOMATION_API_KEY"]
    return dg.AssetCheckResult(
        passed=NEXT["passed"],
        severity=NEXT["severity"],
        description=f"3 ids twice (asked with {key})\nsecond line",
    )


ORDERS = dg.AssetKey(["datahub", "records", "order"])
WEBHOOK_EVENTS = dg.AssetKey(["datahub", "webhook_events"])


DEFINITIONS = dg.Definitions(
    assets=[posts, dg.AssetSpec(ORDERS), dg.AssetSpec(WEBHOOK_EVENTS)],
    asset_checks=[ids_unique],
    sensors=[alert_on_state_changes],
)


class Looks:
    """The sensor evaluated as the daemon does: each time with the cursor it left."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.cursor: str | None = None

    def __call__(self) -> dg.SkipReason:
        context = dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, definitions=DEFINITIONS
        )
        result = alert_on_state_changes(context)
        self.cursor = context.cursor
        return result


def materialize(instance: dg.DagsterInstance) -> None:
    """A run of the asset and its check."""
    assert dg.materialize([posts, ids_unique], instance=instance).success


def evaluated(instance: dg.DagsterInstance, passed: bool, severity=dg.AssetCheckSeverity.ERROR):
    """An evaluation of the check, recorded as a run would (faster than a run)."""
    evaluation = dg.AssetCheckEvaluation(
        asset_key=posts.key, check_name="ids_unique", passed=passed, severity=severity
    )
    instance.report_runless_asset_event(evaluation)


def pushed(instance: dg.DagsterInstance, **figures: int) -> None:
    """A push's materialization of `datahub/records/order`, with its figures."""
    instance.report_runless_asset_event(dg.AssetMaterialization(ORDERS, metadata=figures))


def compacted(instance: dg.DagsterInstance, quarantined: int) -> None:
    """A compaction's materialization of `datahub/webhook_events`, with its figures."""
    metadata = {"rows": 10, "quarantined": quarantined, "days_rewritten": ["2026-11-01"]}
    instance.report_runless_asset_event(dg.AssetMaterialization(WEBHOOK_EVENTS, metadata=metadata))


def test_a_check_in_error_sends_one_message_however_often_the_sensor_looks(
    alert_env, instance, said
):
    look = Looks(instance)
    materialize(instance)
    look()
    assert alert_env.bodies == []  # passing: nothing to say
    NEXT["passed"] = False
    materialize(instance)
    look()
    look()
    (body,) = alert_env.bodies
    assert body["type"] == "failure"
    assert body["title"] == "warehouse-sync: check ids_unique of comment/posts failed"
    assert "comment/posts:ids_unique failed with severity ERROR" in body["message"]
    message = body["message"]
    assert "3 ids twice (asked with ***)" in message and "second line" not in message
    materialize(instance)  # fails again: still failing, nothing new
    look()
    assert len(alert_env.bodies) == 1
    everything = said()
    assert "check ids_unique of comment/posts failed: sent to 1 destination(s)" in everything
    assert TOKEN not in message + body["title"]
    alert_lines = [line for line in everything.splitlines() if "warehouse-sync" in line]
    assert alert_lines and all(TOKEN not in line for line in alert_lines)
    assert f"hooks/{TOKEN}" not in everything and f"token={TOKEN}" not in everything


def test_a_check_that_passes_again_sends_one_recovery(alert_env, instance):
    look = Looks(instance)
    evaluated(instance, passed=False)
    look()
    evaluated(instance, passed=True)
    look()
    look()
    assert [b["type"] for b in alert_env.bodies] == ["failure", "success"]
    title = alert_env.bodies[1]["title"]
    assert title == "warehouse-sync: check ids_unique of comment/posts passes"
    assert "passes again" in alert_env.bodies[1]["message"]


def test_runs_that_fail_before_the_check_leave_its_newest_evaluation_the_state(
    alert_env, instance, monkeypatch
):
    """Each failed run leaves the check planned, its newest record (the UI's "Execution
    failed"); the state is the newest evaluation behind them, read a page at a time."""
    monkeypatch.setattr(alerts, "HISTORY_PAGE", 1)
    look = Looks(instance)
    evaluated(instance, passed=False)
    look()
    NEXT["landed"] = False
    for _ in range(2):
        run = dg.materialize([posts, ids_unique], instance=instance, raise_on_error=False)
        assert not run.success
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(posts.key, "ids_unique"), limit=3
    )
    assert [r.status.value for r in history] == ["PLANNED", "PLANNED", "FAILED"]
    look()
    assert [b["type"] for b in alert_env.bodies] == ["failure"]  # still failing: nothing new
    evaluated(instance, passed=True)
    look()
    assert [b["type"] for b in alert_env.bodies] == ["failure", "success"]


def test_a_check_that_only_warns_sends_nothing(alert_env, instance):
    evaluated(instance, passed=False, severity=dg.AssetCheckSeverity.WARN)
    Looks(instance)()
    assert alert_env.bodies == []


def test_a_push_leaving_rejected_rows_sends_one_message_and_one_when_it_leaves_fewer(
    alert_env, instance
):
    look = Looks(instance)
    pushed(instance, new=5, rejected=2, refused=1, waiting=0, in_doubt=0)
    look()
    pushed(instance, new=0, rejected=2, refused=1, waiting=0, in_doubt=0)  # left again
    look()
    (body,) = alert_env.bodies
    assert body["title"] == "warehouse-sync: push left 3 order row(s) in sync.rejected"
    assert "2 rejected, 1 refused" in body["message"]
    assert "WHERE record_type = 'order'" in body["message"]
    pushed(instance, new=0, rejected=0, refused=0)
    look()
    look()
    assert [b["type"] for b in alert_env.bodies] == ["failure", "success"]


def test_a_push_under_the_threshold_sends_nothing(alert_env, instance, monkeypatch):
    monkeypatch.setenv("ALERT_REJECTED_ROWS", "4")
    pushed(instance, rejected=2, refused=1)
    look = Looks(instance)
    look()
    assert alert_env.bodies == []
    pushed(instance, rejected=3, refused=1)
    look()
    assert len(alert_env.bodies) == 1 and "at 4 or more" in alert_env.bodies[0]["message"]


def test_a_compaction_that_quarantines_sends_one_message_and_one_when_it_stops(alert_env, instance):
    look = Looks(instance)
    compacted(instance, quarantined=0)
    look()
    compacted(instance, quarantined=3)
    look()
    look()
    (body,) = alert_env.bodies
    assert body["title"] == "warehouse-sync: 3 webhook event(s) quarantined"
    assert "2026-11-01" in body["message"] and "datahub.webhook_quarantine" in body["message"]
    compacted(instance, quarantined=0)
    look()
    assert [b["type"] for b in alert_env.bodies] == ["failure", "success"]


def test_a_message_no_destination_took_is_sent_at_the_next_look(alert_env, instance, said):
    evaluated(instance, passed=False)
    look = Looks(instance)
    alert_env.status = 500
    look()
    assert len(alert_env.bodies) == 1  # it reached the receiver, which refused it
    everything = said()
    assert "not delivered to destination 1 of 1 (json)" in everything
    assert f"hooks/{TOKEN}" not in everything and f"token={TOKEN}" not in everything
    alert_env.status = 200
    look()
    look()
    assert len(alert_env.bodies) == 2  # once more, then taken: no third


def test_without_alert_urls_nothing_is_sent_and_it_says_alerting_is_off(
    alert_env, instance, monkeypatch
):
    monkeypatch.delenv("ALERT_URLS")
    evaluated(instance, passed=False)
    skipped = Looks(instance)()
    assert alert_env.bodies == []
    assert skipped.skip_message == "alerting is off: ALERT_URLS is not set"


def test_a_malformed_alert_urls_is_one_error_line_naming_it_without_the_url(
    alert_env, instance, monkeypatch, said
):
    wrong = f"hooks.example.com/{TOKEN}"  # no scheme: a webhook's address pasted as it is
    monkeypatch.setenv("ALERT_URLS", f"{alert_env.url} {wrong}")
    evaluated(instance, passed=False)
    said.forget()
    skipped = Looks(instance)()
    everything = said()
    errors = [line for line in everything.splitlines() if "ALERT_URLS" in line]
    assert len(errors) == 1, errors
    assert "ALERT_URLS: entry 2 of 2 is not a URL (it has no scheme://)" in errors[0]
    assert TOKEN not in everything and "hooks.example.com" not in everything
    assert "ALERT_URLS cannot be used" in skipped.skip_message
    assert alert_env.bodies == []
