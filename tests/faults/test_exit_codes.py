"""Exit codes come from the error's branch (`pipelines/errors.py`, docs/running.md): the
environment going away during a run, the object store or the shared store (`SYNC_STORE`),
is the environment's code (1), never a setting's (2)."""

import os
import subprocess
import sys
from datetime import timedelta
from urllib.parse import urlsplit

import pytest

from pipelines.pull.landing import today
from tests.faults.conftest import meanwhile, told
from tests.faults.test_fault_pass import shop
from tests.push.test_push import RECORDS, submissions


def test_sync_with_the_store_gone_between_its_streams_exits_1_naming_it(
    frozen_sandbox, sync_env, object_store
):
    sync_env(frozen_sandbox, lake_root="s3://faults/lake")
    first = (today() - timedelta(days=20)).isoformat()
    args = ("--streams", "trigger_logs", "daily_stats", "--start", first)

    code, output = meanwhile(
        ("sync", *args, "--end", today().isoformat()),
        lambda: any(f.endswith(".parquet") for f in object_store.files("faults")),
        lambda _: object_store.stop(),
    )
    assert code == 1, output
    # Regression: a traceback, the next stream's days listed outside any step, then raw
    # library text from the step's listing of its own days.
    line = told(output, "FAILED comment.daily_stats: LAKE_ROOT=s3://faults/lake")
    assert f"nothing answers at {object_store.endpoint}; correct AWS_ENDPOINT_URL" in line
    assert "the next sync lands what this one could not" in line
    assert "fault-test-secret" not in output


def refusing(postgres_url: str, store: str) -> None:
    """The shared store goes away: its database refuses new connections and ends the open
    ones (a server stopped, a failover)."""
    import psycopg

    name = urlsplit(store).path.lstrip("/")
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )


def test_push_with_the_shared_store_gone_mid_run_exits_1_naming_it(
    start_sandbox, sync_env, postgres_url, shared_store, monkeypatch
):
    sandbox = start_sandbox()
    shop(sandbox, sync_env, monkeypatch)
    monkeypatch.setenv("SYNC_STORE", shared_store)

    code, output = meanwhile(
        ("push", "--types", *RECORDS),
        lambda: submissions(sandbox) >= 50,
        lambda _: refusing(postgres_url, shared_store),
    )
    assert code == 1, output
    line = told(output, "FAILED push: ", "(SYNC_STORE) cannot be used")
    # The store's advice, not the disk's.
    assert "Postgres is running" in line and "Free space" not in line, line


@pytest.mark.parametrize("receiver", ["pipelines.webhooks", "pipelines.agent"])
def test_a_receiver_whose_shared_store_is_gone_exits_1_naming_it(
    postgres_url, shared_store, tmp_path, receiver
):
    """Regression: the agent exited 2, a setting to fix."""
    refusing(postgres_url, shared_store)
    env = {
        "SYNC_STORE": shared_store,
        "LAKE_ROOT": str(tmp_path / "lake"),
        "WEBHOOK_SECRET": "whsec-exit-codes",
        "AGENT_TOKEN": "agent-exit-codes",
    }
    refused = subprocess.run(
        [sys.executable, "-m", receiver, "--port", "9"],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    assert "(SYNC_STORE) cannot be used" in line and "Traceback" not in refused.stderr
