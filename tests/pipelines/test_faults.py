"""Faults of the environment told as what they are: the object store going away mid-sync is
the store's failure, named by its settings, not the service's; the next sync converges."""

import logging
import os
import time
from datetime import timedelta

import pyarrow.fs as pafs
from moto.server import ThreadedMotoServer

from pipelines.lake import Lake
from pipelines.landing import today
from tests.pipelines.test_comment import workspace_id
from tests.pipelines.test_damaged import landed_days
from tests.pipelines.test_sync import finished, sync

#: Long enough that the store is stopped while the sync still lands.
DAYS = 20


def test_the_store_going_away_mid_sync_is_told_as_the_stores_and_the_next_sync_converges(
    frozen_sandbox, sync_env, monkeypatch
):
    """Regression: `comment connection 'default' (http://…): OSError: When uploading object …
    AWS Error NETWORK_CONNECTION`, then an uncaught traceback from the warehouse's refresh."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    sync_env(frozen_sandbox)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fault-test-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = pafs.S3FileSystem(
        endpoint_override=endpoint, region="us-east-1", allow_bucket_creation=True
    )
    store.create_dir("faults")
    monkeypatch.setenv("LAKE_ROOT", "s3://faults/lake")
    first = (today() - timedelta(days=DAYS)).isoformat()
    args = ("--streams", "trigger_logs", "--start", first, "--end", today().isoformat())

    running = sync(*args)
    try:
        deadline = time.monotonic() + 300
        folder = pafs.FileSelector("faults/lake", allow_not_found=True, recursive=True)
        while not [f for f in store.get_file_info(folder) if f.path.endswith(".parquet")]:
            assert running.poll() is None, running.communicate()[0]
            assert time.monotonic() < deadline, "nothing landed"
            time.sleep(0.05)
        server.stop()  # the store goes away while the sync lands
        output, _ = running.communicate(timeout=600)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 1, output
    assert "Traceback" not in output and "fault-test-secret" not in output
    told = [line for line in output.splitlines() if "LAKE_ROOT=s3://faults/lake" in line]
    assert len(told) >= 2, output  # the landing's connection and the views
    for line in told:
        assert f"nothing answers at {endpoint}" in line and "AWS_ENDPOINT_URL" in line, line
    assert any(line.startswith("FAILED warehouse: ") for line in told), output

    restarted = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    restarted.start()  # the store is back, with what it held (moto keeps it in this process)
    try:
        assert "FAILED" not in finished(sync(*args))
        truth = frozen_sandbox.truth_days("comment", workspace_id(frozen_sandbox), "trigger_logs")
        wanted = {day: n for day, n in truth.items() if first <= day and n}
        assert landed_days(Lake(os.environ["LAKE_ROOT"])) == wanted
    finally:
        restarted.stop()
