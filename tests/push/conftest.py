"""The push tests run against the same live sandbox fixtures as the pull tests."""

from tests.pipelines.conftest import frozen_sandbox, start_sandbox, sync_env  # noqa: F401
