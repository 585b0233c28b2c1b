"""The fault pass runs the commands as a user does, against the same sandbox fixtures as
the pull and push tests, with an object store a test can take away and bring back."""

import contextlib
import io
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pyarrow.fs as pafs
import pytest
from moto.server import ThreadedMotoServer

from tests.pipelines.conftest import (  # noqa: F401
    _frozen_by_day,
    frozen_sandbox,
    start_sandbox,
    sync_env,
)
from tests.webhooks.conftest import spawn_receiver  # noqa: F401


def no_room() -> None:
    """A full disk for this process: no file it writes may grow past 0 bytes."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing it
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def command(*args: str, room: bool = True, timeout: float = 600) -> tuple[int, str]:
    """`python -m cli <args>` as a user runs it; its exit code and all it printed."""
    finished = subprocess.run(
        [sys.executable, "-m", "cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ.copy(),
        preexec_fn=None if room else no_room,
        timeout=timeout,
    )
    return finished.returncode, finished.stdout


def run_here(*args: str) -> tuple[int, str]:
    """`python -m cli <args>` run in this process (`cli/main.py`'s `main`): for a run
    before the fault or the one after it, of which the exit code and what it printed are
    asserted, not how a process starts and ends (the faulted run is `command`'s, or
    `meanwhile`'s), so it does not pay a process start and Dagster's import. Its exit code and
    all it printed."""
    from cli.main import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main(list(args))
    return code, printed.getvalue()


def meanwhile(
    args: tuple[str, ...], ready: Callable[[], bool], fault: Callable[[subprocess.Popen], None]
) -> tuple[int, str]:
    """`python -m cli <args>`, with `fault` done to it or its environment once
    `ready()` holds while it runs; its exit code (negative: the signal that ended it) and
    what it printed."""
    running = subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready():
            assert running.poll() is None, f"it ended first:\n{running.communicate()[0]}"
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.002)
        fault(running)
        output, _ = running.communicate(timeout=600)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    return running.returncode, output


def told(output: str, *words: str) -> str:
    """The one line of `output` that names every one of `words`; no traceback anywhere."""
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if all(word in line for word in words)]
    assert lines, f"no line names {words}:\n{output}"
    return lines[-1]


class Cut:
    """A TCP proxy to `target` on a port of its own, that a test can cut: every connection
    through it closed and none accepted until it is restored, as when a store goes away
    (stopping the store itself would leave its open connections serving)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        #: Bytes the store has sent through the proxy (downloads, listings, answers).
        self.downloaded = 0
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection(self.target)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self._sockets |= {client, server}
            for source, sink, counted in ((client, server, False), (server, client, True)):
                pipe = threading.Thread(target=self._pipe, args=(source, sink, counted))
                pipe.daemon = True
                pipe.start()

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
                if counted:
                    self.downloaded += len(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@dataclass
class Store:
    """An S3-compatible store (moto) behind a proxy a test can cut and restore."""

    server: ThreadedMotoServer
    proxy: Cut

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    def stop(self) -> None:
        """The store goes away: nothing answers at its address."""
        self.proxy.cut()

    def start(self) -> None:
        """Back, with what it held."""
        self.proxy.restore()

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
    # moto keeps its buckets in the process, not the server: an earlier test's objects in
    # `faults` would be there from the start.
    host, port = server.get_host_and_port()
    httpx.post(f"http://{host}:{port}/moto-api/reset").raise_for_status()
    store = Store(server, Cut(server.get_host_and_port()))
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
    store.proxy.cut()
    server.stop()
