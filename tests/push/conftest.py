"""The push tests run against the same live sandbox fixtures as the pull tests, with the
demo's SQL (the shop and its example outbound views, demo/sql) in the warehouse."""

import pytest

import demo
from tests.pipelines.conftest import frozen_sandbox, start_sandbox, sync_env  # noqa: F401


@pytest.fixture(autouse=True)
def demo_sql(monkeypatch) -> None:
    """`WAREHOUSE_SQL=demo/sql`, as `make demo` sets it; a test may set it otherwise."""
    for name, value in demo.environment().items():
        monkeypatch.setenv(name, value)
