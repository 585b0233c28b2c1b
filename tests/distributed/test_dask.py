"""The code location on an existing Dask cluster (`DAGSTER_EXECUTOR=dask`,
`assets/definitions.py`): every pulled stream's steps run on two workers that share no local
folder, only the servers of a deployment (tests/distributed/conftest.py); the lake they land
in the bucket equals the sandbox's truth."""

from __future__ import annotations

import json
from datetime import timedelta

import dagster as dg
import pytest
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from assets import definitions, executors
from pipelines.errors import SetupError
from pipelines.lake import Lake
from pipelines.pull.landing import today
from pipelines.settings import load_settings
from pipelines.warehouse.relations import refresh_warehouse
from tests.distributed.conftest import Deployment
from tests.pipelines.test_object_store import WINDOW_DAYS, assert_lake_equals_truth

#: Every pulled stream, each after the streams it reads, as `assets/sync.py` orders a sync
#: (`run_order`): the day streams first, since members are looked up for the members of
#: landed messages; then the broadcast reports again, now that their broadcasts have landed.
JOBS = ("all_daily", "all_dimensions", "datahub_daily")
#: How long a run may take on a busy machine: a bound on a wait, not a figure.
RUN_SECONDS = 600


def launch(deployment: Deployment, job: str, tags: dict[str, str]) -> None:
    """A run of `job` through the deployment's launcher (`Deployment.start_job`), waited for."""
    process, log = deployment.start_job(job, "--tags", json.dumps(tags))
    assert process.wait(timeout=RUN_SECONDS) == 0, log.read_text()[-5000:] + deployment.tails()


def test_every_stream_synced_on_two_dask_workers_equals_the_truth(deployment, monkeypatch):
    """Each run succeeds, every step of its job ran once, in a worker's process, and both
    workers ran steps; no check of severity ERROR failed; the lake equals the truth."""
    last = today()
    first = last - timedelta(days=WINDOW_DAYS - 1)
    days = {
        ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
        ASSET_PARTITION_RANGE_END_TAG: last.isoformat(),
    }
    for job in JOBS:
        launch(deployment, job, days if job.endswith("_daily") else {})

    # This process reads the runs as the UI would: an instance on the same storage.
    monkeypatch.setenv("DAGSTER_HOME", str(deployment.launcher.folder / "dagster"))
    workers = set(deployment.worker_pids.values())
    ran_in: set[int] = set()
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert sorted(run.job_name for run in runs) == sorted(JOBS)
        for run in runs:
            assert run.status == dg.DagsterRunStatus.SUCCESS, run.job_name
            started = [
                entry.dagster_event
                for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
            ]
            job = definitions.defs.resolve_job_def(run.job_name)
            assert sorted(s.step_key for s in started) == sorted(n.name for n in job.nodes)
            ran_in |= {step.pid for step in started}
            checked = [
                entry.dagster_event.asset_check_evaluation_data
                for entry in instance.all_logs(
                    run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
                )
            ]
            failed = [
                (c.asset_key.to_user_string(), c.asset_check_key.name)
                for c in checked
                if not c.passed and c.severity == dg.AssetCheckSeverity.ERROR
            ]
            assert checked and failed == [], run.job_name
    assert ran_in == workers, deployment.worker_pids

    settings = load_settings()
    warehouse = str(settings.warehouse_path)  # this host's own, built from the bucket
    refresh_warehouse(settings.lake_root, warehouse, settings.warehouse_sql)
    assert_lake_equals_truth(deployment.sandbox, Lake(deployment.lake_root), warehouse, first, last)


@pytest.mark.parametrize("value", [None, "", "multiprocess"])
def test_dagster_executor_unset_is_the_forkserver_multiprocess_one(value, monkeypatch):
    if value is None:
        monkeypatch.delenv("DAGSTER_EXECUTOR", raising=False)
    else:
        monkeypatch.setenv("DAGSTER_EXECUTOR", value)
    chosen = executors.executor()
    assert chosen.name == "multi_or_in_process_executor"
    config = chosen.apply_config_mapping({}).value["config"]
    # The fork server imports the code location once, so that a step does not.
    assert config["multiprocess"]["start_method"] == {
        "forkserver": {"preload_modules": ["dagster", "assets.definitions"]}
    }


def test_dagster_executor_dask_reads_the_scheduler_address_when_a_run_starts(monkeypatch):
    monkeypatch.setenv("DAGSTER_EXECUTOR", "dask")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    chosen = executors.executor()  # as the code location loads
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:8786")
    assert chosen.name == "dask"
    config = chosen.apply_config_mapping({}).value["config"]
    assert config == {"cluster": {"existing": {"address": "tcp://127.0.0.1:8786"}}}


def test_an_unknown_dagster_executor_loads_and_each_run_fails_saying_what_to_set(monkeypatch):
    """As wrong settings do (`assets/resources.py`): the code location loads, and a run
    fails where Dagster makes its executor, at its start."""
    monkeypatch.setenv("DAGSTER_EXECUTOR", "celery")
    chosen = executors.executor()
    with pytest.raises(SetupError) as refused:
        chosen.executor_creation_fn(None)
    assert str(refused.value) == (
        "DAGSTER_EXECUTOR='celery' is not an executor: set one of multiprocess, dask "
        "(unset: multiprocess)"
    )
