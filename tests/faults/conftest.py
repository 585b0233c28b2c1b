"""The fault pass runs the commands as a user does, against the same sandbox fixtures as
the pull and push tests, with an object store a test can stop and start again."""

import logging
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs
import pytest
from moto.server import ThreadedMotoServer

from tests.pipelines.conftest import (  # noqa: F401
    _frozen_by_day,
    frozen_sandbox,
    start_sandbox,
    sync_env,
)


def no_room() -> None:
    """A full disk for this process: no file it writes may grow past 0 bytes."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing it
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def command(*args: str, room: bool = True, timeout: float = 600) -> tuple[int, str]:
    """`python -m pipelines <args>` as a user runs it; its exit code and all it printed."""
    finished = subprocess.run(
        [sys.executable, "-m", "pipelines", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ.copy(),
        preexec_fn=None if room else no_room,
        timeout=timeout,
    )
    return finished.returncode, finished.stdout


def told(output: str, *words: str) -> str:
    """The one line of `output` that names every one of `words`; no traceback anywhere."""
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if all(word in line for word in words)]
    assert lines, f"no line names {words}:\n{output}"
    return lines[-1]


@dataclass
class Store:
    """An S3-compatible store (moto) on a fixed address, that a test can stop and start."""

    host: str
    port: int
    server: ThreadedMotoServer
    running: bool = True

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self.server.stop()
        self.running = False

    def start(self) -> None:
        """Back, with what it held (moto keeps it in this process)."""
        self.server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self.server.start()
        self.running = True

    def files(self, bucket: str) -> list[str]:
        fs = pafs.S3FileSystem(endpoint_override=self.endpoint, region="us-east-1")
        selector = pafs.FileSelector(bucket, allow_not_found=True, recursive=True)
        return [f.path for f in fs.get_file_info(selector) if f.is_file]


@pytest.fixture
def object_store(monkeypatch) -> Iterator[Store]:
    """A running store with a bucket `faults`, and the AWS variables a user sets for it;
    `LAKE_ROOT` is the test's to set."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    store = Store(host, port, server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fault-test-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", store.endpoint)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    fs = pafs.S3FileSystem(
        endpoint_override=store.endpoint, region="us-east-1", allow_bucket_creation=True
    )
    fs.create_dir("faults")
    yield store
    if store.running:
        store.stop()
