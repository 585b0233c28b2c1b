"""Alerts from Dagster (docs/dagster.md, "Alerts"): sensors that look at runs, checks and
materializations and tell a team, through `pipelines/alerts.py` (the settings, the messages,
the sending), once when something fails and once when it recovers.

- `alert_on_run_failure` and `alert_on_run_success` (run status sensors): a job's state is
  its own run history (for a run of assets picked in the UI, Dagster's `__ASSET_JOB`, that
  of the runs of the same assets). A failed run is told unless the job's previous settled run failed
  too, so a job that keeps failing, or a retry that fails again, says nothing more; a
  success is told only after a failure. A failed run Dagster will retry
  (`dagster/will_retry`) is not settled: its retry's outcome is told. They watch every run
  of the instance, those `python -m cli` records under `DAGSTER_HOME` too.
- `alert_on_state_changes`: each asset check's newest evaluation (failing means failed with
  severity ERROR), each record type's newest push (failing means at least
  `ALERT_REJECTED_ROWS` rows left in `sync.rejected`, from the figures of its
  `datahub/records/<record type>` materialization, `assets/push.py`) and the newest webhook
  compaction (failing means events quarantined, from the `quarantined` figure of
  `datahub/webhook_events`, `assets/webhooks.py`). Which of those were failing is the
  sensor's cursor; only a change sends. The newest word per thing is read (one query for
  every check), not every event since the last look: a check that failed and passed again
  between two looks says nothing.

A message that reaches no destination is tried again at the next look by
`alert_on_state_changes` (its state is not moved); the run sensors' cursor is Dagster's, so
theirs is logged as not delivered and not tried again.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations.
import dagster as dg

from assets.push import SERVICE_RECORDS
from assets.tags import WILL_RETRY_TAG
from assets.webhooks import webhook_events
from pipelines import alerts
from pipelines.errors import SetupError

#: How many of a job's newest finished runs are read to find the one before a run.
LOOK_BACK = 50
#: How many records of a check's history are read at once to find its newest evaluation
#: behind those still planned (a run over a year of days plans a year of them).
HISTORY_PAGE = 100
SETTLED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE]
#: Dagster's wrapper around a step's own error: the message is its cause's.
WRAPPERS = {"DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError"}


def settings_or_none(log) -> alerts.AlertSettings | None:
    """The settings, or None (after one error line naming the setting) where they are wrong."""
    try:
        return alerts.alert_settings()
    except SetupError as problem:
        log.error(str(problem))
        return None


def _will_retry(run: dg.DagsterRun) -> bool:
    return run.tags.get(WILL_RETRY_TAG) == "true"


def assets_of(instance: dg.DagsterInstance, run: dg.DagsterRun) -> frozenset[dg.AssetKey]:
    """The assets a run was to materialize: its selection, else those it planned."""
    if run.asset_selection:
        return frozenset(run.asset_selection)
    planned = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    ).records
    return frozenset(
        record.event_log_entry.dagster_event.asset_key
        for record in planned
        if record.event_log_entry.dagster_event is not None
    )


def _hidden(run: dg.DagsterRun) -> bool:
    """A run of Dagster's own job (`__ASSET_JOB`): assets picked in the UI, or a script's."""
    return run.job_name.startswith("__")


def what_ran(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The job, or for Dagster's own jobs the assets the run was to materialize."""
    keys = sorted(key.to_user_string() for key in assets_of(instance, run)) if _hidden(run) else []
    if not keys:
        return f"job {run.job_name}"
    shown = ", ".join(keys[: alerts.LISTED])
    more = f" and {len(keys) - alerts.LISTED} more" if len(keys) > alerts.LISTED else ""
    return f"the materialization of {shown}{more}"


def settled_before(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRunStatus | None:
    """How the last settled run of the same work before `run` ended (SUCCESS or FAILURE; a
    failure that Dagster retries is not settled), None where there is none: its state."""
    this = instance.get_run_record_by_id(run.run_id)
    ended = this.end_time if this is not None else None
    records = instance.get_run_records(
        filters=dg.RunsFilter(job_name=run.job_name, statuses=SETTLED),
        limit=LOOK_BACK,
        order_by="end_time",
        ascending=False,
    )
    mine = assets_of(instance, run) if _hidden(run) else None
    for record in records:
        other = record.dagster_run
        if other.run_id == run.run_id or _will_retry(other):
            continue
        if ended is not None and record.end_time is not None and record.end_time > ended:
            continue  # ended after this one: the next state, not the one before
        if mine is not None and assets_of(instance, other) != mine:
            continue  # other assets picked: another state
        return other.status
    return None


def step_error(event: dg.DagsterEvent) -> str:
    """A failed step's message: the product's own whole (`assets/failures.py` fails with it as
    the description), else the first line of its error's, under Dagster's wrapper."""
    data = event.step_failure_data
    if data.user_failure_data is not None and data.user_failure_data.description:
        return data.user_failure_data.description
    error = data.error
    while error is not None and error.cls_name in WRAPPERS and error.cause is not None:
        error = error.cause
    # A library's words: their first line (what follows is often a trace or a dump).
    return error.message.strip().split("\n")[0] if error is not None and error.message else ""


def deliver(log, alert: alerts.Alert, settings: alerts.AlertSettings) -> alerts.Delivery:
    delivery = alerts.send(alert, settings)
    said = f"{alert.title}: {delivery.said()}"
    if delivery.failed:
        log.warning(said)
    else:
        log.info(said)
    return delivery


@dg.run_failure_sensor(
    name="alert_on_run_failure",
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Tells ALERT_URLS when a job's run fails after one that did not: the job, the run, "
        "the failed steps and their errors' first lines (docs/dagster.md, Alerts)."
    ),
)
def alert_on_run_failure(context: dg.RunFailureSensorContext) -> None:
    settings = settings_or_none(context.log)
    run = context.dagster_run
    if settings is None:
        return
    if not settings.on:
        context.log.info(alerts.OFF)
        return
    what = what_ran(context.instance, run)
    if _will_retry(run):
        context.log.info(f"{what}: run {run.run_id} is retried; its retry is told")
        return
    if settled_before(context.instance, run) == dg.DagsterRunStatus.FAILURE:
        context.log.info(f"{what}: already failing and told; nothing sent")
        return
    steps = [
        (event.step_key or "", step_error(event)) for event in context.get_step_failure_events()
    ]
    reason = context.failure_event.message or ""
    alert = alerts.run_failed(what, run.run_id, steps, reason, settings.run_link(run.run_id))
    deliver(context.log, alert, settings)


@dg.run_status_sensor(
    name="alert_on_run_success",
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitor_all_code_locations=True,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Tells ALERT_URLS when a job whose last run failed succeeds again.",
)
def alert_on_run_success(context: dg.RunStatusSensorContext) -> None:
    settings = settings_or_none(context.log)
    if settings is None or not settings.on:
        return
    run = context.dagster_run
    if settled_before(context.instance, run) == dg.DagsterRunStatus.FAILURE:
        deliver(
            context.log, alerts.run_recovered(what_ran(context.instance, run), run.run_id), settings
        )


# -- checks, pushes, the webhook quarantine ------------------------------------------------


def _evaluated(record) -> bool:
    """Whether a record of a check's history is an evaluation, not one planned."""
    event = record.event
    evaluation = dg.DagsterEventType.ASSET_CHECK_EVALUATION
    return event is not None and event.dagster_event_type == evaluation


def _newest_evaluated(storage, key: dg.AssetCheckKey, newest):
    """The newest evaluation of a check: `newest` (its newest record), unless that is still
    planned (being evaluated now, or each day of a run over days), then the newest before
    it that was evaluated. None if it never was."""
    if _evaluated(newest):
        return newest
    cursor = None
    while True:
        page = storage.get_asset_check_execution_history(key, limit=HISTORY_PAGE, cursor=cursor)
        found = next((record for record in page if _evaluated(record)), None)
        if found is not None or len(page) < HISTORY_PAGE:
            return found
        cursor = page[-1].id


def check_states(instance: dg.DagsterInstance, keys: list[dg.AssetCheckKey]) -> list[alerts.Seen]:
    """Each check's newest evaluation: failing where it failed with severity ERROR."""
    storage = instance.event_log_storage
    newest = storage.get_latest_asset_check_execution_by_key(keys) if keys else {}
    seen = []
    for key, latest in newest.items():
        record = _newest_evaluated(storage, key, latest)
        if record is None or record.event.dagster_event is None:
            continue
        evaluation = record.event.dagster_event.event_specific_data
        if not isinstance(evaluation, dg.AssetCheckEvaluation):
            continue
        failing = not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
        asset, check = key.asset_key.to_user_string(), key.name
        alert = (
            alerts.check_failed(asset, check, record.run_id, evaluation.description or "")
            if failing
            else alerts.check_recovered(asset, check, record.run_id, evaluation.passed)
        )
        seen.append(alerts.Seen(f"check {asset}:{check}", failing, alert))
    return seen


def _newest_metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[str, dict] | None:
    """The run and the metadata values of the asset's newest materialization."""
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    metadata = event.asset_materialization.metadata
    return event.run_id, {name: value.value for name, value in metadata.items()}


def push_states(
    instance: dg.DagsterInstance, records: dict[str, dg.AssetKey], threshold: int
) -> list[alerts.Seen]:
    """Each record type's newest push: failing where it left `threshold` rows or more."""
    seen = []
    for record_type, key in records.items():
        newest = _newest_metadata(instance, key)
        if newest is None:
            continue
        run_id, figures = newest
        rows = alerts.not_sent(figures)
        failing = rows >= threshold
        alert = (
            alerts.rows_rejected(record_type, figures, threshold, run_id)
            if failing
            else alerts.rows_rejected_cleared(record_type, rows, threshold, run_id)
        )
        seen.append(alerts.Seen(f"push {record_type}", failing, alert))
    return seen


def quarantine_states(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[alerts.Seen]:
    """The newest compaction: failing where it quarantined events."""
    newest = _newest_metadata(instance, key)
    if newest is None or newest[1].get("quarantined") is None:
        return []  # no compaction yet, or one that found no inbox
    run_id, figures = newest
    events = int(figures["quarantined"])
    days = [str(day) for day in figures.get("days_rewritten") or []]
    alert = (
        alerts.quarantined(events, days, run_id) if events else alerts.quarantine_cleared(run_id)
    )
    return [alerts.Seen("webhook quarantine", events > 0, alert)]


#: What `alert_on_state_changes` reads the pushes' and the compaction's figures from.
PUSHED = {record_type: spec.key for record_type, spec in SERVICE_RECORDS.items()}
QUARANTINE = webhook_events.key


def evaluate_states(
    context: dg.SensorEvaluationContext,
    pushed: dict[str, dg.AssetKey],
    quarantine: dg.AssetKey,
) -> dg.SkipReason:
    """One look: what changed since the cursor is sent, and the cursor moved for what
    reached a destination."""
    settings = settings_or_none(context.log)
    if settings is None:
        return dg.SkipReason(f"{alerts.URLS_VARIABLE} cannot be used: see the log")
    if not settings.on:
        return dg.SkipReason(alerts.OFF)
    repository = context.repository_def
    checks = list(repository.asset_graph.asset_check_keys) if repository is not None else []
    seen = [
        *check_states(context.instance, checks),
        *push_states(context.instance, pushed, settings.rejected_rows),
        *quarantine_states(context.instance, quarantine),
    ]
    failing = alerts.failing_of(context.cursor)
    sent = []
    for change in alerts.changes(failing, seen):
        delivery = deliver(context.log, change.alert, settings)
        if delivery.delivered:
            failing ^= {change.key}
            sent.append(change.alert.title)
    # A thing no longer watched (a check removed) is forgotten.
    failing &= {s.key for s in seen}
    context.update_cursor(alerts.cursor_of(failing))
    if not sent:
        return dg.SkipReason(f"no change; {len(failing)} of {len(seen)} watched failing")
    return dg.SkipReason(f"sent: {'; '.join(sent)}")


@dg.sensor(
    name="alert_on_state_changes",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Tells ALERT_URLS when an asset check goes into ERROR, a push leaves rows in "
        "sync.rejected (ALERT_REJECTED_ROWS) or a compaction quarantines webhook events, "
        "and when each recovers: once per change (docs/dagster.md, Alerts)."
    ),
)
def alert_on_state_changes(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    return evaluate_states(context, PUSHED, QUARANTINE)


SENSORS = [alert_on_run_failure, alert_on_run_success, alert_on_state_changes]
