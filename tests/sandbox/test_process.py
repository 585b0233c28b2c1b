"""`sandbox/process.py`'s children (the demo's sandbox and receivers): their output is read
as it comes, so a child that writes a lot never stalls, and a failed start still says why."""

import httpx
import pytest

from sandbox.process import running_process
from tests.servers import free_port

CHILD = "tests.sandbox.noisy_child"


def test_a_child_writing_more_than_a_pipe_holds_keeps_answering():
    """Each answer follows 32 KiB on stderr: unread, a 64 KiB pipe would block the child
    before its third answer, and the demo's webhook receiver (a line a request) stalled so
    after some 1,700 deliveries."""
    with running_process(CHILD, free_port()) as base:
        for _ in range(8):  # 256 KiB in all
            assert httpx.get(base, timeout=5).status_code == 200


def test_a_child_that_exits_at_start_is_told_with_its_last_words():
    failed = pytest.raises(RuntimeError, match="exited at start:\nnoisy_child: told to fail")
    with failed, running_process(CHILD, free_port(), "--fail"):
        pass
